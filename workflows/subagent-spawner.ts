import {
  ApplicationFailure,
  CancellationScope,
  condition,
  isCancellation,
  log,
  ParentClosePolicy,
  patched,
  setHandler,
  startChild,
  type ChildWorkflowHandle,
} from '@temporalio/workflow';
import type { ExecuteToolResult } from '../activities/tools/execute';
import {
  addUsage,
  AgentIdSearchAttribute,
  TaskIdSearchAttribute,
  taskWorkflowId,
  ZERO_USAGE_TOTALS,
  type UsageTotals,
} from './contract';
import { failureChain, failureMessage } from './rules/failures';
import {
  budgetReached,
  childBudgetShare,
  SUBAGENT_TASK_PREVIEW_CHARS,
  subagentBriefs,
  subagentIterationCap,
  treeSpentUsd,
  type BudgetNode,
  type SubagentReport,
} from './rules/subagents';
import {
  BUDGET_STOPPED_TYPE,
  budgetDecisionSignal,
  budgetHoldSignal,
  budgetQuery,
  SUBAGENT_FAILED_TYPE,
  subagentSessionId,
  subagentSpendSignal,
  subagentWorkflowId,
  type BudgetDecision,
  type BudgetReport,
  type SubagentCarry,
} from './subagent-contract';
import { subagentWorkflow } from './subagent';
import { SUBAGENTS_SETTLE_BEFORE_CANCEL_PATCH } from './patches';
import { formatSubagentReports } from '../prompts/conversation';
import { inheritedOrgAttribute } from './org-attribute';

export interface SpawnOutcome {
  content: string;
  isError: boolean;
  /** What the sub-agents spent, to add to the round's usage. */
  usage: UsageTotals;
  /** A human stopped the tree: record the result, then end the round with `stoppedFailure()`. */
  stopped: boolean;
}

/**
 * The round's side of sub-agents and of the cost governor down the tree. `run` starts one child
 * workflow per brief (in parallel, ids `{round workflow id}-sub-{n}`), waits for all, and returns the
 * aggregated result for the tool call; the round records it through the ledger. The governor: the tree
 * (this round's own LLM calls plus every sub-agent's) may spend `limitUsd`; each child gets an equal
 * share of what remains, one share kept for the parent to read the results; at the limit (or when a
 * child reaches its share) the whole tree holds until a human's `budgetDecision`: `raise` releases every
 * node with new shares, `stop` cancels the children and ends the round with BUDGET_STOPPED_TYPE.
 * Without a limit the handlers only account spend; no command changes.
 */
