/**
 * Forks and evals from a service or the CLI (issue 25): fork a recorded task at a step with overrides,
 * read a fork's call-by-call report, start an eval over recorded tasks and read its table. Bad input is
 * refused before anything is written or started (`ForkError`, `EvalError`, with the reason in words).
 */
import { randomUUID } from 'node:crypto';
import { type Client, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Kysely } from 'kysely';
import type { Database } from '../schema/database';
import { EvalError, ForkError } from '../activities/fork/errors';
import { planFork, prepareFork } from '../activities/fork/prepare';
import { parseEvalCandidate, type EvalCandidate } from '../activities/fork/spec';
import { evalReport } from '../activities/fork/activities';
import { formatEvalTable, totalsPerCandidate, type CandidateTotals, type EvalRow } from '../activities/fork/graders';
import { readUserTextFile } from '../activities/store/user-files';
import {
  AgentIdSearchAttribute,
  DEFAULT_TASK_QUEUE,
  ForkOfSearchAttribute,
  TaskIdSearchAttribute,
  TaskStateSearchAttribute,
  OrgIdSearchAttribute,
  taskWorkflowId,
  type ForkInput,
  type ForkOverrides,
} from '../workflows/contract';
import { TASK_ID_PATTERN } from '../workflows/rules/task-input';
import {
  evalWorkflowId,
  type EvalJudge,
  type EvalSelection,
  type EvalWorkflowInput,
  type EvalWorkflowResult,
} from '../workflows/eval-contract';
import type { taskWorkflow } from '../workflows/task';
import type { evalWorkflow } from '../workflows/eval';

export { EvalError, ForkError };
export type { CandidateTotals, EvalCandidate, EvalRow };

export interface ForkTaskOptions {
  /** Steps of the source round kept (0: from the task prompt). */
  at: number;
  round?: number;
  overrides?: ForkOverrides;
  allowTools?: string[];
  /** The fork's task id (default `<source>.fork-<random>`). */
  taskId?: string;
  costBudgetUsd?: number;
  approvalTimeoutMs?: number;
  createdBy?: string;
}

export interface ForkStarted {
  taskId: string;
  workflowId: string;
  sourceTaskId: string;
  atStep: number;
  steps: number;
  copiedToolCalls: number;
  workspaceDir: string;
  workspaceNote: string;
  /** Source calls whose outcome was never recorded (the worker died while they ran). */
  incompleteCalls: Array<{ position: number; tool: string; toolCallId: string }>;
}

export interface ForkReport {
  taskId: string;
  sourceTaskId: string;
  atStep: number;
  workspaceDir: string;
  workspaceNote: string;
  copiedToolCalls: number;
  incompleteCalls: Array<{ position: number; tool: string; toolCallId: string }>;
  calls: Array<{
    position: number;
    tool: string;
    outcome: 'replayed' | 'executed' | 'refused';
    toolCallId: string;
    sourceToolCallId: string | null;
    note: string | null;
  }>;
  counts: { replayed: number; executed: number; refused: number };
}

export interface StartEvalOptions {
  selection: EvalSelection;
  /** Candidate configurations, or the paths of their JSON files (validated, each error naming its file). */
  candidates?: EvalCandidate[];
  candidateFiles?: string[];
  budgetUsd?: number;
  concurrency?: number;
  /** A rubric file for the LLM judge, and the model that grades (default: the router's default). */
  judgeRubricFile?: string;
  judge?: Omit<EvalJudge, 'rubric'> & { rubric?: string };
  evalId?: string;
}

/** Eval ids become the prefix of task ids (`<evalId>.t<i>.c<j>`), which must stay within TASK_ID_PATTERN. */
const EVAL_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$/;

export class ForkClient {
  readonly taskQueue: string;
  constructor(
    readonly temporal: Client,
    readonly db: Kysely<Database>,
    options: { taskQueue?: string } = {},
  ) {
    this.taskQueue = options.taskQueue ?? DEFAULT_TASK_QUEUE;
  }

