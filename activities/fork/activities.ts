/**
 * The eval workflow's activities: resolve the selection, make each fork, wait until it settles, grade
 * it from the records, and total the eval. Each is idempotent (rows keyed by eval, task and candidate),
 * so a worker that dies mid-eval loses and duplicates nothing when Temporal runs them again.
 */
import { Context } from '@temporalio/activity';
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import type { ChatRouter } from '../llm/types';
import { recordLlmCall } from '../llm/usage';
import { statusQuery, taskWorkflowId } from '../../workflows/contract';

import { isTerminal, type TaskState } from '../../workflows/rules/task-state';
import { asFailure, EvalError } from './errors';
import { prepareFork } from './prepare';
import { EvalCandidateSchema, type EvalCandidate } from './spec';
import { runFigures } from './figures';
import { forkCallCounts } from './tool-calls';
import {
  changedFilesVsOriginal,
  formatEvalTable,
  parseJudgeVerdict,
  reachedReviewWithoutHuman,
  runPassed,
  toolErrorsVsOriginal,
  totalsPerCandidate,
  usageVsOriginal,
  type CandidateTotals,
  type EvalRow,
  type Grade,
} from './graders';
import { candidateForkInput, type EvalRunRef, type EvalSelection, type EvalJudge } from '../../workflows/eval-contract';

/** At most this many recorded tasks per eval: a week of a busy agent, not a warehouse. */
export const EVAL_MAX_TASKS = 500;
/** How often a settling fork's state is read (and the activity heartbeats). */
const SETTLE_POLL_MS = 250;
/** The judge answers a verdict, not an essay. */
const JUDGE_MAX_TOKENS = 400;

function heartbeat(details?: unknown): void {
  try {
    Context.current().heartbeat(details);
  } catch {
    // outside an activity (a unit test)
  }
}

/** How often long eval activities heartbeat (a workspace copy, a judge's answer). */
const EVAL_HEARTBEAT_MS = 1_000;

/** Runs `work` heartbeating every second, so a dead worker's share of the eval is taken over in seconds. */
async function beating<T>(work: () => Promise<T>): Promise<T> {
  const timer = setInterval(() => heartbeat(), EVAL_HEARTBEAT_MS);
  try {
    return await work();
  } catch (error) {
    throw asFailure(error);
  } finally {
    clearInterval(timer);
  }
}

