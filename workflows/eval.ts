/**
 * An eval (issue 25): every selected recorded task forked at step 0 under every candidate
 * configuration, as child task workflows, at most `concurrency` at once, under one cost budget for the
 * whole eval. The budget follows the task tree governor's rule: each fork starts with a share of what
 * is left (`childBudgetShare`, one share kept back), no fork starts once what is left cannot pay for the
 * dearest call a fork has made so far, and a fork whose share is spent is stopped where its round holds
 * (the call that crossed its share is the most it can overshoot by). Each fork is graded from the records once it settles, then
 * cancelled (nobody reviews a fork). The table is stored and returned.
 *
 * Deterministic: the fork ids derive from the eval id and the positions, so a replay after a worker's
 * death finds the same forks and rows; every activity is idempotent.
 */
import {
  ApplicationFailure,
  CancellationScope,
  ParentClosePolicy,
  proxyActivities,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import { EVAL_GRADE, EVAL_SETTLE, EVAL_STORE } from './activity-options';
import { AgentIdSearchAttribute, ForkOfSearchAttribute, TaskIdSearchAttribute, taskWorkflowId } from './contract';
import {
  candidateForkInput,
  EVAL_APPROVAL_TIMEOUT_MS,
  EVAL_DEFAULT_CONCURRENCY,
  EVAL_MAX_CONCURRENCY,
  evalForkTaskId,
  type EvalWorkflowInput,
  type EvalWorkflowResult,
} from './eval-contract';
import { budgetReached, childBudgetShare } from './rules/subagents';
import { taskWorkflow } from './task';
import { FailureType } from './failure-types';
import { inheritedOrgAttribute } from './org-attribute';

const store = proxyActivities<Activities>(EVAL_STORE);
const settle = proxyActivities<Activities>(EVAL_SETTLE);
const grade = proxyActivities<Activities>(EVAL_GRADE);

export async function evalWorkflow(input: EvalWorkflowInput): Promise<EvalWorkflowResult> {
  const { evalId, candidates } = input;
  if (typeof evalId !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$/.test(evalId)) {
    throw ApplicationFailure.create({
      type: FailureType.InvalidEval,
      message: `evalWorkflow input: evalId must be 1-80 letters, digits or . _ -, starting with a letter or digit`,
      nonRetryable: true,
    });
  }
  const { taskIds } = await store.startEval({
    evalId,
    workflowId: workflowInfo().workflowId,
    selection: input.selection,
    candidates,
    budgetUsd: input.budgetUsd,
  });
  const concurrency = Math.min(
    EVAL_MAX_CONCURRENCY,
    Math.max(1, Math.floor(input.concurrency ?? EVAL_DEFAULT_CONCURRENCY)),
  );
  const limit = input.budgetUsd ?? null;
  const queue = taskIds.flatMap((sourceTaskId, t) =>
    candidates.map((candidate, c) => ({ sourceTaskId, candidate, forkTaskId: evalForkTaskId(evalId, t, c) })),
  );
  /** What finished forks (and their judge) spent, plus the shares running forks hold. */
  let spent = 0;
  let reserved = 0;
  /** The dearest single LLM call a fork of this eval made: a fork may overshoot its share by one call, so no fork starts without room for one. */
  let maxCallUsd = 0;
  const running = new Set<Promise<void>>();

  const runOne = async (item: (typeof queue)[number], share: number | null): Promise<void> => {
    const ref = { evalId, sourceTaskId: item.sourceTaskId, forkTaskId: item.forkTaskId };
    const { agentId, title } = await store.prepareEvalFork({ ...ref, candidate: item.candidate });
    const scope = new CancellationScope();
    const child = await scope.run(() =>
      startChild(taskWorkflow, {
        workflowId: taskWorkflowId(item.forkTaskId),
        args: [
          {
            taskId: item.forkTaskId,
            agentId,
            title,
            createdBy: `eval ${evalId}`,
            approvalTimeoutMs: EVAL_APPROVAL_TIMEOUT_MS,
            ...(share !== null ? { costBudgetUsd: share } : {}),
            fork: candidateForkInput(item.sourceTaskId, item.candidate),
          },
        ],
        parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
        typedSearchAttributes: [
          { key: AgentIdSearchAttribute, value: agentId },
          { key: TaskIdSearchAttribute, value: item.forkTaskId },
          { key: ForkOfSearchAttribute, value: item.sourceTaskId },
          ...inheritedOrgAttribute(),
        ],
        memo: { forkOf: item.sourceTaskId, eval: evalId, candidate: item.candidate.name },
        staticSummary: `eval ${evalId} · ${item.candidate.name} · fork of ${item.sourceTaskId}`,
      }),
    );
    const ended = scope
      .run(() => child.result())
      .then(
        () => undefined,
        () => undefined,
      );
    const settled = await settle.awaitForkSettled({
      forkTaskId: item.forkTaskId,
      ...(share !== null ? { budgetUsd: share } : {}),
    });
    const graded = await grade.gradeEvalRun({
      ...ref,
      candidate: item.candidate.name,
      settled: settled.settled,
      ...(input.judge ? { judge: input.judge } : {}),
    });
    // Graded: the fork has nothing left to do (it waits for a review nobody gives, or for a budget decision).
    scope.cancel();
    await ended;
    reserved -= share ?? 0;
    spent += graded.costUsd;
    maxCallUsd = Math.max(maxCallUsd, graded.maxCallUsd);
  };

  while (queue.length > 0 || running.size > 0) {
    while (running.size < concurrency && queue.length > 0) {
      const item = queue.shift()!;
      if (
        budgetReached(limit, spent + reserved) ||
        (limit !== null && maxCallUsd > 0 && limit - spent - reserved < maxCallUsd)
      ) {
        await store.skipEvalRun({
          evalId,
          sourceTaskId: item.sourceTaskId,
          forkTaskId: item.forkTaskId,
          candidate: item.candidate.name,
          reason: `the eval's $${limit} budget had no room left for this fork (spent $${spent.toFixed(6)}, held by running forks $${reserved.toFixed(6)}, dearest call $${maxCallUsd.toFixed(6)})`,
        });
        continue;
      }
      // The governor's share: what is left, split over the forks that may still run at once.
      const share =
        limit === null
          ? null
          : childBudgetShare(limit, spent + reserved, Math.min(concurrency - running.size, queue.length + 1));
      reserved += share ?? 0;
      const p: Promise<void> = runOne(item, share).finally(() => running.delete(p));
      running.add(p);
    }
    if (running.size > 0) await Promise.race(running);
  }
  return store.finishEval({ evalId, candidates: candidates.map((c) => c.name) }).then((r) => ({ evalId, ...r }));
}