  /** Makes the fork (session copy, own workspace) and starts its task workflow, linked by `ForkOf`. */
  async forkTask(sourceTaskId: string, options: ForkTaskOptions): Promise<ForkStarted> {
    const fork: ForkInput = {
      sourceTaskId,
      atStep: options.at,
      ...(options.round !== undefined ? { round: options.round } : {}),
      ...(options.overrides ? { overrides: options.overrides } : {}),
      ...(options.allowTools?.length ? { allowTools: options.allowTools } : {}),
    };
    // Checked before anything is written: an unknown task or a step past the end is refused in words.
    await planFork(this.db, fork);
    const taskId = options.taskId ?? `${sourceTaskId}.fork-${randomUUID().slice(0, 8)}`;
    if (!TASK_ID_PATTERN.test(taskId))
      throw new ForkError(`invalid fork task id ${JSON.stringify(taskId)}: 1-200 letters, digits or . _ : + -`);
    if (options.costBudgetUsd !== undefined && !(options.costBudgetUsd > 0))
      throw new ForkError("the fork's budget must be a positive number of US dollars");
    const plan = await prepareFork(this.db, taskId, fork, { createdBy: options.createdBy });
    const task = await this.db
      .selectFrom('tasks')
      .select(['agent_id', 'title', 'org'])
      .where('id', '=', taskId)
      .executeTakeFirstOrThrow();
    try {
      await this.temporal.workflow.start<typeof taskWorkflow>('taskWorkflow', {
        taskQueue: this.taskQueue,
        workflowId: taskWorkflowId(taskId),
        args: [
          {
            taskId,
            agentId: task.agent_id,
            title: task.title,
            ...(options.createdBy ? { createdBy: options.createdBy } : {}),
            ...(options.costBudgetUsd !== undefined ? { costBudgetUsd: options.costBudgetUsd } : {}),
            ...(options.approvalTimeoutMs !== undefined ? { approvalTimeoutMs: options.approvalTimeoutMs } : {}),
            fork,
          },
        ],
        typedSearchAttributes: [
          { key: AgentIdSearchAttribute, value: task.agent_id },
          { key: TaskIdSearchAttribute, value: taskId },
          { key: TaskStateSearchAttribute, value: 'pending' },
          { key: ForkOfSearchAttribute, value: sourceTaskId },
          { key: OrgIdSearchAttribute, value: task.org },
        ],
        memo: { forkOf: sourceTaskId, atStep: options.at },
        staticSummary: `fork of ${sourceTaskId} at step ${options.at}`,
      });
    } catch (error) {
      if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
      throw new ForkError(`the fork task ${taskId} is already running: choose another id`);
    }
    return {
      taskId,
      workflowId: taskWorkflowId(taskId),
      sourceTaskId,
      atStep: options.at,
      steps: plan.steps,
      copiedToolCalls: plan.copiedToolCalls,
      workspaceDir: plan.workspaceDir,
      workspaceNote: plan.workspaceNote,
      incompleteCalls: plan.incomplete,
    };
  }

  /** What the fork replayed, executed and refused, call by call, and what it was made from. */
  async forkReport(forkTaskId: string): Promise<ForkReport> {
    const fork = await this.db
      .selectFrom('task_forks')
      .selectAll()
      .where('task_id', '=', forkTaskId)
      .executeTakeFirst();
    if (!fork) throw new ForkError(`task ${JSON.stringify(forkTaskId)} is not a fork`);
    const rows = await this.db
      .selectFrom('fork_tool_calls')
      .selectAll()
      .where('fork_task_id', '=', forkTaskId)
      .orderBy('position')
      .orderBy('created_at')
      .execute();
    const calls = rows.map((r) => ({
      position: r.position,
      tool: r.tool,
      outcome: r.outcome,
      toolCallId: r.tool_call_id,
      sourceToolCallId: r.source_tool_call_id,
      note: r.note,
    }));
    const counts = { replayed: 0, executed: 0, refused: 0 };
    for (const c of calls) counts[c.outcome] += 1;
    return {
      taskId: forkTaskId,
      sourceTaskId: fork.source_task_id,
      atStep: fork.at_step,
      workspaceDir: fork.workspace_dir,
      workspaceNote: fork.workspace_note,
      copiedToolCalls: fork.copied_tool_calls,
      incompleteCalls: fork.incomplete_calls,
      calls,
      counts,
    };
  }

  /** Validates the candidates and the selection, then starts the eval workflow; returns its id. */
  async startEval(options: StartEvalOptions): Promise<{ evalId: string; workflowId: string }> {
    const candidates = [...(options.candidates ?? [])];
    for (const file of options.candidateFiles ?? []) {
      const text = await readUserTextFile(file).catch((error: unknown) => {
        throw new EvalError(`cannot read the candidate file ${file}: ${(error as Error).message}`);
      });
      if (text === undefined) throw new EvalError(`the candidate file ${file} does not exist`);
      try {
        candidates.push(parseEvalCandidate(text, file));
      } catch (error) {
        throw new EvalError((error as Error).message);
      }
    }
    if (candidates.length === 0)
      throw new EvalError('an eval needs at least one candidate configuration (--candidate <file.json>)');
    const names = candidates.map((c) => c.name);
    const twice = names.find((n, i) => names.indexOf(n) !== i);
    if (twice)
      throw new EvalError(
        `two candidates are named ${JSON.stringify(twice)}: names label the table, so they must differ`,
      );
    if (options.budgetUsd !== undefined && !(options.budgetUsd > 0))
      throw new EvalError("the eval's budget must be a positive number of US dollars");
    await this.checkSelection(options.selection);
    let judge: EvalJudge | undefined;
    if (options.judgeRubricFile || options.judge?.rubric) {
      const rubric =
        options.judge?.rubric ??
        (await readUserTextFile(options.judgeRubricFile!).catch((error: unknown) => {
          throw new EvalError(`cannot read the rubric file ${options.judgeRubricFile}: ${(error as Error).message}`);
        }));
      if (rubric === undefined) throw new EvalError(`the rubric file ${options.judgeRubricFile} does not exist`);
      if (!rubric.trim()) throw new EvalError('the rubric is empty: the judge needs criteria to grade by');
      judge = {
        rubric,
        ...(options.judge?.provider ? { provider: options.judge.provider } : {}),
        ...(options.judge?.model ? { model: options.judge.model } : {}),
      };
    }
    const evalId = options.evalId ?? `ev${randomUUID().slice(0, 8)}`;
    // The eval id prefixes its forks' task ids (and so their workspace folders).
    if (!EVAL_ID_PATTERN.test(evalId))
      throw new EvalError(
        `invalid eval id ${JSON.stringify(evalId)}: 1-80 letters, digits or . _ -, starting with a letter or digit`,
      );
    const input: EvalWorkflowInput = {
      evalId,
      selection: options.selection,
      candidates,
      ...(options.budgetUsd !== undefined ? { budgetUsd: options.budgetUsd } : {}),
      ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
      ...(judge ? { judge } : {}),
    };
    const workflowId = evalWorkflowId(evalId);
    await this.temporal.workflow.start<typeof evalWorkflow>('evalWorkflow', {
      taskQueue: this.taskQueue,
      workflowId,
      args: [input],
      staticSummary: `eval ${evalId}: ${names.join(' vs ')}`,
    });
    return { evalId, workflowId };
  }

