import { existsSync } from 'node:fs';
import path from 'node:path';
import { Client as PgClient } from 'pg';
import { createHarness, submitTurn, toolTurn, type Harness } from '../support/harness';
import { ScriptedAgents, waitFor } from '../workflow/task-support';
import { readSse, startTestApi, type TestApi } from './api-support';

/** Two sessions at once (commit order) and LISTEN (deltas) need a PostgreSQL server; CI always has one. */
const needsServer = process.env.TEST_DB_KIND === 'postgres' ? test : test.skip;
if (process.env.TEST_DB_KIND !== 'postgres') console.warn('two HTTP API stream tests need a real PostgreSQL server (DATABASE_URL); CI always runs them.');

/**
 * The API end to end, over HTTP only: define an agent, start a task, watch its event stream, approve a
 * pending shell command, accept the work, see it complete. Then the streams' resume guarantees: task
 * events resumed with Last-Event-ID have no gap and no duplicate (also when two writers commit out of
 * id order), and text deltas resume within the server's buffer or say plainly that some were missed.
 */
describe('HTTP API end to end', () => {
  let h: Harness;
  let api: TestApi;
  let agents: ScriptedAgents;
  const agentId = `api-agent-${Date.now()}`;

  beforeAll(async () => {
    h = await createHarness();
    agents = new ScriptedAgents(h.llm);
    await h.startWorker();
    api = await startTestApi(h);
    const created = await api.call('PUT', `/v1/agents/${agentId}`, {
      body: { name: 'API agent', files: { soul: 'You are careful.', agents: 'You complete tasks with tools.', heartbeat: '', tools: '' }, workspaceDir: h.workspaceDir },
    });
    expect(created).toMatchObject({ status: 200, body: { id: agentId, workspaceDir: h.workspaceDir } });
  });
  afterAll(async () => {
    await api.close();
    await h.close();
  });

  const operatorName = async () => (await h.db.db.selectFrom('api_tokens').select('name').where('scope', '=', 'operator').orderBy('created_at', 'desc').executeTakeFirstOrThrow()).name;

  test('start → stream to review → approve the shell command → accept → completed, all over HTTP', async () => {
    const file = `api-e2e-${Date.now()}.txt`;
    const taskId = agents.task([toolTurn('shell_execute', { command: `touch ${file}` }, 'I will create the file first.'), submitTurn('created the file')]);
    const started = await api.call('POST', '/v1/tasks', { token: api.tokens.service, body: { agentId, taskId, title: 'Create a file', description: `touch ${file}` } });
    expect(started).toEqual({ status: 201, body: { taskId, workflowId: `task-${taskId}` }, headers: expect.anything() });

    const stream = readSse(`${api.url}/v1/tasks/${taskId}/events`, api.tokens.read);
    const seen: Array<{ seq: number; type: string; data: any }> = [];
    const readUntil = async (predicate: (e: { type: string; data: any }) => boolean) => {
      for (;;) {
        const message = await stream.next();
        if (!message) throw new Error(`the stream ended before the expected event; saw ${seen.map((e) => e.type).join(', ')}`);
        if (message.event === 'end') return undefined;
        expect(message.id).toBe(String(message.data.seq));
        seen.push(message.data);
        if (predicate(message.data)) return message.data;
      }
    };
    const requested = await readUntil((e) => e.type === 'approval-requested');
    expect(requested.data).toMatchObject({ tool: 'shell_execute', summary: `shell_execute: touch ${file}` });

    const pending = await api.call('GET', '/v1/approvals', { token: api.tokens.read });
    const mine = pending.body.approvals.filter((a: { taskId: string }) => a.taskId === taskId);
    expect(mine).toEqual([expect.objectContaining({ requestId: requested.data.requestId, tool: 'shell_execute', args: { command: `touch ${file}` } })]);
    expect(existsSync(path.join(h.workspaceDir, file))).toBe(false);

    const decided = await api.call('POST', `/v1/approvals/${encodeURIComponent(requested.data.requestId)}`, { body: { decision: 'approved', comment: 'fine' } });
    const name = await operatorName();
    expect(decided.status).toBe(200);
    expect(decided.body).toMatchObject({ requestId: requested.data.requestId, decision: 'approved', comment: 'fine', decidedBy: name, tool: 'shell_execute' });
    const again = await api.call('POST', `/v1/approvals/${encodeURIComponent(requested.data.requestId)}`, { body: { decision: 'rejected' } });
    expect(again.status).toBe(409);

    await readUntil((e) => e.type === 'state-changed' && e.data.state === 'review');
    expect(existsSync(path.join(h.workspaceDir, file))).toBe(true);
    const inReview = await api.call('GET', `/v1/tasks/${taskId}`, { token: api.tokens.read });
    expect(inReview.body).toMatchObject({ taskId, agentId, state: 'review', submission: 'created the file' });
    const comment = await api.call('POST', `/v1/tasks/${taskId}/comments`, { token: api.tokens.service, body: { text: 'looks good' } });
    expect(comment.status).toBe(202);

    expect((await api.call('POST', `/v1/tasks/${taskId}/review`, { body: { decision: 'accept' } })).status).toBe(202);
    expect(await readUntil((e) => e.type === 'state-changed' && e.data.state === 'completed')).toBeDefined();
    expect(await stream.next()).toMatchObject({ event: 'end' });
    stream.close();

    expect(seen.map((e) => e.seq)).toEqual(seen.map((_, i) => i + 1));
    const status = await api.call('GET', `/v1/tasks/${taskId}`, { token: api.tokens.read });
    expect(status.body.state).toBe('completed');
    const usage = await api.call('GET', `/v1/tasks/${taskId}/usage`, { token: api.tokens.read });
    expect(usage.body).toMatchObject({ inputTokens: 200, outputTokens: 40, calls: 2 });
    expect(usage.body.costUsd).toBeGreaterThan(0);
    const agentUsage = await api.call('GET', `/v1/agents/${agentId}/usage`, { token: api.tokens.read });
    expect(agentUsage.body.inputTokens).toBeGreaterThanOrEqual(200);
    const row = await h.db.db.selectFrom('approvals').selectAll().where('id', '=', requested.data.requestId).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ status: 'approved', decided_by: name, comment: 'fine' });
    const task = await h.db.db.selectFrom('tasks').select('created_by').where('id', '=', taskId).executeTakeFirstOrThrow();
    expect(task.created_by).toMatch(/^service-/);
  });

  test('task events resumed with Last-Event-ID: no gap, no duplicate; the JSON list agrees', async () => {
    const taskId = agents.task([
      ...Array.from({ length: 4 }, (_, i) => toolTurn('file_write', { path: `resume-${i}.txt`, content: `part ${i}` })),
      submitTurn('wrote four files'),
    ]);
    await api.call('POST', '/v1/tasks', { token: api.tokens.service, body: { agentId, taskId, title: 'Write four files' } });
    const first = readSse(`${api.url}/v1/tasks/${taskId}/events`, api.tokens.read);
    const got: Array<{ id: string; seq: number; type: string }> = [];
    for (let i = 0; i < 3; i++) {
      const m = (await first.next())!;
      got.push({ id: m.id!, seq: m.data.seq, type: m.data.type });
    }
    first.close(); // cut mid-stream, while the task is still working

    const second = readSse(`${api.url}/v1/tasks/${taskId}/events`, api.tokens.read, { 'last-event-id': got.at(-1)!.id });
    for (;;) {
      const m = (await second.next())!;
      got.push({ id: m.id!, seq: m.data.seq, type: m.data.type });
      if (m.data.type === 'state-changed' && m.data.data.state === 'review') break;
    }
    await api.call('POST', `/v1/tasks/${taskId}/review`, { body: { decision: 'accept' } });
    for (;;) {
      const m = await second.next();
      if (!m || m.event === 'end') break;
      got.push({ id: m.id!, seq: m.data.seq, type: m.data.type });
    }
    second.close();
    expect(got.map((e) => e.seq)).toEqual(got.map((_, i) => i + 1));
    const listed = await api.call('GET', `/v1/tasks/${taskId}/events`, { token: api.tokens.read });
    expect(listed.body.events.map((e: { seq: number; type: string }) => [e.seq, e.type])).toEqual(got.map((e) => [e.seq, e.type]));
    const after = await api.call('GET', `/v1/tasks/${taskId}/events?after=${got.length - 2}`, { token: api.tokens.read });
    expect(after.body.events.map((e: { seq: number }) => e.seq)).toEqual([got.length - 1, got.length]);
    // A finished task's stream replays the rest and ends.
    const replay = readSse(`${api.url}/v1/tasks/${taskId}/events`, api.tokens.read, { 'last-event-id': String(got.length - 1) });
    expect((await replay.next())!.data.seq).toBe(got.length);
    expect(await replay.next()).toMatchObject({ event: 'end' });
    replay.close();
  });

  needsServer('event sequence numbers follow commit order: a writer that commits later numbers later, even with a smaller id', async () => {
    const taskId = agents.task([submitTurn('nothing to do')]);
    await api.call('POST', '/v1/tasks', { token: api.tokens.service, body: { agentId, taskId, title: 'Quick' } });
    await waitFor('the task to reach review', async () => (await h.client.getTaskRow(taskId)).state === 'review' || undefined);
    const stream = readSse(`${api.url}/v1/tasks/${taskId}/events`, api.tokens.read);
    let last = 0;
    for (;;) {
      const m = (await stream.next())!;
      last = m.data.seq;
      if (m.data.type === 'state-changed' && m.data.data.state === 'review') break;
    }
    const early = new PgClient({ connectionString: h.db.url });
    const late = new PgClient({ connectionString: h.db.url });
    await early.connect();
    await late.connect();
    try {
      await early.query('begin');
      // `early` takes the smaller id but commits last; `late` waits for it, so neither is skipped.
      await early.query(`insert into task_events (task_id, type, data) values ($1, 'probe', '{"n":1}')`, [taskId]);
      const lateInsert = late.query(`insert into task_events (task_id, type, data) values ($1, 'probe', '{"n":2}')`, [taskId]);
      await new Promise((r) => setTimeout(r, 300));
      await early.query('commit');
      await lateInsert;
    } finally {
      await early.end();
      await late.end();
    }
    const probes = [(await stream.next())!.data, (await stream.next())!.data];
    stream.close();
    expect(probes.map((p) => [p.seq, p.type, p.data.n])).toEqual([
      [last + 1, 'probe', 1],
      [last + 2, 'probe', 2],
    ]);
    await api.call('POST', `/v1/tasks/${taskId}/cancel`);
  });

  needsServer('text deltas stream with ids, resume within the buffer, and a reset says when some were missed', async () => {
    const words = 'Let me look around the workspace before I change anything at all.';
    const taskId = agents.task([
      { ...toolTurn('shell_execute', { command: 'touch never-approved.txt' }, words), chunkDelayMs: 5 },
      submitTurn('done'),
    ]);
    await api.call('POST', '/v1/tasks', { token: api.tokens.service, body: { agentId, taskId, title: 'Deltas', approvalTimeoutMs: 60_000 } });
    await waitFor('the approval request', async () => (await api.call('GET', `/v1/tasks/${taskId}`, { token: api.tokens.read })).body.pendingApprovals?.length === 1 || undefined);

    const all = readSse(`${api.url}/v1/tasks/${taskId}/deltas`, api.tokens.read);
    const deltas: Array<{ id: string; text: string; n: number }> = [];
    while (deltas.map((d) => d.text).join('') !== words) {
      const m = (await all.next(10_000))!;
      deltas.push({ id: m.id!, text: m.data.text, n: m.data.n });
    }
    all.close();
    expect(deltas.map((d) => d.n)).toEqual(deltas.map((_, i) => i + 1));

    const resumed = readSse(`${api.url}/v1/tasks/${taskId}/deltas`, api.tokens.read, { 'last-event-id': deltas[0]!.id });
    const rest: string[] = [];
    while (rest.join('') !== deltas.slice(1).map((d) => d.text).join('')) rest.push((await resumed.next(10_000))!.data.text);
    resumed.close();

    const stale = readSse(`${api.url}/v1/tasks/${taskId}/deltas`, api.tokens.read, { 'last-event-id': 'deadbeef.3' });
    expect(await stale.next()).toMatchObject({ event: 'reset' });
    stale.close();
    await api.call('POST', `/v1/tasks/${taskId}/cancel`);
  });
});
