import { DEFAULT_ORG } from '../../activities/store/tenancy';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { partialWriteName } from '../../activities/tools/file-tools';
import { executeToolCall, settleUnansweredCalls } from '../../activities/tools/execute';
import { allRegisteredTools } from '../../activities/tools/registry';
import { appendMessage, ensureSession, loadMessages } from '../../activities/store/sessions';
import type { ToolResultBlock } from '../../activities/llm/types';
import { interruptedToolCallText, notLandedToolCallText, notRunToolCallText } from '../../prompts/task';
import { useHarness } from '../support/harness';

/**
 * A round attempt that stopped mid-turn (its worker killed after the model's reply was stored) leaves
 * calls without results. The next attempt answers each from the ledger before the model is asked
 * again: the stored result of a call that finished, "interrupted" for one that was running (its
 * partial file removed), "not run" for one that never started. A write, whose one effect is the
 * rename of its partial file, says exactly which: landed (its normal result) or nothing changed. Before, all three read "may or may
 * not have taken effect", and a model that believed it moved on without redoing a call that never ran.
 */
describe('calls left without a result by an interrupted attempt', () => {
  const h = useHarness();
  const toolContext = (agentId: string, sessionId: string, workspaceDir: string) => ({
    db: h.db.db,
    agentId,
    sessionId,
    workspaceDir,
    signal: new AbortController().signal,
    agentConfig: {},
    org: DEFAULT_ORG,
    heartbeat: () => undefined,
  });

  test('are answered from the ledger: finished, interrupted, landed or not, never started; once', async () => {
    const agentId = await h.createAgent();
    const sessionId = `settle-${agentId}`;
    const workspaceDir = path.join(h.workspaceDir, sessionId);
    mkdirSync(workspaceDir, { recursive: true });
    await ensureSession(h.db.db, { id: sessionId, agentId, kind: 'task' });
    await appendMessage(h.db.db, sessionId, 'task-prompt', { role: 'user', content: [{ type: 'text', text: 'go' }] });
    const calls = [
      { id: 'done-1', name: 'file_read', input: { path: 'a.txt' } },
      { id: 'running-2', name: 'file_write', input: { path: 'b.txt', content: 'bee' } },
      { id: 'never-3', name: 'shell_execute', input: { command: 'git commit -m x' } },
      { id: 'landed-4', name: 'file_write', input: { path: 'c.txt', content: 'sea' } },
      { id: 'running-5', name: 'shell_execute', input: { command: 'git push' } },
    ];
    await appendMessage(h.db.db, sessionId, 'assistant-a1-t0', {
      role: 'assistant',
      content: calls.map((c) => ({ type: 'tool_use' as const, ...c })),
    });
    const row = (id: string, tool: string, status: 'completed' | 'started', result: string | null) => ({
      session_id: sessionId,
      tool_call_id: id,
      agent_id: agentId,
      tool,
      args: JSON.stringify({}),
      status,
      side_effecting: tool !== 'file_read',
      result,
      is_error: false,
      executions: 1,
    });
    await h.db.db
      .insertInto('tool_calls')
      .values([
        row('done-1', 'file_read', 'completed', 'alpha'),
        row('running-2', 'file_write', 'started', null),
        row('landed-4', 'file_write', 'started', null),
        row('running-5', 'shell_execute', 'started', null),
      ])
      .execute();
    // The second write was killed after its rename: the target holds its content.
    writeFileSync(path.join(workspaceDir, 'c.txt'), 'sea');
    // What the killed write left behind, under its own name.
    const partial = path.join(workspaceDir, partialWriteName({ sessionId, toolCallId: 'running-2' }));
    writeFileSync(partial, 'be');

    const ctx = toolContext(agentId, sessionId, workspaceDir);
    expect(await settleUnansweredCalls(await loadMessages(h.db.db, sessionId), allRegisteredTools(), ctx)).toBe(5);
    // A second look finds nothing left to answer, and adds nothing.
    expect(await settleUnansweredCalls(await loadMessages(h.db.db, sessionId), allRegisteredTools(), ctx)).toBe(0);

    const results = (await loadMessages(h.db.db, sessionId))
      .flatMap((m) => m.content)
      .filter((b): b is ToolResultBlock => b.type === 'tool_result')
      .map((b) => [b.toolUseId, b.content, b.isError]);
    expect(results).toEqual([
      ['done-1', 'alpha', false],
      ['running-2', notLandedToolCallText('file_write'), true],
      ['never-3', notRunToolCallText('shell_execute'), true],
      ['landed-4', 'wrote 3 characters to c.txt', false],
      ['running-5', interruptedToolCallText('shell_execute'), true],
    ]);
    expect(existsSync(path.join(workspaceDir, 'b.txt'))).toBe(false);
    expect(existsSync(partial)).toBe(false);
    const ledger = await h.db.db
      .selectFrom('tool_calls')
      .select(['tool_call_id', 'status'])
      .where('session_id', '=', sessionId)
      .orderBy('tool_call_id')
      .execute();
    // The interrupted calls are closed in the ledger; the one that never started has no row and gets none.
    expect(ledger).toEqual([
      { tool_call_id: 'done-1', status: 'completed' },
      { tool_call_id: 'landed-4', status: 'completed' },
      { tool_call_id: 'running-2', status: 'failed' },
      { tool_call_id: 'running-5', status: 'failed' },
    ]);
  });

  test('a retried step runs a write that never landed (nothing changed), and keeps one that did, each once', async () => {
    const agentId = await h.createAgent();
    const sessionId = `rerun-${agentId}`;
    const workspaceDir = path.join(h.workspaceDir, sessionId);
    mkdirSync(workspaceDir, { recursive: true });
    await ensureSession(h.db.db, { id: sessionId, agentId, kind: 'task' });
    const calls = [
      { id: 'cut-1', name: 'file_write', input: { path: 'd.txt', content: 'dee' } },
      { id: 'cut-2', name: 'file_write', input: { path: 'e.txt', content: 'ee' } },
    ];
    await appendMessage(h.db.db, sessionId, 'assistant-a1-t0', {
      role: 'assistant',
      content: calls.map((c) => ({ type: 'tool_use' as const, ...c })),
    });
    await h.db.db
      .insertInto('tool_calls')
      .values(
        calls.map((c) => ({
          session_id: sessionId,
          tool_call_id: c.id,
          agent_id: agentId,
          tool: c.name,
          args: JSON.stringify(c.input),
          status: 'started' as const,
          side_effecting: true,
          is_error: false,
          executions: 1,
        })),
      )
      .execute();
    // The first was killed before its rename (its partial left, d.txt holding older text), the second after.
    writeFileSync(path.join(workspaceDir, 'd.txt'), 'older');
    writeFileSync(path.join(workspaceDir, partialWriteName({ sessionId, toolCallId: 'cut-1' })), 'de');
    writeFileSync(path.join(workspaceDir, 'e.txt'), 'ee');
    const ctx = toolContext(agentId, sessionId, workspaceDir);
    const run = (toolCallId: string) =>
      executeToolCall({ agentId, sessionId, attempt: 1, turn: 0, toolCallId }, allRegisteredTools(), ctx);
    expect(await run('cut-1')).toMatchObject({ kind: 'done', isError: false, preview: 'wrote 3 characters to d.txt' });
    expect(await run('cut-2')).toMatchObject({ kind: 'done', isError: false, preview: 'wrote 2 characters to e.txt' });
    expect(readFileSync(path.join(workspaceDir, 'd.txt'), 'utf8')).toBe('dee');
    expect(existsSync(path.join(workspaceDir, partialWriteName({ sessionId, toolCallId: 'cut-1' })))).toBe(false);
    const ledger = await h.db.db
      .selectFrom('tool_calls')
      .select(['tool_call_id', 'status', 'executions'])
      .where('session_id', '=', sessionId)
      .orderBy('tool_call_id')
      .execute();
    expect(ledger).toEqual([
      { tool_call_id: 'cut-1', status: 'completed', executions: 1 },
      { tool_call_id: 'cut-2', status: 'completed', executions: 1 },
    ]);
  });
});