  /** Waits for the eval to end and returns its table. */
  async evalResult(evalId: string): Promise<EvalWorkflowResult> {
    return this.temporal.workflow.getHandle<typeof evalWorkflow>(evalWorkflowId(evalId)).result();
  }

  /** The eval as stored (also while it runs): its rows and the totals so far. */
  async evalTable(evalId: string): Promise<{
    evalId: string;
    state: string;
    budgetUsd: number | null;
    spentUsd: number;
    rows: EvalRow[];
    totals: CandidateTotals[];
    table: string;
  }> {
    const row = await this.db.selectFrom('evals').selectAll().where('id', '=', evalId).executeTakeFirst();
    if (!row) throw new EvalError(`unknown eval ${JSON.stringify(evalId)}`);
    const { rows } = await evalReport(this.db, evalId);
    const candidates = (row.candidates as EvalCandidate[]).map((c) => c.name);
    const totals = (row.totals as CandidateTotals[] | null) ?? totalsPerCandidate(rows, candidates);
    return {
      evalId,
      state: row.state,
      budgetUsd: row.budget_usd === null ? null : Number(row.budget_usd),
      spentUsd: Number(row.spent_usd),
      rows,
      totals,
      table: formatEvalTable(rows, totals),
    };
  }

  async listEvals(
    limit = 50,
  ): Promise<Array<{ evalId: string; state: string; createdAt: Date; spentUsd: number; candidates: string[] }>> {
    const rows = await this.db.selectFrom('evals').selectAll().orderBy('created_at', 'desc').limit(limit).execute();
    return rows.map((r) => ({
      evalId: r.id,
      state: r.state,
      createdAt: r.created_at,
      spentUsd: Number(r.spent_usd),
      candidates: (r.candidates as EvalCandidate[]).map((c) => c.name),
    }));
  }

  /** The selection must name recorded tasks, or its query must match some: refused before the eval starts. */
  private async checkSelection(selection: EvalSelection): Promise<void> {
    if (selection.taskIds?.length) {
      const found = await this.db
        .selectFrom('tasks')
        .select(['id', 'fork_of'])
        .where('id', 'in', selection.taskIds)
        .execute();
      const missing = selection.taskIds.filter((id) => !found.some((f) => f.id === id));
      if (missing.length)
        throw new EvalError(
          `unknown task(s) ${missing.map((m) => JSON.stringify(m)).join(', ')}: an eval replays recorded tasks`,
        );
      if (found.every((f) => f.fork_of !== null))
        throw new EvalError('the selection names only forks: an eval replays recorded originals');
      return;
    }
    if (!selection.query?.trim())
      throw new EvalError('select recorded tasks by id (--task) or by a Temporal list query (--query)');
    let matched = false;
    try {
      for await (const wf of this.temporal.workflow.list({
        query: `WorkflowType = 'taskWorkflow' AND (${selection.query})`,
      })) {
        const taskId = wf.workflowId.startsWith('task-') ? wf.workflowId.slice('task-'.length) : wf.workflowId;
        const row = await this.db.selectFrom('tasks').select('fork_of').where('id', '=', taskId).executeTakeFirst();
        if (row && row.fork_of === null) {
          matched = true;
          break;
        }
      }
    } catch (error) {
      throw new EvalError(
        `the list query ${JSON.stringify(selection.query)} was refused by Temporal: ${(error as Error).message}`,
      );
    }
    if (!matched)
      throw new EvalError(
        `the selection ${JSON.stringify(selection.query)} matches no recorded task (forks are left out)`,
      );
  }
}
