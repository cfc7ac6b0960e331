import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { createToken, revokeToken } from '../../api/tokens';
import { useHarness } from '../support/harness';
import { agentWorkflowId } from '../../workflows/agent-contract';
import { startTestApi, tokenSecret, type TestApi } from './api-support';

/**
 * Auth and bad input on every route of the HTTP API: no token → 401, a token of too small a scope →
 * 403, an oversized body → 413, malformed JSON → 400 with a clear message, an unknown task → 404, and
 * every error in the `{ error: { code, message } }` shape without a stack trace. No worker is needed:
 * every request here is refused before it reaches a workflow.
 */
describe('HTTP API: auth and bad input on every route', () => {
  const h = useHarness({
    beforeClose: async () => {
      await api.close();
    },
  });
  let api: TestApi;
  let agentId: string;
  const BODY_LIMIT = 4_096;
  const RATE_LIMIT = 40;

  beforeAll(async () => {
    api = await startTestApi(h, { bodyLimitBytes: BODY_LIMIT, rateLimitPerMinute: RATE_LIMIT * 100 });
    agentId = await h.createAgent();
  });

  const unknownTask = `missing-${randomUUID()}`;
  const agentBody = { name: 'Writer', files: { soul: 'You write.', agents: '', heartbeat: '', tools: '' } };
  /** Every route, the scope it needs, and a body that would be valid. */
  const routes = (): Array<{
    method: string;
    path: string;
    scope: 'read' | 'service' | 'operator';
    body?: unknown;
    task?: boolean;
    /** Concerns every organisation: the right scope passes only with the platform token. */
    platform?: boolean;
  }> => [
    { method: 'GET', path: '/metrics', scope: 'read' },
    { method: 'GET', path: '/v1/agents', scope: 'read' },
    { method: 'GET', path: `/v1/agents/${agentId}`, scope: 'read' },
    { method: 'PUT', path: `/v1/agents/${agentId}`, scope: 'operator', body: agentBody },
    { method: 'GET', path: `/v1/agents/${agentId}/usage`, scope: 'read' },
    { method: 'POST', path: '/v1/tasks', scope: 'service', body: { agentId, title: 'Write' } },
    { method: 'GET', path: `/v1/tasks/${unknownTask}`, scope: 'read', task: true },
    { method: 'GET', path: `/v1/tasks/${unknownTask}/usage`, scope: 'read', task: true },
    { method: 'GET', path: `/v1/tasks/${unknownTask}/events`, scope: 'read', task: true },
    { method: 'GET', path: `/v1/tasks/${unknownTask}/deltas`, scope: 'read', task: true },
    { method: 'POST', path: `/v1/tasks/${unknownTask}/cancel`, scope: 'operator', task: true },
    {
      method: 'POST',
      path: `/v1/tasks/${unknownTask}/pause`,
      scope: 'operator',
      body: { reason: 'lunch' },
      task: true,
    },
    { method: 'POST', path: `/v1/tasks/${unknownTask}/resume`, scope: 'operator', task: true },
    {
      method: 'POST',
      path: `/v1/tasks/${unknownTask}/comments`,
      scope: 'service',
      body: { text: 'use tabs' },
      task: true,
    },
    {
      method: 'POST',
      path: `/v1/tasks/${unknownTask}/review`,
      scope: 'operator',
      body: { decision: 'accept' },
      task: true,
    },
    { method: 'GET', path: '/v1/approvals', scope: 'read' },
    { method: 'POST', path: '/v1/approvals/no-such-request', scope: 'operator', body: { decision: 'approved' } },
    { method: 'GET', path: '/inbox', scope: 'operator' },
    { method: 'GET', path: `/v1/agents/${agentId}/mailbox`, scope: 'read' },
    { method: 'GET', path: `/v1/agents/${agentId}/chat/no-such-item/stream`, scope: 'read' },
    { method: 'POST', path: `/v1/agents/${agentId}/chat`, scope: 'service', body: { text: 'hello' } },
    { method: 'GET', path: `/v1/notifications?agentId=${agentId}&unread=true`, scope: 'read' },
    { method: 'POST', path: '/v1/notifications/read', scope: 'service', body: { ids: ['ntf_no_such_notification'] } },
    { method: 'GET', path: '/v1/organisations/no-such-org', scope: 'read' },
    // The database is shared with other test files: bodies that pass auth but are refused, so nothing is written.
    {
      method: 'PUT',
      path: '/v1/organisations/no-such-org',
      scope: 'operator',
      body: { users: [{ handle: 'not a handle', profile: 'x' }] },
    },
    { method: 'GET', path: '/v1/skills', scope: 'read' },
    {
      method: 'PUT',
      path: '/v1/skills/no-such-skill',
      scope: 'operator',
      body: { description: '', body: 'x' },
      platform: true,
    },
    { method: 'GET', path: `/v1/agents/${agentId}/skills`, scope: 'read' },
    // An unknown organisation: even a request that got through would post nothing to every agent.
    {
      method: 'POST',
      path: '/v1/announcements',
      scope: 'operator',
      body: { text: 'never posted', org: 'no-such-org' },
    },
    { method: 'GET', path: '/v1/announcements', scope: 'read' },
  ];
  const lowerScope = { read: undefined, service: 'read', operator: 'service' } as const;

  const expectError = (response: { status: number; body: any }, status: number, code: string | RegExp) => {
    expect([response.status, response.body]).toEqual([
      status,
      { error: { code: expect.stringMatching(code), message: expect.any(String) } },
    ]);
    expect(JSON.stringify(response.body)).not.toMatch(/\n\s+at |node_modules|\.ts:\d+/);
  };

  test('no token, a malformed header, an unknown or a revoked token → 401 on every route; /healthz and the OpenAPI document are open', async () => {
    const { token: revoked } = await createToken(h.db.db, `revoked-${randomUUID().slice(0, 8)}`, 'operator');
    expect(await revokeToken(h.db.db, revoked.split('_')[1]!)).toBe(true);
    for (const route of routes()) {
      const none = await api.call(route.method, route.path, { token: null, body: route.body });
      // A browser without a session is sent to the inbox's sign-in page (test/api/inbox.test.ts).
      if (route.path === '/inbox')
        expect([none.status, String(none.body)]).toEqual([200, expect.stringContaining('Sign in to the inbox')]);
      else {
        expectError(none, 401, 'unauthorized');
        expect(none.body.error.message).toMatch(/Bearer|token/);
      }
      expectError(
        await api.call(route.method, route.path, {
          token: null,
          body: route.body,
          headers: { authorization: 'Basic abc' },
        }),
        401,
        'unauthorized',
      );
      expectError(
        await api.call(route.method, route.path, { token: `da_000000000000_${'x'.repeat(43)}`, body: route.body }),
        401,
        'unauthorized',
      );
      expectError(await api.call(route.method, route.path, { token: revoked, body: route.body }), 401, 'unauthorized');
    }
    const health = await api.call('GET', '/healthz', { token: null });
    expect(health).toMatchObject({
      status: 200,
      body: { status: 'ok', postgres: { ok: true }, temporal: { ok: true } },
    });
    const spec = await api.call('GET', '/v1/openapi.json', { token: null });
    expect([spec.status, spec.body.openapi, spec.body.servers]).toEqual([
      200,
      '3.1.0',
      [{ url: api.url, description: 'This API' }],
    ]);
  });

  test('a token of too small a scope → 403 naming the scope needed; the right scope passes auth', async () => {
    for (const route of routes()) {
      const lower = lowerScope[route.scope];
      if (lower) {
        const refused = await api.call(route.method, route.path, { token: api.tokens[lower], body: route.body });
        expectError(refused, 403, 'forbidden');
        expect(refused.body.error.message).toContain(`scope "${route.scope}"`);
      }
      const token = route.platform ? api.platformToken : api.tokens[route.scope];
      const allowed = await api.call(route.method, route.path, { token, body: route.body });
      expect([route.path, [401, 403].includes(allowed.status)]).toEqual([route.path, false]);
      // Nothing polls this test's task queue: end the workflow the start route began.
      if (allowed.status === 201) await h.client.handle(allowed.body.taskId).terminate('test cleanup');
      // The chat delivery started the agent's workflow (it waits for a worker that never comes): end it.
      if (route.path.endsWith('/chat'))
        await h.temporal.workflow
          .getHandle(agentWorkflowId(agentId))
          .terminate('test cleanup')
          .catch(() => undefined);
    }
  });

  test('an oversized body → 413; malformed JSON → 400 malformed_json; schema violations → 400 naming the field', async () => {
    for (const route of routes().filter((r) => r.body !== undefined)) {
      const big = await api.call(route.method, route.path, {
        rawBody: JSON.stringify({ text: 'x'.repeat(BODY_LIMIT * 2) }),
      });
      expectError(big, 413, 'payload_too_large');
      const malformed = await api.call(route.method, route.path, { rawBody: '{"title": "Write", ' });
      expectError(malformed, 400, 'malformed_json');
      expect(malformed.body.error.message).toMatch(/not valid JSON/);
      const wrong = await api.call(route.method, route.path, { body: { unexpected: 1 } });
      expectError(wrong, 400, /invalid_request|task_not_found|approval_not_found/);
    }
    const missingTitle = await api.call('POST', '/v1/tasks', {
      token: api.tokens.service,
      body: { agentId, title: '  ' },
    });
    expectError(missingTitle, 400, 'invalid_request');
    expect(missingTitle.body.error.message).toBe('body.title: a task needs a title');
    const badAgentId = await api.call('PUT', '/v1/agents/Bad%20Id', { body: agentBody });
    expect(badAgentId.body.error.message).toMatch(/^path.agentId: an agent id is 1-63 lowercase/);
    const noIdentity = await api.call('PUT', `/v1/agents/${agentId}`, {
      body: { name: 'x', files: { soul: '', agents: '', heartbeat: '', tools: '' } },
    });
    expect(noIdentity.body.error.message).toMatch(/body.files: an agent needs SOUL.md or AGENTS.md/);
    const badSince = await api.call('GET', `/v1/agents/${agentId}/usage?since=yesterday`, { token: api.tokens.read });
    expect(badSince.body.error.message).toMatch(/query.since: since must be an ISO 8601 date-time/);
    const revise = await api.call('POST', `/v1/tasks/${unknownTask}/review`, { body: { decision: 'revise' } });
    expect(revise.body.error.message).toMatch(/body.feedback: a revision needs feedback/);
    const badUnread = await api.call('GET', '/v1/notifications?unread=yes', { token: api.tokens.read });
    expect([badUnread.status, badUnread.body.error.message]).toEqual([
      400,
      'query.unread: unread must be true or false',
    ]);
    const emptyChat = await api.call('POST', `/v1/agents/${agentId}/chat`, { body: { text: '   ' } });
    expect([emptyChat.status, emptyChat.body.error.message]).toEqual([400, 'body.text: a chat message needs text']);
    const noIds = await api.call('POST', '/v1/notifications/read', { body: { ids: [] } });
    expect([noIds.status, noIds.body.error.message]).toEqual([400, 'body.ids: name at least one notification id']);
    const badEventId = await api.call('GET', `/v1/tasks/${unknownTask}/events`, {
      token: api.tokens.read,
      headers: { 'last-event-id': 'abc' },
    });
    expect(badEventId.status).toBe(404);
  });

  test('an unknown task → 404 task_not_found on every task route; unknown agents and approval requests → 404 too', async () => {
    for (const route of routes().filter((r) => r.task)) {
      const response = await api.call(route.method, route.path, { token: api.tokens[route.scope], body: route.body });
      expectError(response, 404, 'task_not_found');
      expect(response.body.error.message).toContain(unknownTask);
    }
    expectError(await api.call('GET', '/v1/agents/nobody-here'), 404, 'agent_not_found');
    expectError(await api.call('GET', '/v1/agents/nobody-here/usage'), 404, 'agent_not_found');
    expectError(
      await api.call('POST', '/v1/tasks', { body: { agentId: 'nobody-here', title: 'Write' } }),
      404,
      'agent_not_found',
    );
    expectError(
      await api.call('POST', '/v1/approvals/no-such-request', { body: { decision: 'approved' } }),
      404,
      'approval_not_found',
    );
    expectError(await api.call('GET', '/v1/nothing'), 404, 'route_not_found');
    expectError(await api.call('GET', '/v1/notifications?agentId=nobody-here'), 404, 'agent_not_found');
    expectError(
      await api.call('POST', '/v1/agents/nobody-here/chat', { body: { text: 'hi' } }),
      404,
      'agent_not_found',
    );
    expectError(await api.call('GET', '/v1/agents/nobody-here/mailbox'), 404, 'agent_not_found');
    expectError(await api.call('GET', '/v1/agents/nobody-here/chat/x/stream'), 404, 'agent_not_found');
    expectError(await api.call('GET', `/v1/agents/${agentId}/chat/no-such-item/stream`), 404, 'item_not_found');
    const unknownNotification = await api.call('POST', '/v1/notifications/read', { body: { ids: ['ntf_missing_1'] } });
    expectError(unknownNotification, 404, 'notification_not_found');
    expect(unknownNotification.body.error.message).toContain('ntf_missing_1');
  });

  test('the OpenAPI document lists every route with its schemas', async () => {
    const { status, body } = await api.call('GET', '/v1/openapi.json', { token: null });
    expect(status).toBe(200);
    expect(body.openapi).toBe('3.1.0');
    for (const route of routes().filter((r) => r.path.startsWith('/v1/') && r.path !== '/v1/openapi.json')) {
      const templated = route.path
        .split('?')[0]!
        .replace(agentId, '{agentId}')
        .replace(unknownTask, '{taskId}')
        .replace('no-such-request', '{requestId}')
        .replace('no-such-item', '{itemId}')
        .replace('no-such-org', '{org}')
        .replace('no-such-skill', '{name}');
      expect([templated, Object.keys(body.paths[templated] ?? {})]).toEqual([
        templated,
        expect.arrayContaining([route.method.toLowerCase()]),
      ]);
    }
    expect(body.paths['/v1/tasks'].post.requestBody.content['application/json'].schema.required).toEqual([
      'agentId',
      'title',
    ]);
    expect(
      body.paths['/v1/tasks/{taskId}'].get.responses['200'].content['application/json'].schema.properties.state.enum,
    ).toContain('review');
  });

  test('a Temporal call that does not answer in time → 504 with a hint, not a hung request', async () => {
    const CALL_TIMEOUT_MS = 1_000;
    const impatient = await startTestApi(h, { callTimeoutMs: CALL_TIMEOUT_MS });
    try {
      // Nothing polls this test's task queue, so the workflow cannot answer its status query.
      const started = await impatient.call('POST', '/v1/tasks', {
        token: impatient.tokens.service,
        body: { agentId, title: 'Unanswered' },
      });
      expect(started.status).toBe(201);
      const before = Date.now();
      const status = await impatient.call('GET', `/v1/tasks/${started.body.taskId}`, { token: impatient.tokens.read });
      expectError(status, 504, 'timeout');
      expect(status.body.error.message).toMatch(/did not answer within 1000 ms; is a worker polling the task queue\?/);
      expect(Date.now() - before).toBeLessThan(CALL_TIMEOUT_MS * 5);
      await h.client.handle(started.body.taskId).terminate('test cleanup');
    } finally {
      await impatient.close();
    }
  });

  test('request logs never contain a token: not the Authorization header, the session cookie, the sign-in form, nor a token wrongly put in a URL', async () => {
    const lines: string[] = [];
    const stream = new Writable({ write: (chunk, _encoding, done) => void (lines.push(String(chunk)), done()) });
    const logged = await startTestApi(h, { logger: { stream } });
    try {
      // A token in a URL is refused (and redacted in the log line of that refusal).
      expect((await fetch(`${logged.url}/inbox?token=${logged.tokens.operator}`, { redirect: 'manual' })).status).toBe(
        400,
      );
      const signIn = await fetch(`${logged.url}/inbox/sign-in`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: logged.url },
        body: `token=${encodeURIComponent(logged.tokens.operator)}`,
      });
      expect(signIn.status).toBe(303);
      const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
      expect(cookie).toMatch(/^da_session=[A-Za-z0-9_-]{43}$/);
      expect((await fetch(`${logged.url}/inbox`, { headers: { cookie } })).status).toBe(200);
      expect((await logged.call('GET', '/v1/agents', { token: logged.tokens.read })).status).toBe(200);
    } finally {
      await logged.close();
    }
    const log = lines.join('');
    expect(log).toContain('/inbox?token=[redacted]');
    for (const token of Object.values(logged.tokens)) expect(log).not.toContain(tokenSecret(token));
  });

  test('the per-token rate limit answers 429 with Retry-After, and counts each token separately', async () => {
    const limited = await startTestApi(h, { rateLimitPerMinute: RATE_LIMIT });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < RATE_LIMIT + 5; i++)
        statuses.push((await limited.call('GET', '/v1/agents', { token: limited.tokens.read })).status);
      expect(statuses.slice(0, RATE_LIMIT).every((s) => s === 200)).toBe(true);
      const refused = await limited.call('GET', '/v1/agents', { token: limited.tokens.read });
      expectError(refused, 429, 'rate_limited');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect((await limited.call('GET', '/v1/agents', { token: limited.tokens.service })).status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});
