import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Worker } from '@temporalio/worker';
import { EvalError, ForkClient } from '../../client/forks';
import type { RecordedRequest } from '../fake-llm';
import { eventually } from '../support/eventually';
import { createHarness, submitTurn, textTurn, toolTurn, type Harness } from '../support/harness';
import { killWorkerProcess, spawnWorkerProcess } from '../support/spawn-worker';
import { bodyText, isReflection, offersTools } from './task-support';

const SONNET = 'claude-sonnet-4-6';
const HAIKU = 'claude-haiku-4-5';
/** Originals whose number is at least this make the cheap model skip the file (so its pass rate drops). */
const HAIKU_SKIPS_FROM = 3;

/**
 * The scripted model: each task writes `out-N.md` (N from its description) and submits. Under the
 * cheap model, tasks 3 to 5 submit without writing: the graders must see it.
 */
function respond(request: RecordedRequest) {
  if (isReflection(request)) return textTurn('Nothing new worth saving.');
  if (!offersTools(request)) return textTurn('Summary: working.');
  const text = bodyText(request);
  const n = Number(/write out-(\d+)\.md/.exec(text)?.[1] ?? 0);
  const answered = text.includes('"tool_result"');
  if (answered) return submitTurn(`out-${n}.md written`);
  if (request.body.model === HAIKU && n >= HAIKU_SKIPS_FROM) return submitTurn(`out-${n}.md: nothing to do`);
  return toolTurn('file_write', { path: `out-${n}.md`, content: `result ${n}\n` });
}

/**
 * `agents eval run` end to end (issue 25): five recorded, accepted tasks under two candidates, selected
 * by a Temporal list query, with the worker SIGKILLed in the middle; then a budget that runs out.
 */