export function createForkActivities(deps: { db: Kysely<Database>; router: ChatRouter }) {
  const { db } = deps;
  return {
    /** Checks the candidates, resolves the selection (ids, or a Temporal list query) and records the eval. */
    async startEval(input: {
      evalId: string;
      workflowId: string;
      selection: EvalSelection;
      candidates: EvalCandidate[];
      budgetUsd?: number;
    }): Promise<{ taskIds: string[] }> {
      return beating(async () => {
        const names = new Set<string>();
        for (const [i, c] of input.candidates.entries()) {
          const parsed = EvalCandidateSchema.safeParse(c);
          if (!parsed.success)
            throw new EvalError(
              `candidate ${i + 1} is not a valid configuration: ${parsed.error.issues.map((x) => `${x.path.join('.')}: ${x.message}`).join('; ')}`,
            );
          if (names.has(c.name))
            throw new EvalError(
              `two candidates are named ${JSON.stringify(c.name)}: names label the table's columns, so they must differ`,
            );
          names.add(c.name);
        }
        if (names.size === 0) throw new EvalError('an eval needs at least one candidate configuration');
        const taskIds = await resolveSelection(input.selection);
        await db
          .insertInto('evals')
          .values({
            id: input.evalId,
            workflow_id: input.workflowId,
            selection: JSON.stringify({ ...input.selection, matched: taskIds }),
            candidates: JSON.stringify(input.candidates),
            budget_usd: input.budgetUsd ?? null,
            state: 'running',
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        return { taskIds };
      });
    },

    /** Makes (or finds) the fork of one task under one candidate, and its eval row. */
    async prepareEvalFork(
      input: EvalRunRef & { candidate: EvalCandidate },
    ): Promise<{ agentId: string; title: string }> {
      const c = input.candidate;
      return beating(async () => {
        const plan = await prepareFork(db, input.forkTaskId, candidateForkInput(input.sourceTaskId, c), {
          createdBy: `eval ${input.evalId}`,
        });
        await db
          .insertInto('eval_runs')
          .values({
            eval_id: input.evalId,
            source_task_id: input.sourceTaskId,
            candidate: c.name,
            fork_task_id: input.forkTaskId,
            state: 'running',
          })
          .onConflict((oc) => oc.columns(['eval_id', 'source_task_id', 'candidate']).doNothing())
          .execute();
        const task = await db
          .selectFrom('tasks')
          .select(['agent_id', 'title'])
          .where('id', '=', input.forkTaskId)
          .executeTakeFirstOrThrow();
        return { agentId: task.agent_id, title: task.title ?? plan.source.title };
      });
    },

    /**
     * Waits until the fork needs nobody any more: it reached review or a final state, its budget share
     * is spent (its round holds for a budget decision), or it waits for a human's approval.
     */
    async awaitForkSettled(input: {
      forkTaskId: string;
      budgetUsd?: number;
    }): Promise<{ settled: 'review' | 'ended' | 'budget' | 'needs-human'; state: string }> {
      for (;;) {
        const task = await db
          .selectFrom('tasks')
          .select(['state'])
          .where('id', '=', input.forkTaskId)
          .executeTakeFirst();
        const state = task?.state ?? 'pending';
        if (state === 'review') return { settled: 'review', state };
        if (isTerminal(state as TaskState)) return { settled: 'ended', state };
        const pending = await db
          .selectFrom('approvals')
          .select('id')
          .where('task_id', '=', input.forkTaskId)
          .where('status', '=', 'pending')
          .executeTakeFirst();
        if (pending) return { settled: 'needs-human', state };
        if (input.budgetUsd !== undefined && state === 'in_progress') {
          // Held by its budget share: its round waits for a budget decision nobody gives in an eval.
          const status = await Context.current()
            .client.workflow.getHandle(taskWorkflowId(input.forkTaskId))
            .query(statusQuery)
            .catch(() => undefined);
          if (status?.phase === 'awaiting-budget') return { settled: 'budget', state };
        }
        heartbeat({ state });
        await new Promise((r) => setTimeout(r, SETTLE_POLL_MS));
      }
    },

    /** Grades one fork against its original from the records, with the optional judge; stores the row. */
    async gradeEvalRun(
      input: EvalRunRef & { candidate: string; settled: string; judge?: EvalJudge },
    ): Promise<{ costUsd: number; passed: boolean; maxCallUsd: number }> {
      return beating(() => grade(input));
    },

    /** A run the eval's budget left no room for: recorded as skipped, no fork made. */
    async skipEvalRun(input: EvalRunRef & { candidate: string; reason: string }): Promise<void> {
      await skip(input);
    },

    /** Totals per candidate, stored with the eval; returns the table as printed. */
    async finishEval(input: {
      evalId: string;
      candidates: string[];
    }): Promise<{ rows: EvalRow[]; totals: CandidateTotals[]; spentUsd: number; table: string }> {
      return finish(input);
    },
  };

  async function grade(
    input: EvalRunRef & { candidate: string; settled: string; judge?: EvalJudge },
  ): Promise<{ costUsd: number; passed: boolean; maxCallUsd: number }> {
    const maxCall = await db
      .selectFrom('llm_calls')
      .select((eb) => eb.fn.coalesce(eb.fn.max<string>('cost_usd'), eb.lit(0)).as('max'))
      .where('task_id', '=', input.forkTaskId)
      .executeTakeFirstOrThrow();
    const maxCallUsd = Number(maxCall.max);
    const done = await db
      .selectFrom('eval_runs')
      .select(['state', 'result'])
      .where('eval_id', '=', input.evalId)
      .where('source_task_id', '=', input.sourceTaskId)
      .where('candidate', '=', input.candidate)
      .executeTakeFirst();
    if (done?.state === 'graded') {
      const row = done.result as EvalRow;
      return { costUsd: (row.fork?.costUsd ?? 0) + row.judgeCostUsd, passed: row.passed, maxCallUsd };
    }
    const source = await db
      .selectFrom('tasks')
      .innerJoin('agents', 'agents.id', 'tasks.agent_id')
      .select(['agents.workspace_dir', 'agents.id as agentId'])
      .where('tasks.id', '=', input.sourceTaskId)
      .executeTakeFirstOrThrow();
    const original = await runFigures(db, input.sourceTaskId, { kind: 'original', dir: source.workspace_dir });
    const fork = await runFigures(db, input.forkTaskId, { kind: 'fork' });
    const grades: Grade[] = [
      reachedReviewWithoutHuman(fork),
      changedFilesVsOriginal(fork, original),
      toolErrorsVsOriginal(fork, original),
    ];
    let judgeCostUsd = 0;
    if (input.judge) {
      const verdict = await judge(
        input,
        source.agentId,
        fork.submission ?? '(no submission)',
        original.submission ?? '(none)',
        fork.changedFiles,
      );
      grades.push(verdict.grade);
      judgeCostUsd = verdict.costUsd;
    }
    const counts = (await forkCallCounts(db, [input.forkTaskId])).get(input.forkTaskId) ?? {
      replayed: 0,
      executed: 0,
      refused: 0,
    };
    const record = await db
      .selectFrom('task_forks')
      .select(['incomplete_calls'])
      .where('task_id', '=', input.forkTaskId)
      .executeTakeFirst();
    const interrupted = await db
      .selectFrom('tool_calls')
      .select('tool_call_id')
      .where('task_id', '=', input.forkTaskId)
      .where('status', '=', 'started')
      .execute();
    const incomplete = [
      record && record.incomplete_calls.length > 0
        ? `the source has ${record.incomplete_calls.length} interrupted call(s) (outcome unknown)`
        : '',
      interrupted.length > 0 ? `the fork has ${interrupted.length} interrupted call(s)` : '',
    ]
      .filter(Boolean)
      .join('; ');
    const row: EvalRow = {
      sourceTaskId: input.sourceTaskId,
      candidate: input.candidate,
      forkTaskId: input.forkTaskId,
      state: 'graded',
      passed: runPassed(grades, original),
      grades,
      fork,
      original,
      vsOriginal: usageVsOriginal(fork, original),
      calls: counts,
      ...(incomplete ? { incomplete } : {}),
      judgeCostUsd,
      note: `settled: ${input.settled}`,
    };
    await db
      .updateTable('eval_runs')
      .set({ state: 'graded', result: JSON.stringify(row) })
      .where('eval_id', '=', input.evalId)
      .where('source_task_id', '=', input.sourceTaskId)
      .where('candidate', '=', input.candidate)
      .execute();
    return { costUsd: fork.costUsd + judgeCostUsd, passed: row.passed, maxCallUsd };
  }

  async function skip(input: EvalRunRef & { candidate: string; reason: string }): Promise<void> {
    const row: EvalRow = {
      sourceTaskId: input.sourceTaskId,
      candidate: input.candidate,
      forkTaskId: input.forkTaskId,
      state: 'skipped',
      passed: false,
      grades: [],
      calls: { replayed: 0, executed: 0, refused: 0 },
      judgeCostUsd: 0,
      note: input.reason,
    };
    await db
      .insertInto('eval_runs')
      .values({
        eval_id: input.evalId,
        source_task_id: input.sourceTaskId,
        candidate: input.candidate,
        fork_task_id: input.forkTaskId,
        state: 'skipped',
        result: JSON.stringify(row),
      })
      .onConflict((oc) => oc.columns(['eval_id', 'source_task_id', 'candidate']).doNothing())
      .execute();
  }

  async function finish(input: {
    evalId: string;
    candidates: string[];
  }): Promise<{ rows: EvalRow[]; totals: CandidateTotals[]; spentUsd: number; table: string }> {
    const report = await evalReport(db, input.evalId);
    const totals = totalsPerCandidate(report.rows, input.candidates);
    const spentUsd = Math.round(totals.reduce((s, t) => s + t.costUsd, 0) * 1e6) / 1e6;
    await db
      .updateTable('evals')
      .set({ state: 'completed', spent_usd: spentUsd, totals: JSON.stringify(totals), finished_at: new Date() })
      .where('id', '=', input.evalId)
      .execute();
    return { rows: report.rows, totals, spentUsd, table: formatEvalTable(report.rows, totals) };
  }

  async function resolveSelection(selection: EvalSelection): Promise<string[]> {
    let ids: string[];
    if (selection.taskIds && selection.taskIds.length > 0) {
      ids = [...new Set(selection.taskIds)];
      const found = await db.selectFrom('tasks').select(['id', 'fork_of']).where('id', 'in', ids).execute();
      const missing = ids.filter((id) => !found.some((f) => f.id === id));
      if (missing.length)
        throw new EvalError(
          `unknown task(s) ${missing.map((m) => JSON.stringify(m)).join(', ')}: an eval replays recorded tasks`,
        );
    } else if (selection.query) {
      const client = Context.current().client;
      ids = [];
      try {
        for await (const wf of client.workflow.list({
          query: `WorkflowType = 'taskWorkflow' AND (${selection.query})`,
        })) {
          const taskId = wf.workflowId.startsWith('task-') ? wf.workflowId.slice('task-'.length) : wf.workflowId;
          if (!ids.includes(taskId)) ids.push(taskId);
          if (ids.length > EVAL_MAX_TASKS) break;
        }
      } catch (error) {
        throw new EvalError(
          `the list query ${JSON.stringify(selection.query)} was refused by Temporal: ${(error as Error).message}`,
        );
      }
    } else {
      throw new EvalError('select the recorded tasks by ids or by a Temporal list query');
    }
    // Forks are results of evals, not recorded work to evaluate.
    const rows = ids.length
      ? await db.selectFrom('tasks').select(['id', 'fork_of', 'created_at']).where('id', 'in', ids).execute()
      : [];
    const originals = rows
      .filter((r) => r.fork_of === null)
      .sort((a, b) => a.created_at.getTime() - b.created_at.getTime() || (a.id < b.id ? -1 : 1))
      .map((r) => r.id);
    if (originals.length === 0)
      throw new EvalError(
        `the selection ${selection.query ? JSON.stringify(selection.query) : JSON.stringify(selection.taskIds)} matches no recorded task (forks are left out)`,
      );
    if (originals.length > EVAL_MAX_TASKS)
      throw new EvalError(`the selection matches more than ${EVAL_MAX_TASKS} tasks: narrow it`);
    return originals;
  }

  async function judge(
    run: EvalRunRef & { judge?: EvalJudge },
    agentId: string,
    submission: string,
    originalSubmission: string,
    files: string[],
  ): Promise<{ grade: Grade; costUsd: number }> {
    const j = run.judge!;
    const text =
      `You grade an AI agent's work against a rubric. Answer with JSON only: {"pass": true|false, "reason": "one sentence"}.\n\n` +
      `RUBRIC\n${j.rubric}\n\nTHE AGENT'S SUBMISSION\n${submission}\n\nFILES IT CHANGED\n${files.join('\n') || '(none)'}\n\nTHE ACCEPTED ORIGINAL'S SUBMISSION, FOR REFERENCE\n${originalSubmission}`;
    const idemKey = `judge:${run.sourceTaskId}:${run.forkTaskId}`;
    const sessionId = `eval_${run.evalId}`;
    const recorded = await db
      .selectFrom('llm_calls')
      .select(['cost_usd'])
      .where('session_id', '=', sessionId)
      .where('idem_key', '=', idemKey)
      .executeTakeFirst();
    const started = Date.now();
    const result = await deps.router.chat(
      {
        system: [{ text: 'You are a strict, fair grader.', cacheBreakpoint: false }],
        messages: [{ role: 'user', content: [{ type: 'text', text }] }],
        tools: [],
        maxTokens: JUDGE_MAX_TOKENS,
      },
      { ...(j.provider ? { provider: j.provider } : {}), ...(j.model ? { model: j.model } : {}) },
    );
    // Its cost is the eval's: recorded once per run (a retried grade finds it), on no task.
    const costUsd = recorded
      ? Number(recorded.cost_usd)
      : await recordLlmCall(db, { agentId, sessionId, idemKey, result, durationMs: Date.now() - started });
    const reply = result.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('\n');
    return { grade: parseJudgeVerdict(reply), costUsd };
  }
}

/** An eval as stored: its rows (in the order they were made) and header. */
export async function evalReport(db: Kysely<Database>, evalId: string): Promise<{ rows: EvalRow[] }> {
  const runs = await db
    .selectFrom('eval_runs')
    .selectAll()
    .where('eval_id', '=', evalId)
    .orderBy('created_at')
    .orderBy('source_task_id')
    .orderBy('candidate')
    .execute();
  return {
    rows: runs.map((r) =>
      r.result
        ? (r.result as EvalRow)
        : {
            sourceTaskId: r.source_task_id,
            candidate: r.candidate,
            forkTaskId: r.fork_task_id,
            state: r.state === 'running' ? 'failed' : (r.state as EvalRow['state']),
            passed: false,
            grades: [],
            calls: { replayed: 0, executed: 0, refused: 0 },
            judgeCostUsd: 0,
            note: r.state === 'running' ? 'still running' : undefined,
          },
    ),
  };
}
