import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import { commentSignal, UnknownAgentError } from '../../client';
import { useHarness, submitTurn, toolTurn } from '../support/harness';
import { eventually } from '../support/eventually';

describe('bad input gets a clear error and loses nothing', () => {
  const h = useHarness({ worker: true });
  beforeEach(() => h.llm.reset());

  test('a task for an unknown agent is refused before any workflow runs', async () => {
    await expect(
      h.client.startTask({ agentId: 'no-such-agent', title: 't', description: 'd', taskId: 'unknown-agent-task' }),
    ).rejects.toThrow(UnknownAgentError);
    await expect(h.client.startTask({ agentId: 'no-such-agent', title: 't', description: 'd' })).rejects.toThrow(
      /unknown agent "no-such-agent"/,
    );
    const row = await h.db.db
      .selectFrom('tasks')
      .select('id')
      .where('id', '=', 'unknown-agent-task')
      .executeTakeFirst();
    expect(row).toBeUndefined();
    await expect(h.temporal.workflow.getHandle('task-unknown-agent-task').describe()).rejects.toThrow(/not found/i);
  });

  test('malformed, schema-violating, unknown-tool and out-of-workspace calls become error results and the loop goes on', async () => {
    h.llm.enqueue(
      {
        kind: 'message',
        content: [{ type: 'tool_use', name: 'file_write', rawArguments: '{"path": "a.txt", "content": ' }],
        stopReason: 'tool_use',
      },
      toolTurn('file_write', { path: 'a.txt', content: 42, extra: true }),
      toolTurn('rm_everything', { now: true }),
      toolTurn('file_write', { path: '../../etc/escape.txt', content: 'x' }),
      submitTurn('gave up politely'),
    );
    const agentId = await h.createAgent();
    const { taskId } = await h.client.startTask({ agentId, title: 'Bad calls', description: 'exercise errors' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');

    const results = h.llm.requests.slice(1).map((r) => JSON.stringify(r.body));
    expect(results[0]).toMatch(/were not valid JSON/);
    expect(results[1]).toMatch(/Invalid arguments for file_write/);
    expect(results[2]).toMatch(/Unknown tool \\"rm_everything\\"/);
    expect(results[3]).toMatch(/outside the agent's workspace/);
    const ledger = await h.db.db
      .selectFrom('tool_calls')
      .select(['tool', 'status', 'executions'])
      .where('task_id', '=', taskId)
      .execute();
    const failed = ledger.filter((l) => l.status === 'failed');
    expect(failed).toHaveLength(4);
    // Invalid calls never reach the tool; the escaping write runs and is refused by the workspace check.
    expect(failed.filter((l) => l.executions === 0)).toHaveLength(3);
    await expect(readFile(path.resolve(h.workspaceDir, '../../etc/escape.txt'), 'utf8')).rejects.toThrow(/ENOENT/);
  });

  test('a reply carrying NUL and lone surrogates is stored, streamed and run once (PostgreSQL cannot hold them as sent)', async () => {
    h.llm.enqueue(
      toolTurn(
        'file_write',
        { path: 'odd.txt', 'k\u0000ey': 1, content: 'nul:\u0000 lone:\ud800 pair:\ud83d\ude00' },
        'text with nul \u0000 and \udc00',
      ),
      submitTurn('wrote odd.txt'),
    );
    const agentId = await h.createAgent();
    const { taskId } = await h.client.startTask({ agentId, title: 'Odd text', description: 'write odd.txt' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    // One request per turn: the first reply was stored at once, not failed and asked again.
    expect(h.llm.requests).toHaveLength(2);
    const [reply] = await h.db.db
      .selectFrom('messages')
      .select('content')
      .where('session_id', '=', `task_${taskId}_r1`)
      .where('role', '=', 'assistant')
      .orderBy('id')
      .execute();
    expect(JSON.stringify(reply!.content)).toContain('text with nul \\\\0 and \uFFFD');
    // The extra key made the call invalid for the schema: an error result, and the loop went on.
    const [first] = await h.db.db
      .selectFrom('tool_calls')
      .select(['tool', 'is_error', 'result'])
      .where('task_id', '=', taskId)
      .orderBy('started_at')
      .execute();
    expect(first).toMatchObject({ tool: 'file_write', is_error: true });
    const deltas = await h.db.db
      .selectFrom('stream_events')
      .select('text')
      .where('task_id', '=', taskId)
      .where('kind', '=', 'delta')
      .execute();
    expect(deltas.map((d) => d.text).join('')).toContain('text with nul \\0 and \uFFFD');
  });

  test('a NUL and a lone surrogate in tool arguments reach the tool as storable text', async () => {
    h.llm.enqueue(
      toolTurn('file_write', { path: 'odd.txt', content: 'nul:\u0000 lone:\ud800 pair:\ud83d\ude00' }),
      submitTurn('wrote odd.txt'),
    );
    const agentId = await h.createAgent();
    const { taskId } = await h.client.startTask({ agentId, title: 'Odd args', description: 'write odd.txt' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(h.llm.requests).toHaveLength(2);
    expect(await readFile(path.join(h.workspaceDir, 'odd.txt'), 'utf8')).toBe('nul:\\0 lone:\uFFFD pair:\ud83d\ude00');
  });

  test('a comment carrying a NUL reaches the running round escaped instead of failing its every step; a NUL title is refused', async () => {
    await expect(
      h.client.startTask({ agentId: await h.createAgent(), title: 'a\u0000b', description: 'd' }),
    ).rejects.toThrow(/title contains a NUL character/);
    h.llm.enqueue({ ...toolTurn('task_note', { note: 'working' }), chunkDelayMs: 300 }, submitTurn('read the comment'));
    const agentId = await h.createAgent();
    const { taskId } = await h.client.startTask({ agentId, title: 'Comment me', description: 'wait for a comment' });
    // While the first answer streams (about 2 s), so the comment joins the second request.
    await eventually(() => h.llm.requests.length === 1, 'the first LLM request');
    await h.client.handle(taskId).signal(commentSignal, { text: 'use \u0000 tabs', from: 'ann' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(h.llm.requests).toHaveLength(2);
    expect(JSON.stringify(h.llm.requests[1]!.body)).toContain('[COMMENT from ann] use \\\\0 tabs');
  });

  test('a provider 401 fails the task with a clear error after exactly one request', async () => {
    h.llm.enqueue({ kind: 'error', status: 401, message: 'invalid x-api-key' });
    const agentId = await h.createAgent();
    const { taskId, handle } = await h.client.startTask({ agentId, title: 'Auth', description: 'will fail' });
    const result = await handle.result();
    expect(result.state).toBe('failed');
    expect(result.error).toMatch(/401/);
    expect(result.error).toMatch(/invalid x-api-key/);
    expect(h.llm.requests).toHaveLength(1);
    expect((await h.client.getTaskRow(taskId)).state).toBe('failed');
  });

  test('429 and 529 are retried with backoff (retry-after honoured) and the task completes', async () => {
    h.llm.enqueue(
      { kind: 'error', status: 429, message: 'slow down', headers: { 'retry-after': '1' } },
      { kind: 'error', status: 529, message: 'overloaded' },
      submitTurn('done after retries'),
    );
    const agentId = await h.createAgent();
    const { taskId } = await h.client.startTask({ agentId, title: 'Retry', description: 'retries' });
    const status = await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);
    expect(status.submission).toBe('done after retries');
    expect(h.llm.requests).toHaveLength(3);
    const gap = h.llm.requests[1]!.receivedAt - h.llm.requests[0]!.receivedAt;
    expect(gap).toBeGreaterThanOrEqual(900);
  });
});

test('WorkflowFailedError is exported for callers that await results', () => {
  expect(WorkflowFailedError).toBeDefined();
});
