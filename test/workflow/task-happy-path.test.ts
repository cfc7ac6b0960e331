import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { useHarness, submitTurn, toolTurn } from '../support/harness';
import { eventually } from '../support/eventually';

describe.each(['anthropic', 'openai'] as const)('a task on %s through the real SDK and the fake server', (provider) => {
  const h = useHarness({ worker: true, provider });

  test('runs the tool loop as a workflow and ends in review with messages, usage and the file kept', async () => {
    h.llm.enqueue(
      toolTurn('file_write', { path: 'notes/hello.md', content: 'hello from the agent' }),
      toolTurn('file_read', { path: 'notes/hello.md' }),
      submitTurn('wrote notes/hello.md'),
    );
    const agentId = await h.createAgent();
    const { taskId, workflowId } = await h.client.startTask({
      agentId,
      title: 'Write a note',
      description: 'Write hello into notes/hello.md',
    });
    expect(workflowId).toBe(`task-${taskId}`);

    const status = await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(status.submission).toBe('wrote notes/hello.md');
    expect(status.round).toBe(1);
    expect(status.usage.inputTokens).toBeGreaterThan(0);

    expect(await readFile(path.join(h.workspaceDir, 'notes/hello.md'), 'utf8')).toBe('hello from the agent');
    expect(h.llm.requests).toHaveLength(3);
    expect(h.llm.requests.every((r) => r.protocol === provider)).toBe(true);
    // The second request carries the first tool's result, read back from PostgreSQL.
    expect(JSON.stringify(h.llm.requests[1]!.body)).toContain('wrote 20 characters to notes/hello.md');
    // The last request carried the file contents that file_read returned.
    expect(JSON.stringify(h.llm.requests[2]!.body)).toContain('hello from the agent');

    const messages = await h.db.db
      .selectFrom('messages')
      .select(['role', 'kind'])
      .where('session_id', '=', `task_${taskId}_r1`)
      .orderBy('id')
      .execute();
    expect(messages.map((m) => m.role)).toEqual([
      'user',
      'assistant',
      'user',
      'assistant',
      'user',
      'assistant',
      'user',
    ]);
    expect(messages[0]!.kind).toBe('task_prompt');
    const calls = await h.db.db.selectFrom('llm_calls').selectAll().where('task_id', '=', taskId).execute();
    expect(calls).toHaveLength(3);
    const ledger = await h.db.db
      .selectFrom('tool_calls')
      .select(['tool', 'status', 'executions'])
      .where('task_id', '=', taskId)
      .execute();
    expect(ledger.map((l) => l.tool).sort()).toEqual(['file_read', 'file_write', 'task_submit_review']);
    expect(ledger.every((l) => l.status === 'completed' && l.executions === 1)).toBe(true);
    // The stored row follows the workflow's state through an activity: poll briefly.
    const row = await eventually(
      async () => {
        const current = await h.client.getTaskRow(taskId);
        return current.state === 'review' && current;
      },
      'the task row to say review',
      5_000,
    );
    expect(row.state).toBe('review');
  });

  test('a provider that repeats one tool call id on every reply: each call still runs once, under its own id', async () => {
    const sameId = <T extends { content: Array<{ type: string }> }>(turn: T): T => ({
      ...turn,
      content: turn.content.map((b) => (b.type === 'tool_use' ? { ...b, id: 'call_0' } : b)),
    });
    h.llm.enqueue(
      sameId(toolTurn('file_write', { path: 'first.txt', content: 'one' })),
      sameId(toolTurn('file_write', { path: 'second.txt', content: 'two' })),
      sameId(submitTurn('wrote both files')),
    );
    const agentId = await h.createAgent();
    const { taskId } = await h.client.startTask({
      agentId,
      title: 'Two files',
      description: 'Write first.txt and second.txt',
    });
    const status = await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(status.submission).toBe('wrote both files');
    expect(await readFile(path.join(h.workspaceDir, 'second.txt'), 'utf8')).toBe('two');
    const ledger = await h.db.db
      .selectFrom('tool_calls')
      .select(['tool_call_id', 'tool', 'executions'])
      .where('task_id', '=', taskId)
      .orderBy('started_at')
      .execute();
    expect(ledger.map((l) => [l.tool, l.executions])).toEqual([
      ['file_write', 1],
      ['file_write', 1],
      ['task_submit_review', 1],
    ]);
    expect(ledger[0]!.tool_call_id).toBe('call_0');
    expect(new Set(ledger.map((l) => l.tool_call_id)).size).toBe(3);
    // The provider saw each result answer its own call.
    expect(JSON.stringify(h.llm.requests.at(-1)!.body)).toContain('wrote 3 characters to second.txt');
  });
});
