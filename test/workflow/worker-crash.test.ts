import { spawn, type ChildProcess } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { RecordedRequest, ScriptedResponse } from '../fake-llm';
import { useHarness } from '../support/harness';
import { eventually } from '../support/eventually';

/** Steps each scripted task takes before submitting: one file_write per step. */
const STEPS = 4;
/** Delay between streamed events, so kills land mid-stream as well as between calls. */
const CHUNK_DELAY_MS = 25;

/**
 * Scripted agent: reads the task id from the task prompt and the number of tool results so far, and
 * writes `<taskId>/step-<n>.txt` until STEPS files exist, then submits. Decisions depend only on the
 * conversation, so a replayed or retried call gets the same answer.
 */
function scriptedAgent(request: RecordedRequest): ScriptedResponse {
  const body = JSON.stringify(request.body);
  const taskId = /Task ID: ([0-9a-f-]{36})/.exec(body)?.[1] ?? 'unknown';
  const done = (body.match(/"tool_result"/g) ?? []).length;
  const usage = { inputTokens: 200, outputTokens: 30 };
  if (done < STEPS) {
    return {
      kind: 'message',
      content: [
        { type: 'text', text: `writing step ${done}` },
        {
          type: 'tool_use',
          name: 'file_write',
          input: { path: `${taskId}/step-${done}.txt`, content: `step ${done} of ${taskId}` },
        },
      ],
      stopReason: 'tool_use',
      usage,
      chunkDelayMs: CHUNK_DELAY_MS,
    };
  }
  return {
    kind: 'message',
    content: [{ type: 'tool_use', name: 'task_submit_review', input: { summary: `${STEPS} steps written` } }],
    stopReason: 'tool_use',
    usage,
    chunkDelayMs: CHUNK_DELAY_MS,
  };
}

describe('a worker killed with SIGKILL mid-task', () => {
  const h = useHarness({
    beforeClose: async () => {
      for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
    },
  });
  const workers: ChildProcess[] = [];

  beforeAll(async () => {
    h.llm.setResponder(scriptedAgent);
  });

  async function startWorkerProcess(): Promise<ChildProcess> {
    // One process (node with tsx as a loader), so SIGKILL hits the worker itself, not a launcher.
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/worker-process.ts'], {
      env: { ...process.env, TEST_TASK_QUEUE: h.taskQueue, FAKE_LLM_URL: h.llm.url },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    workers.push(child);
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on('data', (chunk: Buffer) => chunk.toString().includes('worker-ready') && resolve());
      child.once('exit', (code) => reject(new Error(`worker exited early with ${code}`)));
    });
    return child;
  }

  async function kill(child: ChildProcess): Promise<void> {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  }

  async function assertNothingRedone(taskIds: string[]): Promise<void> {
    const ledger = await h.db.db
      .selectFrom('tool_calls')
      .select(['task_id', 'tool', 'status', 'executions', 'result', 'args'])
      .where('task_id', 'in', taskIds)
      .execute();
    for (const taskId of taskIds) {
      const files = (await readdir(path.join(h.workspaceDir, taskId))).sort();
      // A write killed between its ledger row and the file is reported to the model as interrupted (its
      // outcome unknown) and never run again: that step's file may be missing, every other must exist.
      const interruptedPaths = ledger
        .filter((l) => l.task_id === taskId && /was interrupted/.test(l.result ?? ''))
        .map((l) => path.basename((l.args as { path?: string }).path ?? ''));
      const expected = Array.from({ length: STEPS }, (_, i) => `step-${i}.txt`);
      expect(files.filter((f) => !interruptedPaths.includes(f))).toEqual(
        expected.filter((f) => !interruptedPaths.includes(f)),
      );
      expect(files.every((f) => expected.includes(f))).toBe(true);
      for (const f of files)
        expect(await readFile(path.join(h.workspaceDir, taskId, f), 'utf8')).toBe(`step ${f.slice(5, 6)} of ${taskId}`);
    }
    // Every side-effecting call ran at most once; a call cut off mid-run is reported, not re-run.
    expect(ledger.filter((l) => l.executions > 1)).toEqual([]);
    for (const taskId of taskIds) {
      const writes = ledger.filter((l) => l.task_id === taskId && l.tool === 'file_write' && l.status === 'completed');
      const interrupted = ledger.filter((l) => l.task_id === taskId && /was interrupted/.test(l.result ?? ''));
      expect(writes.length + interrupted.length).toBeGreaterThanOrEqual(STEPS);
    }
    // Every completed LLM call is stored once; the provider saw each at most once more (a call cut off mid-stream).
    const calls = await h.db.db
      .selectFrom('llm_calls')
      .select(['task_id', 'idem_key', 'session_id'])
      .where('task_id', 'in', taskIds)
      .execute();
    expect(new Set(calls.map((c) => `${c.session_id}/${c.idem_key}`)).size).toBe(calls.length);
  }

  test('one task: killed during an LLM stream, restarted, completes with completed work kept', async () => {
    let worker = await startWorkerProcess();
    const agentId = await h.createAgent();
    const { taskId } = await h.client.startTask({ agentId, title: 'Crash once', description: 'write steps' });
    // Kill while the third LLM call is streaming.
    await eventually(() => h.llm.requests.length >= 3, 'the third LLM call', 30_000, 10);
    await new Promise((r) => setTimeout(r, CHUNK_DELAY_MS * 2));
    await kill(worker);
    const requestsAtKill = h.llm.requests.length;
    worker = await startWorkerProcess();
    const status = await h.waitForStatus(taskId, (s) => s.state === 'review', 90_000);
    expect(status.submission).toBe(`${STEPS} steps written`);
    await assertNothingRedone([taskId]);
    // STEPS + 1 calls are needed; at most one more because the call killed mid-stream was sent again.
    const calls = await h.db.db.selectFrom('llm_calls').select('id').where('task_id', '=', taskId).execute();
    expect(calls).toHaveLength(STEPS + 1);
    expect(h.llm.requests.length).toBeLessThanOrEqual(STEPS + 2);
    expect(requestsAtKill).toBeGreaterThanOrEqual(3);
  });

  test('20 concurrent tasks with SIGKILLs at random points: 0 lost, 0 duplicated side effects', async () => {
    const TASKS = 20;
    const KILLS = 3;
    let worker = await startWorkerProcess();
    const agentId = await h.createAgent();
    const taskIds: string[] = [];
    for (let i = 0; i < TASKS; i++)
      taskIds.push((await h.client.startTask({ agentId, title: `Crash ${i}`, description: 'write steps' })).taskId);
    for (let k = 0; k < KILLS; k++) {
      await new Promise((r) => setTimeout(r, 300 + Math.floor(Math.random() * 1_500)));
      await kill(worker);
      worker = await startWorkerProcess();
    }
    for (const taskId of taskIds) await h.waitForStatus(taskId, (s) => s.state === 'review', 180_000);
    await assertNothingRedone(taskIds);
  }, 300_000);
});