export function createSubagentSpawner(options: {
  /** The round's workflow id, from its input (replays under another id must start the same children). */
  workflowId: string;
  agentId: string;
  taskId: string;
  limitUsd: number | null;
  /** What the task's earlier rounds and attempts spent (shown as the node `task-{taskId}`). */
  spentBeforeUsd: number;
  carry?: SubagentCarry;
  /** Tells the task workflow (and the status query) that the tree holds or runs again. */
  onHeldChange: (held: boolean) => Promise<void>;
  /**
   * SUBAGENTS_SETTLE_BEFORE_CANCEL_PATCH as the round asked it at its start ('Up-front patches' in
   * patches.ts); when undefined it is asked at the spawn, as runs before 0.8.0 did.
   */
  settleBeforeCancel?: boolean;
}) {
  const self = options.workflowId;
  let started = options.carry?.started ?? 0;
  let limitUsd = options.carry?.limitUsd ?? options.limitUsd;
  let ownSpentUsd = options.carry?.ownSpentUsd ?? 0;
  const nodes = new Map<string, BudgetNode>((options.carry?.nodes ?? []).map((n) => [n.workflowId, n]));
  const running = new Map<string, ChildWorkflowHandle<typeof subagentWorkflow>>();
  let held = false;
  let stopped = false;
  let stopScope: CancellationScope | undefined;

  const earlier: BudgetNode[] =
    options.spentBeforeUsd > 0
      ? [
          {
            workflowId: taskWorkflowId(options.taskId),
            spentUsd: options.spentBeforeUsd,
            limitUsd: null,
            state: 'completed',
          },
        ]
      : [];
  const total = (): number => options.spentBeforeUsd + ownSpentUsd + treeSpentUsd([...nodes.values()]);
  const report = (): BudgetReport => ({
    limitUsd,
    spentUsd: total(),
    held,
    nodes: [
      ...earlier,
      { workflowId: self, spentUsd: ownSpentUsd, limitUsd, state: held ? 'held' : 'running' },
      ...nodes.values(),
    ],
  });

  const signalChildren = async (limitFor: (id: string) => number | undefined, hold: boolean): Promise<void> => {
    await Promise.all(
      [...running].map(async ([id, handle]) => {
        const limit = limitFor(id);
        try {
          await handle.signal(budgetHoldSignal, { hold, ...(limit !== undefined ? { limitUsd: limit } : {}) });
        } catch (error) {
          log.warn('could not signal a sub-agent', { workflowId: id, error: String(error) });
        }
      }),
    );
  };

  /** The tree reached its limit: every node holds before its next LLM call. */
  const hold = async (): Promise<void> => {
    if (held || stopped) return;
    held = true;
    log.info('tree budget reached: holding for a human decision', { limitUsd, spentUsd: total() });
    for (const id of running.keys()) nodes.get(id)!.state = 'held';
    await signalChildren(() => undefined, true);
    await options.onHeldChange(true);
  };

  setHandler(budgetQuery, report);
  setHandler(subagentSpendSignal, async (s) => {
    const node = nodes.get(s.workflowId);
    if (!node || node.state === 'completed' || node.state === 'failed') return;
    node.spentUsd = Math.max(node.spentUsd, s.spentUsd);
    if (s.reached || budgetReached(limitUsd, total())) await hold();
  });
  setHandler(budgetDecisionSignal, async (d: BudgetDecision) => {
    if (d?.decision === 'stop') {
      stopped = true;
      held = false;
      stopScope?.cancel();
      await options.onHeldChange(false);
      return;
    }
    if (d?.decision !== 'raise' || typeof d.newLimitUsd !== 'number' || !(d.newLimitUsd > total())) {
      log.warn(
        'budgetDecision ignored: decision must be "stop", or "raise" with newLimitUsd above what the tree spent',
        { decision: d, spentUsd: total() },
      );
      return;
    }
    limitUsd = d.newLimitUsd;
    const share = childBudgetShare(limitUsd, total(), running.size);
    held = false;
    for (const id of running.keys()) {
      const node = nodes.get(id)!;
      node.state = 'running';
      node.limitUsd = share === null ? null : node.spentUsd + share;
    }
    await signalChildren((id) => nodes.get(id)?.limitUsd ?? undefined, false);
    await options.onHeldChange(false);
  });

  return {
    /** The round's own LLM call is about to start: hold while the tree is at its limit. */
    async beforeLlmCall(): Promise<void> {
      if (limitUsd === null && !held && !stopped) return;
      if (budgetReached(limitUsd, total())) await hold();
      await condition(() => !held || stopped);
      if (stopped) throw this.stoppedFailure();
    },
    /** The round's own LLM call cost this much. */
    addOwnSpend(costUsd: number): void {
      ownSpentUsd += costUsd;
    },
    stoppedFailure(): ApplicationFailure {
      return ApplicationFailure.create({
        type: BUDGET_STOPPED_TYPE,
        message: `stopped by a budget decision: the task's tree spent $${total().toFixed(4)} of its $${(limitUsd ?? 0).toFixed(4)} budget`,
        nonRetryable: true,
      });
    },
    carry(): SubagentCarry {
      return { started, limitUsd, ownSpentUsd, nodes: [...nodes.values()] };
    },
    report,
    /** True while a spawn call's sub-agents run. */
    spawning(): boolean {
      return stopScope !== undefined;
    },
    /** True once the round has a limit or sub-agents: its progress reports then carry the budget. */
    accounting(): boolean {
      return limitUsd !== null || started > 0;
    },

    /** Runs the sub-agents of one validated spawn call in parallel and aggregates their outcomes. */
    async run(call: Extract<ExecuteToolResult, { kind: 'run-in-workflow' }>): Promise<SpawnOutcome> {
      const briefs = subagentBriefs(call.tool, call.args);
      const maxToolIterations = subagentIterationCap(briefs.length);
      // Shares are fixed before any child starts: each gets the same slice of what remained.
      const share = childBudgetShare(limitUsd, total(), briefs.length);
      const roundScope = CancellationScope.current();
      stopScope = new CancellationScope();
      let usage = ZERO_USAGE_TOTALS;
      const reports = await stopScope.run(() =>
        settleAll(
          options.settleBeforeCancel,
          briefs.map(async (brief): Promise<SubagentReport> => {
            started += 1;
            const n = started;
            const workflowId = subagentWorkflowId(self, n);
            const node: BudgetNode = { workflowId, spentUsd: 0, limitUsd: share, state: held ? 'held' : 'running' };
            nodes.set(workflowId, node);
            try {
              const handle = await startChild(subagentWorkflow, {
                workflowId,
                args: [
                  {
                    agentId: options.agentId,
                    taskId: options.taskId,
                    parentWorkflowId: self,
                    n,
                    sessionId: subagentSessionId(self, n),
                    task: brief.task,
                    ...(brief.context ? { context: brief.context } : {}),
                    maxToolIterations,
                    ...(share !== null ? { budgetUsd: share } : {}),
                  },
                ],
                parentClosePolicy: ParentClosePolicy.TERMINATE,
                typedSearchAttributes: [
                  { key: AgentIdSearchAttribute, value: options.agentId },
                  { key: TaskIdSearchAttribute, value: options.taskId },
                  ...inheritedOrgAttribute(),
                ],
                staticSummary: `sub-agent ${n}: ${brief.task.slice(0, 100)}`,
              });
              running.set(workflowId, handle);
              if (held) await handle.signal(budgetHoldSignal, { hold: true });
              const result = await handle.result();
              usage = addUsage(usage, result.usage);
              Object.assign(node, { spentUsd: result.usage.costUsd, state: 'completed' });
              return {
                workflowId,
                task: brief.task,
                status: 'completed',
                result: result.result,
                iterations: result.iterations,
                capped: result.capped,
                costUsd: result.usage.costUsd,
              };
            } catch (error) {
              if (isCancellation(error) && roundScope.consideredCancelled) throw error;
              const spent = failedSpend(error) ?? node.spentUsd;
              usage = addUsage(usage, { costUsd: spent });
              const stoppedHere = stopped && isCancellation(error);
              Object.assign(node, { spentUsd: spent, state: stoppedHere ? 'stopped' : 'failed' });
              const message = stoppedHere ? 'stopped by a budget decision before it finished' : failureMessage(error);
              return {
                workflowId,
                task: brief.task.slice(0, SUBAGENT_TASK_PREVIEW_CHARS),
                status: stoppedHere ? 'stopped' : 'failed',
                error: message,
                costUsd: spent,
              };
            } finally {
              running.delete(workflowId);
            }
          }),
        ),
      );
      stopScope = undefined;
      const failed = reports.filter((r) => r.status !== 'completed').length;
      return { content: formatSubagentReports(reports), isError: failed === reports.length, usage, stopped };
    },
  };
}

export type SubagentSpawner = ReturnType<typeof createSubagentSpawner>;

/**
 * Waits for every child before a cancellation ends the round: with Promise.all the first cancelled
 * child ended the round at once and the others, still cancelling, were terminated by the parent-close
 * policy instead (their final state TERMINATED, their cleanup cut short). Histories recorded before
 * the patch keep Promise.all's order of commands.
 */
async function settleAll<T>(askedUpFront: boolean | undefined, work: Array<Promise<T>>): Promise<T[]> {
  if (!(askedUpFront ?? patched(SUBAGENTS_SETTLE_BEFORE_CANCEL_PATCH))) return Promise.all(work);
  const settled = await Promise.allSettled(work);
  const rejected = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (rejected) throw rejected.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
}

/** What a failed sub-agent reported it spent (the details of its SUBAGENT_FAILED_TYPE failure). */
function failedSpend(error: unknown): number | undefined {
  const failure = failureChain(error).find(
    (e): e is ApplicationFailure => e instanceof ApplicationFailure && e.type === SUBAGENT_FAILED_TYPE,
  );
  const details = failure?.details?.[0] as { usage?: UsageTotals } | undefined;
  return details?.usage?.costUsd;
}
