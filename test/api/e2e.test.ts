import { existsSync } from 'node:fs';
import path from 'node:path';
import { Client as PgClient } from 'pg';
import { useHarness, submitTurn, toolTurn } from '../support/harness';
import { ScriptedAgents } from '../workflow/task-support';
import { eventually } from '../support/eventually';
import { readSse, startTestApi, type TestApi } from './api-support';
import { findTask } from '../../activities/store/tasks';
import { appendStreamEvents, readStreamEvents } from '../../activities/streams/store';

/**
 * The API end to end, over HTTP only: define an agent, start a task, watch its event stream, approve a
 * pending shell command, accept the work, see it complete. Then the streams' resume guarantees: task
 * events resumed with Last-Event-ID have no gap and no duplicate (also when two writers commit out of
 * id order), and text deltas, read from the stored run stream, resume on any API process and pass rewinds through.
 */
describe('HTTP API end to end', () => {
  const h = useHarness({
    beforeClose: async () => {
      await api.close();
    },
  });
  let api: TestApi;
  let agents: ScriptedAgents;
  const agentId = `api-agent-${Date.now()}`;

  beforeAll(async () => {
    agents = new ScriptedAgents(h.llm);
    await h.startWorker();
    api = await startTestApi(h);
    const created = await api.call('PUT', `/v1/agents/${agentId}`, {
      body: {
        name: 'API agent',
        files: { soul: 'You are careful.', agents: 'You complete tasks with tools.', heartbeat: '', tools: '' },
        workspaceDir: h.workspaceDir,
      },
    });
    expect(created).toMatchObject({ status: 200, body: { id: agentId, workspaceDir: h.workspaceDir } });
  });

  /** The name of the operator token the calls go with (the default organisation's, not the platform's). */
  const operatorName = async () => api.tokenNames.operator;

  test('start → stream to review → approve the shell command → accept → completed, all over HTTP', async () => {
    const file = `api-e2e-${Date.now()}.txt`;
    const taskId = agents.task([
      toolTurn('shell_execute', { command: `touch ${file}` }, 'I will create the file first.'),
      submitTurn('created the file'),
    ]);
    const started = await api.call('POST', '/v1/tasks', {
      token: api.tokens.service,
      body: { agentId, taskId, title: 'Create a file', description: `touch ${file}` },
    });
    expect(started).toEqual({
      status: 201,
      body: { taskId, workflowId: `task-${taskId}` },
      headers: expect.anything(),
    });

    const stream = readSse(`${api.url}/v1/tasks/${taskId}/events`, api.tokens.read);
    const seen: Array<{ seq: number; type: string; data: any }> = [];
    const readUntil = async (predicate: (e: { type: string; data: any }) => boolean) => {
      for (;;) {
        const message = await stream.next();
        if (!message)
          throw new Error(`the stream ended before the expected event; saw ${seen.map((e) => e.type).join(', ')}`);
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
    expect(mine).toEqual([
      expect.objectContaining({
        requestId: requested.data.requestId,
        tool: 'shell_execute',
        args: { command: `touch ${file}` },
      }),
    ]);
    expect(existsSync(path.join(h.workspaceDir, file))).toBe(false);

    const decided = await api.call('POST', `/v1/approvals/${encodeURIComponent(requested.data.requestId)}`, {
      body: { decision: 'approved', comment: 'fine' },
    });
    const name = await operatorName();
    expect(decided.status).toBe(200);
    expect(decided.body).toMatchObject({
      requestId: requested.data.requestId,
      decision: 'approved',
      comment: 'fine',
      decidedBy: name,
      tool: 'shell_execute',
    });
    const again = await api.call('POST', `/v1/approvals/${encodeURIComponent(requested.data.requestId)}`, {
      body: { decision: 'rejected' },
    });
    expect(again.status).toBe(409);

    await readUntil((e) => e.type === 'state-changed' && e.data.state === 'review');
    expect(existsSync(path.join(h.workspaceDir, file))).toBe(true);
    const inReview = await api.call('GET', `/v1/tasks/${taskId}`, { token: api.tokens.read });
    expect(inReview.body).toMatchObject({ taskId, agentId, state: 'review', submission: 'created the file' });
    // The budget routes: the spend as the query reports it; a decision while no round runs is refused (409),
    // a raise without a limit is bad input (400), and a read token may not decide (403).
    const budget = await api.call('GET', `/v1/tasks/${taskId}/budget`, { token: api.tokens.read });
    expect(budget.status).toBe(200);
    expect(budget.body).toMatchObject({ limitUsd: null, held: false });
    const noRound = await api.call('POST', `/v1/tasks/${taskId}/budget`, { body: { decision: 'stop' } });
    expect([noRound.status, noRound.body.error.code]).toEqual([409, 'invalid_budget_decision']);
    expect(noRound.body.error.message).toMatch(/no round of this task is running/);
    expect((await api.call('POST', `/v1/tasks/${taskId}/budget`, { body: { decision: 'raise' } })).status).toBe(400);
    expect(
      (await api.call('POST', `/v1/tasks/${taskId}/budget`, { token: api.tokens.read, body: { decision: 'stop' } }))
        .status,
    ).toBe(403);
    const comment = await api.call('POST', `/v1/tasks/${taskId}/comments`, {
      token: api.tokens.service,
      body: { text: 'looks good' },
    });
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
    const row = await h.db.db
      .selectFrom('approvals')
      .selectAll()
      .where('id', '=', requested.data.requestId)
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({ status: 'approved', decided_by: name, comment: 'fine' });
    const task = await h.db.db
      .selectFrom('tasks')
      .select('created_by')
      .where('id', '=', taskId)
      .executeTakeFirstOrThrow();
    expect(task.created_by).toMatch(/^service-/);
  });

  test('task events resumed with Last-Event-ID: no gap, no duplicate; the JSON list agrees', async () => {
    const taskId = agents.task([
      ...Array.from({ length: 4 }, (_, i) => toolTurn('file_write', { path: `resume-${i}.txt`, content: `part ${i}` })),
      submitTurn('wrote four files'),
    ]);
    await api.call('POST', '/v1/tasks', {
      token: api.tokens.service,
      body: { agentId, taskId, title: 'Write four files' },
    });
    const first = readSse(`${api.url}/v1/tasks/${taskId}/events`, api.tokens.read);
    const got: Array<{ id: string; seq: number; type: string }> = [];
    for (let i = 0; i < 3; i++) {
      const m = (await first.next())!;
      got.push({ id: m.id!, seq: m.data.seq, type: m.data.type });
    }
    first.close(); // cut mid-stream, while the task is still working

    const second = readSse(`${api.url}/v1/tasks/${taskId}/events`, api.tokens.read, {
      'last-event-id': got.at(-1)!.id,
    });
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
    expect(listed.body.events.map((e: { seq: number; type: string }) => [e.seq, e.type])).toEqual(
      got.map((e) => [e.seq, e.type]),
    );
    const after = await api.call('GET', `/v1/tasks/${taskId}/events?after=${got.length - 2}`, {
      token: api.tokens.read,
    });
    expect(after.body.events.map((e: { seq: number }) => e.seq)).toEqual([got.length - 1, got.length]);
    // A finished task's stream replays the rest and ends.
    const replay = readSse(`${api.url}/v1/tasks/${taskId}/events`, api.tokens.read, {
      'last-event-id': String(got.length - 1),
    });
    expect((await replay.next())!.data.seq).toBe(got.length);
    expect(await replay.next()).toMatchObject({ event: 'end' });
    replay.close();
  });

  test('event sequence numbers follow commit order: a writer that commits later numbers later, even with a smaller id', async () => {
    const taskId = agents.task([submitTurn('nothing to do')]);
    await api.call('POST', '/v1/tasks', { token: api.tokens.service, body: { agentId, taskId, title: 'Quick' } });
    await eventually(
      async () => (await findTask(h.db.db, taskId))?.state === 'review' || undefined,
      'the task to reach review',
    );
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
      const latePid = (await late.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
      const lateInsert = late.query(`insert into task_events (task_id, type, data) values ($1, 'probe', '{"n":2}')`, [
        taskId,
      ]);
      // Commit only once `late` is queued behind `early`'s lock, as the ordering this test is about needs.
      await eventually(
        async () =>
          (await early.query(`select 1 from pg_stat_activity where pid = $1 and wait_event_type = 'Lock'`, [latePid]))
            .rowCount === 1,
        'the late insert waiting for the lock',
      );
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

  test('text deltas come from the stored run stream: cut mid-stream, resume on another API process with no gap and no duplicate, end when the task is finished', async () => {
    const words = 'Let me look around the workspace before I change anything at all.';
    const taskId = agents.task([
      { ...toolTurn('shell_execute', { command: 'touch never-approved.txt' }, words), chunkDelayMs: 5 },
      submitTurn('done'),
    ]);
    await api.call('POST', '/v1/tasks', {
      token: api.tokens.service,
      body: { agentId, taskId, title: 'Deltas', approvalTimeoutMs: 60_000 },
    });

    // Cut after the first delta, wherever the model is by then.
    const first = readSse(`${api.url}/v1/tasks/${taskId}/deltas`, api.tokens.read);
    const seen: Array<{ id?: string; event?: string; data: any }> = [];
    while (!seen.some((m) => m.event === 'delta')) seen.push((await first.next())!);
    first.close();

    // Resume on a second API process (nothing shared but the database).
    const other = await startTestApi(h);
    try {
      const resumed = readSse(`${other.url}/v1/tasks/${taskId}/deltas`, other.tokens.read, {
        'last-event-id': seen.at(-1)!.id!,
      });
      const text = () =>
        seen
          .filter((m) => m.event === 'delta')
          .map((m) => m.data.text)
          .join('');
      while (text() !== words) seen.push((await resumed.next())!);
      resumed.close();
    } finally {
      await other.close();
    }
    for (const m of seen) expect(m.id).toBe(String(m.data.seq));
    // Dense sequence numbers from 1: no gap, no duplicate across the cut and the other process.
    expect(seen.map((m) => m.data.seq)).toEqual(seen.map((_, i) => i + 1));
    expect(seen[0]).toMatchObject({ event: 'step-start' });

    // Once the task is finished, the stream sends what is left and ends.
    await api.call('POST', `/v1/tasks/${taskId}/cancel`);
    // (From one event back: a resume after the very last event of a finished task gets 204 instead.)
    const tail = readSse(`${api.url}/v1/tasks/${taskId}/deltas`, api.tokens.read, {
      'last-event-id': String(seen.at(-1)!.data.seq - 1),
    });
    let last: { event?: string } | undefined;
    for (let m = await tail.next(); m; m = await tail.next()) last = m;
    expect(last).toMatchObject({ event: 'end' });
  });

  test('a rewind in the run stream reaches the client as a rewind event, in order', async () => {
    const taskId = agents.task([submitTurn('done')]);
    await api.call('POST', '/v1/tasks', { token: api.tokens.service, body: { agentId, taskId, title: 'Rewind' } });
    await eventually(
      async () =>
        (await api.call('GET', `/v1/tasks/${taskId}`, { token: api.tokens.read })).body.state === 'review' || undefined,
      'the task in review',
    );
    const streamId = `task-${taskId}`;
    const before = await readStreamEvents(h.db.db, streamId);
    // What the step publisher writes when an attempt died mid-stream and its retry starts over.
    await appendStreamEvents(h.db.db, { streamId, taskId }, [
      { kind: 'step-start', stepKey: 's/late', attempt: 1 },
      { kind: 'delta', stepKey: 's/late', attempt: 1, text: 'half a thou' },
    ]);
    const afterSeq = before.at(-1)?.seq ?? 0;
    await appendStreamEvents(h.db.db, { streamId, taskId }, [
      {
        kind: 'rewind',
        stepKey: 's/late',
        attempt: 2,
        data: { supersededChars: 11, fromSeq: afterSeq + 2, toSeq: afterSeq + 2 },
      },
      { kind: 'delta', stepKey: 's/late', attempt: 2, text: 'a whole thought' },
    ]);
    const stream = readSse(`${api.url}/v1/tasks/${taskId}/deltas`, api.tokens.read, {
      'last-event-id': String(afterSeq),
    });
    const got = [(await stream.next())!, (await stream.next())!, (await stream.next())!, (await stream.next())!];
    stream.close();
    expect(got.map((m) => [m.event, m.data.seq, m.data.text ?? null])).toEqual([
      ['step-start', afterSeq + 1, null],
      ['delta', afterSeq + 2, 'half a thou'],
      ['rewind', afterSeq + 3, null],
      ['delta', afterSeq + 4, 'a whole thought'],
    ]);
    expect(got[2]!.data).toMatchObject({ attempt: 2, data: { fromSeq: afterSeq + 2, toSeq: afterSeq + 2 } });
    await api.call('POST', `/v1/tasks/${taskId}/cancel`);
  });
});
