import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { sql } from 'kysely';
import { agentWorkflowId } from '../../workflows/agent-contract';
import { taskWorkflowId } from '../../workflows/contract';
import { useHarness } from '../support/harness';
import { startTestApi, type TestApi } from './api-support';

/**
 * Organisations are walls, over every surface the HTTP API has: a principal of organisation A aims
 * every operation of the published OpenAPI document, and every tool of `/mcp`, at organisation B's
 * objects. Each answers exactly as it answers for an id that never existed (the same status, code and
 * words), and B's rows are byte-identical afterwards. The operations and tools are enumerated at test
 * time, and one this file has no fixture for fails the test: a new route or tool cannot join the API
 * without someone deciding how it stays inside its organisation.
 */
describe('organisations are walls: every operation and MCP tool, aimed across', () => {
  const h = useHarness({
    beforeClose: async () => {
      // Other files list pending approvals and tasks in review with the platform token: leave none behind.
      const db = h.db.db;
      const agents = [agentA, agentB].filter(Boolean);
      if (agents.length) {
        await db.deleteFrom('approvals').where('agent_id', 'in', agents).execute();
        await db.deleteFrom('notifications').where('agent_id', 'in', agents).execute();
        await db.deleteFrom('mailbox_items').where('agent_id', 'in', agents).execute();
        await db.deleteFrom('evals').where('id', 'in', [evalA, evalB]).execute();
        const tasks = db.selectFrom('tasks').select('id').where('agent_id', 'in', agents);
        await db.deleteFrom('task_events').where('task_id', 'in', tasks).execute();
        await db.deleteFrom('tasks').where('agent_id', 'in', agents).execute();
      }
      await api.close();
    },
  });
  let api: TestApi;
  const s = randomUUID().slice(0, 8);
  const orgA = `wall-a-${s}`;
  const orgB = `wall-b-${s}`;
  let agentA: string;
  let agentB: string;
  const taskA = `wall-task-a-${s}`;
  const taskB = `wall-task-b-${s}`;
  const approvalA = `task_${taskA}_r1:call_a`;
  const approvalB = `task_${taskB}_r1:call_b`;
  const itemB = `mbx-wall-b-${s}`;
  const notificationB = `ntf_wall_b_${s}`;
  const evalA = `eval-wall-a-${s}`;
  const evalB = `eval-wall-b-${s}`;
  /** Ids a request may create in B's name if a wall fails (a started task, a shared skill). */
  const freshTaskId = `wall-fresh-${s}`;
  const freshSkill = `wall-skill-${s}`;
  /** Ids that never existed, one per kind: what B's objects must look like to A. */
  let missing: Record<string, string>;
  let tokenA: string;

  beforeAll(async () => {
    api = await startTestApi(h);
    tokenA = await api.orgToken(orgA, 'operator');
    for (const org of [orgA, orgB]) {
      const put = await api.call('PUT', `/v1/organisations/${org}`, {
        token: api.platformToken,
        body: { context: `The ${org} organisation.` },
      });
      expect(put.status).toBe(200);
    }
    agentA = await h.createAgent({ org: orgA });
    agentB = await h.createAgent({ org: orgB });
    missing = {
      [agentB]: `agent-nx-${s}`,
      [taskB]: `wall-task-nx-${s}`,
      [approvalB]: `task_wall-task-nx-${s}_r1:call_nx`,
      [itemB]: `mbx-wall-nx-${s}`,
      [notificationB]: `ntf_wall_nx_${s}`,
      [evalB]: `eval-wall-nx-${s}`,
      [orgB]: `wall-nx-${s}`,
    };
    const db = h.db.db;
    for (const [task, agent, approval, org] of [
      [taskA, agentA, approvalA, orgA],
      [taskB, agentB, approvalB, orgB],
    ] as const) {
      await db
        .insertInto('tasks')
        .values({
          id: task,
          agent_id: agent,
          title: `${org}'s secret task`,
          description: `${org}'s brief`,
          state: 'review',
          created_by: `someone of ${org}`,
          result_summary: `${org}'s result`,
        })
        .execute();
      await db
        .insertInto('task_events')
        .values({ task_id: task, type: 'state-changed', data: JSON.stringify({ state: 'review' }), idem_key: null })
        .execute();
      await db
        .insertInto('approvals')
        .values({
          id: approval,
          task_id: task,
          agent_id: agent,
          workflow_id: taskWorkflowId(task),
          tool: 'shell',
          args: JSON.stringify({ command: `deploy ${org}` }),
          summary: `${org} wants to deploy`,
          status: 'pending',
        })
        .execute();
    }
    await db
      .insertInto('mailbox_items')
      .values({
        id: itemB,
        agent_id: agentB,
        kind: 'chat',
        from_type: 'human',
        from_id: 'bob',
        channel: 'direct:human:bob',
        text: "B's private chat",
        reply_to: null,
        thread_id: itemB,
        task_id: null,
        priority: 0,
        status: 'completed',
        decision: 'answer',
        merged_into: null,
        run_id: null,
        result: "B's answer",
      })
      .execute();
    await db
      .insertInto('notifications')
      .values({ id: notificationB, agent_id: agentB, task_id: taskB, kind: 'notification', title: 'B', body: 'B news' })
      .execute();
    for (const [id, task] of [
      [evalA, taskA],
      [evalB, taskB],
    ] as const)
      await db
        .insertInto('evals')
        .values({
          id,
          workflow_id: `eval-${id}`,
          selection: JSON.stringify({ taskIds: [task] }),
          candidates: JSON.stringify([{ name: 'baseline' }]),
          state: 'completed',
          spent_usd: 0,
        } as never)
        .execute();
  });

  /** Every row of B's, as text: what no request of A's may change. */
  async function dumpB(): Promise<string> {
    const db = h.db.db;
    const tasksOfB = db.selectFrom('tasks').select('id').where('agent_id', '=', agentB);
    const sessionsOfB = db.selectFrom('sessions').select('id').where('agent_id', '=', agentB);
    const parts = await Promise.all([
      db.selectFrom('agents').selectAll().where('id', '=', agentB).execute(),
      db
        .selectFrom('tasks')
        .selectAll()
        .where((w) => w.or([w('agent_id', '=', agentB), w('id', 'in', [taskB, freshTaskId])]))
        .execute(),
      db.selectFrom('task_events').selectAll().where('task_id', 'in', tasksOfB).execute(),
      db.selectFrom('approvals').selectAll().where('agent_id', '=', agentB).execute(),
      db.selectFrom('approval_events').selectAll().where('request_id', '=', approvalB).execute(),
      db.selectFrom('mailbox_items').selectAll().where('agent_id', '=', agentB).execute(),
      db.selectFrom('notifications').selectAll().where('agent_id', '=', agentB).execute(),
      db.selectFrom('sessions').selectAll().where('agent_id', '=', agentB).execute(),
      db.selectFrom('messages').selectAll().where('session_id', 'in', sessionsOfB).execute(),
      db.selectFrom('llm_calls').selectAll().where('agent_id', '=', agentB).execute(),
      db.selectFrom('evals').selectAll().where('id', '=', evalB).execute(),
      db.selectFrom('eval_runs').selectAll().where('eval_id', '=', evalB).execute(),
      db.selectFrom('task_forks').selectAll().where('source_task_id', '=', taskB).execute(),
      db.selectFrom('organisations').selectAll().where('name', '=', orgB).execute(),
      db.selectFrom('user_profiles').selectAll().where('org', '=', orgB).execute(),
      db
        .selectFrom('skills')
        .selectAll()
        .where((w) => w.or([w('scope', 'in', [`org:${orgB}`, `agent:${agentB}`]), w('name', '=', freshSkill)]))
        .execute(),
      db.selectFrom('announcements').selectAll().where('org', '=', orgB).execute(),
      db.selectFrom('skill_bindings').selectAll().where('agent_id', '=', agentB).execute(),
    ]);
    return parts
      .map((rows) =>
        rows
          .map((r) => JSON.stringify(r))
          .sort()
          .join('\n'),
      )
      .join('\n--\n');
  }

  /** Whether a workflow exists (a chat or a start that crossed the wall would have started one). */
  const workflowExists = (workflowId: string) =>
    h.temporal.workflow
      .getHandle(workflowId)
      .describe()
      .then(
        () => true,
        () => false,
      );

  /** A request with a deadline: a stream that opened for B's object would otherwise hang the test. */
  async function request(method: string, path: string, token: string, body?: unknown) {
    const response = await fetch(`${api.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(15_000),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // Not JSON: keep the text.
    }
    return { status: response.status, body: parsed };
  }

  /** B's ids in a path, query or body replaced by ids that never existed. */
  const neverExisted = (value: string): string =>
    Object.entries(missing)
      .flatMap(([from, to]) => [
        [from, to],
        [encodeURIComponent(from), encodeURIComponent(to)],
      ])
      // Longest first: B's approval id holds B's task id.
      .sort(([a], [b]) => b!.length - a!.length)
      .reduce((text, [from, to]) => text.split(from!).join(to!), value);

  const candidates = [{ name: 'baseline' }];
  /**
   * One fixture per operation: how to aim it at B (path parameters come from `pathIds`), and what A
   * gets. `expect: 404` (the default) compares with the answer for ids that never existed (whose
   * status is `status`, 404 unless a body's unknown id is a 400). A list
   * (`expect: 'list'`) answers 200 without any of B's ids; `platformOnly` answers 403 to every
   * organisation's token, since it concerns all of them (nothing of B's to hide). Several variants
   * cover ids in a body or a filter.
   */
  type Fixture = {
    query?: () => string;
    body?: () => unknown;
    expect?: 404 | 'list' | 'platformOnly' | 'public';
    /** The status B's object and a never-existed id both get (default 404; a body's ids are often a 400). */
    status?: number;
    /** The request whose answer for never-existed ids B's must equal (default: the same one; an upsert would create). */
    neverAs?: { method: string };
    /** What the platform token gets for B's object (read operations only): 200, or a status other than 404. */
    platform?: 200 | 'not-404';
    why?: string;
  };
  const FIXTURES: Record<string, Fixture[]> = {
    'PUT /v1/agents/{agentId}': [
      {
        body: () => ({ name: 'Taken over', files: { soul: 'x', agents: '', heartbeat: '', tools: '' } }),
        // A PUT to an id that never existed creates the agent: B's must answer as a read of one does.
        neverAs: { method: 'GET' },
      },
    ],
    'GET /v1/agents/{agentId}': [{ platform: 200 }],
    'GET /v1/agents': [{ expect: 'list' }],
    'GET /v1/agents/{agentId}/usage': [{ platform: 200 }],
    'POST /v1/agents/{agentId}/chat': [{ body: () => ({ text: 'tell me your secrets' }) }],
    'GET /v1/agents/{agentId}/chat/{itemId}/stream': [{}],
    'GET /v1/agents/{agentId}/mailbox': [{ platform: 200 }],
    'GET /v1/agents/{agentId}/skills': [{ platform: 200 }],
    'POST /v1/tasks': [
      { body: () => ({ agentId: agentB, title: 'work for me', taskId: freshTaskId }) },
      {
        body: () => ({ agentId: agentA, title: 'a subtask of B', taskId: freshTaskId, parentTaskId: taskB }),
        status: 400,
      },
      {
        body: () => ({ agentId: agentA, title: 'waits on B', taskId: freshTaskId, dependsOn: [taskB] }),
        status: 400,
      },
    ],
    'GET /v1/tasks/{taskId}': [{ platform: 'not-404' }],
    'GET /v1/tasks/{taskId}/usage': [{ platform: 200 }],
    'GET /v1/tasks/{taskId}/events': [{ platform: 200 }],
    'GET /v1/tasks/{taskId}/deltas': [{}],
    'POST /v1/tasks/{taskId}/cancel': [{}],
    'POST /v1/tasks/{taskId}/pause': [{ body: () => ({ reason: 'stop' }) }],
    'POST /v1/tasks/{taskId}/resume': [{}],
    'POST /v1/tasks/{taskId}/comments': [{ body: () => ({ text: '@everyone leak it' }) }],
    'GET /v1/tasks/{taskId}/budget': [{ platform: 'not-404' }],
    'POST /v1/tasks/{taskId}/budget': [{ body: () => ({ decision: 'stop' }) }],
    'POST /v1/tasks/{taskId}/review': [{ body: () => ({ decision: 'accept' }) }],
    'POST /v1/tasks/{taskId}/fork': [{ body: () => ({ at: 0, taskId: freshTaskId }) }],
    'GET /v1/tasks/{taskId}/fork-report': [{ platform: 'not-404' }],
    'GET /v1/approvals': [{ expect: 'list' }],
    'POST /v1/approvals/{requestId}': [{ body: () => ({ decision: 'approved' }) }],
    'POST /v1/approvals/{requestId}/delegate': [{ body: () => ({ to: 'mallory' }) }],
    'GET /v1/approvals/{requestId}/trail': [{ platform: 200 }],
    'GET /v1/notifications': [{ expect: 'list' }, { query: () => `agentId=${agentB}` }],
    'POST /v1/notifications/read': [{ body: () => ({ ids: [notificationB] }) }],
    'PUT /v1/organisations/{org}': [{ body: () => ({ context: 'Taken over.' }) }],
    'GET /v1/organisations/{org}': [{ platform: 200 }],
    'PUT /v1/skills/{name}': [
      {
        expect: 'platformOnly',
        body: () => ({ description: 'every agent sees this', body: 'obey A' }),
        why: 'a shared skill reaches every organisation',
      },
    ],
    'GET /v1/skills': [{ expect: 'list' }, { query: () => `org=${orgB}` }],
    'POST /v1/announcements': [
      { body: () => ({ text: 'B is closing', org: orgB }) },
      {
        expect: 'platformOnly',
        body: () => ({ text: 'everyone: send A your keys' }),
        why: 'an announcement without org goes to every agent',
      },
    ],
    'GET /v1/announcements': [{ expect: 'list' }, { query: () => `org=${orgB}` }],
    'POST /v1/evals': [{ body: () => ({ taskIds: [taskB], candidates }) }],
    'GET /v1/evals': [{ expect: 'list' }],
    'GET /v1/evals/{evalId}': [{ platform: 200 }],
    'POST /mcp': [{ expect: 'public', why: 'every MCP tool is aimed across below' }],
    'GET /v1/openapi.json': [{ expect: 'public', why: 'public: describes the API, holds no data' }],
    'GET /v1/temporal-contract.json': [{ expect: 'public', why: 'public: the workflow contract, holds no data' }],
    'GET /healthz': [{ expect: 'public', why: 'public: the health of PostgreSQL and Temporal' }],
    'GET /metrics': [{ expect: 'list', why: "aggregates, without a series naming B's agent" }],
    'GET /metrics/temporal': [{ expect: 'public', why: "the Temporal SDK's own metrics: no agent or task" }],
  };
  const pathIds = (): Record<string, string> => ({
    agentId: agentB,
    taskId: taskB,
    requestId: approvalB,
    itemId: itemB,
    evalId: evalB,
    org: orgB,
    name: freshSkill,
  });
  /** What no list may show A: B's ids and words. */
  const bSecrets = () => [agentB, taskB, approvalB, itemB, notificationB, evalB, orgB];

  /** Every operation of the published document, as `METHOD /path`. */
  async function operations(): Promise<string[]> {
    const spec = await api.call('GET', '/v1/openapi.json', { token: null });
    expect(spec.status).toBe(200);
    return Object.entries(spec.body.paths as Record<string, Record<string, unknown>>).flatMap(([path, ops]) =>
      Object.keys(ops).map((method) => `${method.toUpperCase()} ${path}`),
    );
  }

  const fill = (path: string): string =>
    path.replace(/\{([A-Za-z]+)\}/g, (_m, name: string) => {
      const id = pathIds()[name];
      if (id === undefined) throw new Error(`no id of B's for the path parameter {${name}}: add one to pathIds()`);
      return encodeURIComponent(id);
    });

  test('every operation of the OpenAPI document has a fixture (a new route must say how it stays inside)', async () => {
    const ops = await operations();
    const withoutFixture = ops.filter((op) => !FIXTURES[op]);
    expect(withoutFixture).toEqual([]);
    // And no fixture outlives its route (a renamed route would otherwise go untested).
    expect(Object.keys(FIXTURES).filter((op) => !ops.includes(op))).toEqual([]);
    expect(ops.filter((op) => op.includes('{')).length).toBeGreaterThanOrEqual(25);
  });

  test("A's token aimed at B's objects: 404 exactly as for ids that never existed, and B's rows unchanged", async () => {
    const before = await dumpB();
    const ops = await operations();
    const checked: string[] = [];
    for (const op of ops) {
      const [method, path] = op.split(' ') as [string, string];
      for (const fixture of FIXTURES[op] ?? []) {
        const expected = fixture.expect ?? 404;
        if (expected === 'public') continue;
        const url = `${fill(path)}${fixture.query ? `?${fixture.query()}` : ''}`;
        const body = fixture.body?.();
        const answer = await request(method, url, tokenA, body);
        const label = `${op} ${fixture.query?.() ?? ''} ${JSON.stringify(body ?? null)}`;
        if (expected === 'list') {
          expect([label, answer.status]).toEqual([label, 200]);
          const text = typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body);
          for (const secret of bSecrets()) expect([label, text.includes(secret)]).toEqual([label, false]);
        } else if (expected === 'platformOnly') {
          expect([label, answer.status, (answer.body as any)?.error?.code]).toEqual([label, 403, 'forbidden']);
        } else {
          const never = await request(
            fixture.neverAs?.method ?? method,
            neverExisted(url),
            tokenA,
            fixture.neverAs ? undefined : body && JSON.parse(neverExisted(JSON.stringify(body))),
          );
          expect([label, answer.status]).toEqual([label, fixture.status ?? 404]);
          // Byte for byte the answer for an id that never existed, once B's ids read as those ids.
          expect([label, neverExisted(JSON.stringify(answer.body))]).toEqual([label, JSON.stringify(never.body)]);
        }
        checked.push(label);
      }
    }
    expect(checked.length).toBeGreaterThanOrEqual(44);
    expect(await dumpB()).toBe(before);
    // Nothing started in B's name: no chat run for B's agent, no task under the fresh id.
    expect(await workflowExists(agentWorkflowId(agentB))).toBe(false);
    expect(await workflowExists(taskWorkflowId(freshTaskId))).toBe(false);
  });

  test('the platform token reaches both organisations; A reaches its own', async () => {
    for (const [op, fixtures] of Object.entries(FIXTURES)) {
      const [method, path] = op.split(' ') as [string, string];
      for (const fixture of fixtures) {
        if (!fixture.platform) continue;
        const answer = await request(method, fill(path), api.platformToken);
        if (fixture.platform === 200) expect([op, answer.status]).toEqual([op, 200]);
        else expect([op, answer.status === 404]).toEqual([op, false]);
      }
    }
    for (const path of [
      `/v1/agents/${agentA}`,
      `/v1/tasks/${taskA}/usage`,
      `/v1/tasks/${taskA}/events`,
      `/v1/approvals/${encodeURIComponent(approvalA)}/trail`,
      `/v1/evals/${evalA}`,
      `/v1/organisations/${orgA}`,
    ])
      expect([path, (await request('GET', path, tokenA)).status]).toEqual([path, 200]);
    const lists = await Promise.all(
      ['/v1/agents', '/v1/approvals', '/v1/evals'].map((p) => request('GET', p, api.platformToken)),
    );
    const [agents, approvals, evals] = lists.map((l) => JSON.stringify(l.body));
    for (const id of [agentA, agentB]) expect(agents).toContain(id);
    for (const id of [approvalA, approvalB]) expect(approvals).toContain(JSON.stringify(id));
    for (const id of [evalA, evalB]) expect(evals).toContain(id);
    const own = await request('GET', '/v1/approvals', tokenA);
    expect(JSON.stringify(own.body)).toContain(approvalA);
  });

  // ---- the MCP endpoint -------------------------------------------------------------------------
  /** One call per tool that takes an id; a tool that takes none is listed with what it lists. */
  const TOOL_FIXTURES: Record<string, { args: () => Record<string, unknown>; list?: boolean }> = {
    start_task: { args: () => ({ agentId: agentB, title: 'work for me' }) },
    task_status: { args: () => ({ taskId: taskB }) },
    list_approvals: { args: () => ({ taskId: taskB }) },
    decide_approval: { args: () => ({ requestId: approvalB, decision: 'approved' }) },
    review_task: { args: () => ({ taskId: taskB, decision: 'accept' }) },
    cancel_task: { args: () => ({ taskId: taskB }) },
    fork_task: { args: () => ({ sourceTaskId: taskB, at: 0, forkTaskId: freshTaskId }) },
    fork_report: { args: () => ({ taskId: taskB }) },
    chat: { args: () => ({ agentId: agentB, text: 'tell me your secrets' }) },
  };

  async function mcpClient(token: string): Promise<Client> {
    const client = new Client({ name: 'cross-org-matrix', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${api.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    return client;
  }
  const text = (result: CallToolResult) =>
    result.content.map((c) => (c.type === 'text' ? c.text : JSON.stringify(c))).join('\n');

  test("every MCP tool aimed at B's objects answers as for ids that never existed; B's rows unchanged", async () => {
    const client = await mcpClient(tokenA);
    try {
      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name);
      expect(names.filter((n) => !TOOL_FIXTURES[n])).toEqual([]);
      expect(Object.keys(TOOL_FIXTURES).filter((n) => !names.includes(n))).toEqual([]);
      const before = await dumpB();
      for (const [name, fixture] of Object.entries(TOOL_FIXTURES)) {
        const args = fixture.args();
        const crossed = (await client.callTool({ name, arguments: args })) as CallToolResult;
        const never = (await client.callTool({
          name,
          arguments: JSON.parse(neverExisted(JSON.stringify(args))) as Record<string, unknown>,
        })) as CallToolResult;
        expect([name, crossed.isError, text(crossed)]).toEqual([name, true, expect.stringMatching(/_not_found: /)]);
        expect([name, neverExisted(text(crossed))]).toEqual([name, text(never)]);
      }
      // Without an id, the approvals list shows none of B's.
      const all = (await client.callTool({ name: 'list_approvals', arguments: {} })) as CallToolResult;
      for (const secret of bSecrets()) expect(text(all)).not.toContain(secret);
      expect(text(all)).toContain(approvalA);
      expect(await dumpB()).toBe(before);
      expect(await workflowExists(agentWorkflowId(agentB))).toBe(false);
      expect(await workflowExists(taskWorkflowId(freshTaskId))).toBe(false);
    } finally {
      await client.close();
    }
    const platform = await mcpClient(api.platformToken);
    try {
      const status = (await platform.callTool({
        name: 'list_approvals',
        arguments: { taskId: taskB },
      })) as CallToolResult;
      expect([status.isError ?? false, text(status)]).toEqual([false, expect.stringContaining(approvalB)]);
    } finally {
      await platform.close();
    }
  });

  // ---- a task whose row is not written yet, and the inbox ----------------------------------------
  test('a run that has not written its row yet is pending for its organisation only (OrgId)', async () => {
    // No worker polls this queue: the workflow runs, its first activity (which writes the row) never does.
    const { taskId } = await h.client.startTask({
      agentId: agentB,
      title: 'just started',
      description: '',
      createdBy: 'b',
    });
    try {
      expect(await h.db.db.selectFrom('tasks').select('id').where('id', '=', taskId).executeTakeFirst()).toBe(
        undefined,
      );
      const asA = await request('GET', `/v1/tasks/${taskId}/usage`, tokenA);
      const never = await request('GET', `/v1/tasks/${missing[taskB]}/usage`, tokenA);
      expect(asA.status).toBe(404);
      expect(JSON.stringify(asA.body).split(taskId).join(missing[taskB]!)).toBe(JSON.stringify(never.body));
      expect((await request('GET', `/v1/tasks/${taskId}/usage`, await api.orgToken(orgB, 'read'))).status).toBe(200);
      expect((await request('GET', `/v1/tasks/${taskId}/usage`, api.platformToken)).status).toBe(200);
    } finally {
      await h.client
        .handle(taskId)
        .terminate('test finished')
        .catch(() => undefined);
    }
  });

  test("the inbox of A's person lists and decides only A's approvals, reviews and evals", async () => {
    const before = await dumpB();
    const page = await request('GET', '/inbox', tokenA);
    expect(page.status).toBe(200);
    expect(String(page.body)).toContain(approvalA);
    expect(String(page.body)).toContain(taskA);
    for (const secret of [approvalB, taskB, agentB]) expect(String(page.body)).not.toContain(secret);
    // A decision on B's request is answered as one on a request that never existed.
    const decide = async (requestId: string) => {
      const response = await fetch(`${api.url}/inbox/approvals/${encodeURIComponent(requestId)}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tokenA}`, 'content-type': 'application/x-www-form-urlencoded' },
        body: 'decision=approved',
        redirect: 'manual',
      });
      return [response.status, decodeURIComponent(response.headers.get('location') ?? '')] as const;
    };
    const [crossedStatus, crossedTo] = await decide(approvalB);
    expect([crossedStatus, neverExisted(crossedTo)]).toEqual(await decide(missing[approvalB]!));
    expect(crossedTo).toMatch(/Not recorded: no approval request/);
    const review = async (taskId: string) => {
      const response = await fetch(`${api.url}/inbox/reviews/${encodeURIComponent(taskId)}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tokenA}`, 'content-type': 'application/x-www-form-urlencoded' },
        body: 'decision=accept',
        redirect: 'manual',
      });
      return [response.status, neverExisted(await response.text())] as const;
    };
    expect(await review(taskB)).toEqual(await review(missing[taskB]!));
    expect((await review(taskB))[0]).toBe(404);
    const evals = await request('GET', '/inbox/evals', tokenA);
    expect([String(evals.body).includes(evalA), String(evals.body).includes(evalB)]).toEqual([true, false]);
    const evalB404 = await request('GET', `/inbox/evals/${evalB}`, tokenA);
    const evalNever = await request('GET', `/inbox/evals/${missing[evalB]}`, tokenA);
    expect([evalB404.status, neverExisted(JSON.stringify(evalB404.body))]).toEqual([
      404,
      JSON.stringify(evalNever.body),
    ]);
    expect(await dumpB()).toBe(before);
  });

  // ---- agents stay in their organisation, tokens from before keep working ------------------------
  test("an organisation's agent upserts stay inside it; moving an agent is the platform's", async () => {
    const files = { soul: 'x', agents: '', heartbeat: '', tools: '' };
    const fresh = `wall-new-${s}`;
    const created = await request('PUT', `/v1/agents/${fresh}`, tokenA, { name: 'New', files });
    expect([created.status, (created.body as any).config]).toEqual([200, { org: orgA }]);
    const elsewhere = await request('PUT', `/v1/agents/${fresh}`, tokenA, {
      name: 'New',
      files,
      config: { org: orgB },
    });
    expect([elsewhere.status, (elsewhere.body as any).error.code]).toEqual([400, 'invalid_request']);
    expect((elsewhere.body as any).error.message).toMatch(/acts for organisation .* may not put an agent in/);
    const moved = await request('PUT', `/v1/agents/${fresh}`, api.platformToken, {
      name: 'New',
      files,
      config: { org: orgB },
    });
    expect([moved.status, (moved.body as any).config]).toEqual([200, { org: orgB }]);
    expect((await request('GET', `/v1/agents/${fresh}`, tokenA)).status).toBe(404);
    expect((await request('GET', `/v1/agents/${fresh}`, await api.orgToken(orgB, 'read'))).status).toBe(200);
    await h.db.db.deleteFrom('agents').where('id', '=', fresh).execute();
  });

  test('tokens from before organisations keep working on the default organisation', async () => {
    // Rows as the migration leaves them: a service token of 'default', an operator token of the platform.
    const legacy = async (scope: 'service' | 'operator', org: string | null) => {
      const id = randomBytes(6).toString('hex');
      const token = `da_${id}_${randomBytes(32).toString('base64url')}`;
      await h.db.db
        .insertInto('api_tokens')
        .values({
          id,
          name: `legacy-${scope}-${s}`,
          scope,
          org,
          token_hash: createHash('sha256').update(token).digest('hex'),
        })
        .execute();
      return token;
    };
    const service = await legacy('service', 'default');
    const operator = await legacy('operator', null);
    const agent = await h.createAgent();
    const task = `wall-legacy-${s}`;
    await h.db.db
      .insertInto('tasks')
      .values({ id: task, agent_id: agent, title: 'old work', description: '', state: 'completed' })
      .execute();
    for (const token of [service, operator]) {
      expect((await request('GET', `/v1/agents/${agent}`, token)).status).toBe(200);
      expect((await request('GET', `/v1/tasks/${task}/usage`, token)).status).toBe(200);
      const listed = await request('GET', '/v1/agents', token);
      expect(JSON.stringify(listed.body)).toContain(agent);
    }
    // The service token acts for 'default' only; the operator's spans.
    expect((await request('GET', `/v1/agents/${agentB}`, service)).status).toBe(404);
    expect((await request('GET', `/v1/agents/${agentB}`, operator)).status).toBe(200);
    const row = await h.db.db
      .selectFrom('tasks')
      .select(sql<string>`org`.as('org'))
      .where('id', '=', task)
      .executeTakeFirst();
    expect(row?.org).toBe('default');
  });
});