describe('eval on recorded runs', () => {
  let h: Harness;
  let forks: ForkClient;
  let agentId: string;
  let forkRoot: string;
  let files: string;
  let worker: ChildProcess | undefined;
  const originals: string[] = [];
  const previousRoot = process.env.AGENTS_FORK_WORKSPACE_ROOT;

  beforeAll(async () => {
    forkRoot = mkdtempSync(path.join(os.tmpdir(), 'da-eval-forks-'));
    files = mkdtempSync(path.join(os.tmpdir(), 'da-eval-files-'));
    process.env.AGENTS_FORK_WORKSPACE_ROOT = forkRoot;
    h = await createHarness();
    h.llm.setResponder(respond);
    forks = new ForkClient(h.temporal, h.db.db, { taskQueue: h.taskQueue });
    const inProcess: Worker = await h.startWorker();
    agentId = await h.createAgent({ model: SONNET });
    for (let n = 1; n <= 5; n++) {
      const taskId = `orig-${agentId}-${n}`;
      await h.client.startTask({ agentId, taskId, title: `Task ${n}`, description: `write out-${n}.md` });
      await h.waitForStatus(taskId, (s) => s.state === 'review');
      await h.client.review(taskId, { decision: 'accept' });
      originals.push(taskId);
    }
    for (const taskId of originals) await h.waitForStatus(taskId, (s) => s.state === 'completed');
    // The list query reads Temporal's visibility, which follows the workflows' search attributes.
    await eventually(async () => {
      let n = 0;
      for await (const _ of h.temporal.workflow.list({ query: `AgentId = "${agentId}" AND TaskState = "completed"` }))
        n += 1;
      return n === 5;
    }, 'the five originals visible as completed');
    inProcess.shutdown();
    await eventually(() => inProcess.getState() === 'STOPPED', 'the in-process worker stopped');
    worker = await spawnWorkerProcess({ taskQueue: h.taskQueue, fakeLlmUrl: h.llm.url });
    writeFileSync(path.join(files, 'sonnet.json'), JSON.stringify({ name: 'sonnet', model: SONNET }));
    writeFileSync(
      path.join(files, 'haiku.json'),
      JSON.stringify({ name: 'haiku', model: HAIKU, instructions: 'Be brief.' }),
    );
  }, 180_000);
  afterAll(async () => {
    if (worker) await killWorkerProcess(worker);
    await h.close();
    rmSync(forkRoot, { recursive: true, force: true });
    rmSync(files, { recursive: true, force: true });
    if (previousRoot === undefined) delete process.env.AGENTS_FORK_WORKSPACE_ROOT;
    else process.env.AGENTS_FORK_WORKSPACE_ROOT = previousRoot;
  });

  test('5 recorded tasks under 2 candidates: the expected table, the budget respected, and a worker SIGKILL mid-eval loses and duplicates nothing', async () => {
    const budgetUsd = 1;
    const { evalId } = await forks.startEval({
      selection: { query: `AgentId = "${agentId}" AND TaskState = "completed"` },
      candidateFiles: [path.join(files, 'sonnet.json'), path.join(files, 'haiku.json')],
      budgetUsd,
      concurrency: 3,
    });
    // Kill the worker once some forks are graded and others are still running.
    await eventually(
      async () => {
        const graded = await h.db.db
          .selectFrom('eval_runs')
          .select('fork_task_id')
          .where('eval_id', '=', evalId)
          .where('state', '=', 'graded')
          .execute();
        return graded.length >= 2;
      },
      'two forks graded',
      60_000,
      20,
    );
    await killWorkerProcess(worker!);
    worker = await spawnWorkerProcess({ taskQueue: h.taskQueue, fakeLlmUrl: h.llm.url });
    const result = await forks.evalResult(evalId);

    expect(result.rows).toHaveLength(10);
    const byCandidate = (name: string) => result.rows.filter((r) => r.candidate === name);
    expect(new Set(result.rows.map((r) => r.sourceTaskId))).toEqual(new Set(originals));
    // Same configuration: every call replayed, the original's file reproduced, every run passes.
    for (const r of byCandidate('sonnet')) {
      expect(r).toMatchObject({ state: 'graded', passed: true, calls: { replayed: 1, executed: 0, refused: 0 } });
      expect(r.fork!.changedFiles).toEqual(r.original!.changedFiles);
      expect(r.vsOriginal!.costUsd).toBe(1);
    }
    // The cheap model skips the file on tasks 3-5: those fail the changed-files grader.
    const haiku = byCandidate('haiku');
    const failed = haiku
      .filter((r) => !r.passed)
      .map((r) => originals.indexOf(r.sourceTaskId) + 1)
      .sort();
    expect(failed).toEqual([3, 4, 5]);
    for (const r of haiku) expect(r.fork!.costUsd).toBeLessThan(r.original!.costUsd);
    const totals = Object.fromEntries(result.totals.map((t) => [t.candidate, t]));
    expect(totals.sonnet).toMatchObject({
      runs: 5,
      passed: 5,
      passRate: 1,
      replayed: 5,
      executed: 0,
      refused: 0,
      skipped: 0,
    });
    expect(totals.haiku).toMatchObject({ runs: 5, passed: 2, passRate: 0.4, replayed: 2, skipped: 0 });
    expect(totals.haiku!.costUsd).toBeLessThan(totals.sonnet!.costUsd);
    // The original's figures come from its records: the sonnet forks cost exactly what the originals did.
    expect(totals.sonnet!.costUsd).toBeCloseTo(totals.sonnet!.originalCostUsd, 9);
    expect(result.spentUsd).toBeLessThanOrEqual(budgetUsd);
    expect(result.table).toMatch(/sonnet\s+100%\s+5\/5/);
    expect(result.table).toMatch(/haiku\s+40%\s+2\/5/);

    // Nothing lost, nothing duplicated: ten forks, each with exactly its scripted LLM calls (two, or one
    // where the cheap model submits at once) and one submission.
    const forkIds = result.rows.map((r) => r.forkTaskId);
    expect(new Set(forkIds).size).toBe(10);
    const calls = await h.db.db.selectFrom('llm_calls').select(['task_id']).where('task_id', 'in', forkIds).execute();
    for (const r of result.rows) {
      const scripted = r.candidate === 'haiku' && originals.indexOf(r.sourceTaskId) + 1 >= HAIKU_SKIPS_FROM ? 1 : 2;
      expect([r.forkTaskId, calls.filter((c) => c.task_id === r.forkTaskId).length]).toEqual([r.forkTaskId, scripted]);
    }
    const submits = await h.db.db
      .selectFrom('tool_calls')
      .select(['task_id', 'executions'])
      .where('task_id', 'in', forkIds)
      .where('tool', '=', 'task_submit_review')
      .execute();
    expect(submits).toHaveLength(10);
    expect(submits.every((s) => s.executions === 1)).toBe(true);
    const stored = await forks.evalTable(evalId);
    expect(stored).toMatchObject({ state: 'completed', spentUsd: result.spentUsd });
    expect(stored.rows).toHaveLength(10);
  }, 240_000);

  test('a budget that runs out: forks stop at their share or are skipped, and the eval spends no more than its budget', async () => {
    const budgetUsd = 0.002;
    const { evalId } = await forks.startEval({
      selection: { taskIds: originals.slice(0, 3) },
      candidateFiles: [path.join(files, 'sonnet.json')],
      budgetUsd,
      concurrency: 1,
    });
    const result = await forks.evalResult(evalId);
    expect(result.rows.map((r) => [r.state, r.passed])).toEqual([
      ['graded', true],
      ['graded', false],
      ['skipped', false],
    ]);
    expect(result.rows[1]!.note).toBe('settled: budget');
    expect(result.spentUsd).toBeGreaterThan(0);
    expect(result.spentUsd).toBeLessThanOrEqual(budgetUsd);
  }, 120_000);

  test('bad input gets a clear error and starts nothing: a candidate file that fails validation, a selection matching nothing, an unknown task', async () => {
    const bad = path.join(files, 'bad.json');
    writeFileSync(bad, JSON.stringify({ name: 'x', modle: 'typo' }));
    const candidateFiles = [path.join(files, 'sonnet.json')];
    const before = Number(
      (
        await h.db.db
          .selectFrom('evals')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
    await expect(forks.startEval({ selection: { taskIds: originals }, candidateFiles: [bad] })).rejects.toThrow(
      new RegExp(`${bad} is not a valid candidate configuration:[\\s\\S]*modle`),
    );
    await expect(
      forks.startEval({ selection: { taskIds: originals }, candidateFiles: [path.join(files, 'missing.json')] }),
    ).rejects.toThrow(/does not exist/);
    await expect(
      forks.startEval({ selection: { query: `AgentId = "nobody-${agentId}"` }, candidateFiles }),
    ).rejects.toThrow(
      new EvalError(`the selection "AgentId = \\"nobody-${agentId}\\"" matches no recorded task (forks are left out)`),
    );
    await expect(forks.startEval({ selection: { taskIds: ['no-such-task'] }, candidateFiles })).rejects.toThrow(
      /unknown task\(s\) "no-such-task"/,
    );
    await expect(forks.startEval({ selection: {}, candidateFiles })).rejects.toThrow(/select recorded tasks/);
    const after = Number(
      (
        await h.db.db
          .selectFrom('evals')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
    expect(after).toBe(before);
  });
});
