import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { RecordedRequest, ScriptedResponse } from '../fake-llm';
import type { Harness } from './harness';

/** Steps each scripted task takes before submitting: one file_write per step. */
export const STEPS = 4;
/** Delay between streamed events, so a fault lands mid-stream as well as between calls. */
export const CHUNK_DELAY_MS = 25;

/**
 * Scripted agent for fault tests: reads the task id from the task prompt and the number of tool
 * results so far, and writes `<taskId>/step-<n>.txt` until STEPS files exist, then submits. Decisions
 * depend only on the conversation, so a replayed or retried call gets the same answer.
 */
export function stepAgent(request: RecordedRequest): ScriptedResponse {
  const body = JSON.stringify(request.body);
  const taskId = /Task ID: ([^\]\s\\]+)/.exec(body)?.[1] ?? 'unknown';
  const done = (body.match(/"tool_result"/g) ?? []).length;
  const usage = { inputTokens: 200, outputTokens: 30 };
  if (!Array.isArray(request.body.tools) || !/TASK EXECUTION/.test(body))
    return { kind: 'message', content: [{ type: 'text', text: 'noted' }], stopReason: 'end_turn', usage };
  const content: Extract<ScriptedResponse, { kind: 'message' }>['content'] =
    done < STEPS
      ? [
          { type: 'text', text: `writing step ${done}` },
          {
            type: 'tool_use',
            name: 'file_write',
            input: { path: `${taskId}/step-${done}.txt`, content: `step ${done} of ${taskId}` },
          },
        ]
      : [{ type: 'tool_use', name: 'task_submit_review', input: { summary: `${STEPS} steps written` } }];
  return { kind: 'message', content, stopReason: 'tool_use', usage, chunkDelayMs: CHUNK_DELAY_MS };
}

/**
 * Nothing was done twice: each task's files hold exactly what they should, every side-effecting tool
 * call ran at most once (a call cut off mid-run is reported as interrupted, never re-run), each step
 * has at most one ledger row, and every LLM call is stored once.
 */
export async function expectNoDuplicatedEffects(h: Harness, taskIds: string[]): Promise<void> {
  for (const taskId of taskIds) {
    const dir = path.join(h.workspaceDir, taskId);
    const files = (await readdir(dir)).sort();
    for (const f of files) expect(await readFile(path.join(dir, f), 'utf8')).toBe(`step ${f.slice(5, 6)} of ${taskId}`);
  }
  const ledger = await h.db.db
    .selectFrom('tool_calls')
    .select(['task_id', 'tool', 'status', 'executions', 'result'])
    .where('task_id', 'in', taskIds)
    .execute();
  expect(ledger.filter((l) => l.executions > 1)).toEqual([]);
  // At most one ledger row per step: completed, reported as interrupted, or failed. (A call that could
  // not even be recorded during an outage reaches the model as an error result, and the model moves on.)
  for (const taskId of taskIds) {
    const attempts = ledger.filter((l) => l.task_id === taskId && l.tool === 'file_write');
    expect(attempts.length).toBeLessThanOrEqual(STEPS);
    const done = attempts.filter((l) => l.status === 'completed');
    expect((await readdir(path.join(h.workspaceDir, taskId))).length).toBeGreaterThanOrEqual(done.length);
  }
  const calls = await h.db.db
    .selectFrom('llm_calls')
    .select(['idem_key', 'session_id'])
    .where('task_id', 'in', taskIds)
    .execute();
  expect(new Set(calls.map((c) => `${c.session_id}/${c.idem_key}`)).size).toBe(calls.length);
}
