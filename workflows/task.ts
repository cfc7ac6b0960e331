import {
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  isCancellation,
  log,
  ParentClosePolicy,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
  type ChildWorkflowHandle,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import {
  addUsage,
  AgentIdSearchAttribute,
  approvalDecisionSignal,
  commentSignal,
  decideApprovalUpdate,
  pauseSignal,
  resumeSignal,
  reviewDecisionSignal,
  roundProgressSignal,
  roundSessionId,
  roundWorkflowId,
  statusQuery,
  TaskIdSearchAttribute,
  TaskStateSearchAttribute,
  ZERO_USAGE_TOTALS,
  type ApprovalDecision,
  type PendingApproval,
  type ReviewDecision,
  type RoundOutcome,
  type TaskComment,
  type TaskPhase,
  type TaskStatus,
  type TaskWorkflowInput,
  type TaskWorkflowResult,
  type UsageTotals,
} from './contract';
import {
  DEFAULT_APPROVAL_TIMEOUT_MS,
  TASK_MAX_NO_SUBMIT_RETRIES,
  TASK_MAX_TRANSIENT_ROUND_RETRIES,
  transientRetryDelayMs,
} from './rules/harness';
import { isTerminal, transition, type TaskState } from './rules/task-state';
import { taskRoundWorkflow } from './task-round';

const store = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 20 },
});

/**
 * A task's lifecycle (seed D1 §3.1): pending → in_progress → review → completed, with blocked (pause),
 * failed, cancelled. Each execution round runs as the child workflow `task-{taskId}-r{round}`; the
 * `reviewDecision` signal accepts the work or opens a revision round with a fresh session. Human
 * decisions arrive as signals/updates on this workflow and are forwarded to the running round.
 * Cancelling this workflow cancels the round (stopping an in-flight LLM stream or shell command) and
 * leaves the task `cancelled`.
 */
export async function taskWorkflow(input: TaskWorkflowInput): Promise<TaskWorkflowResult> {
  const { taskId, agentId } = input;
  const carry = input.carry;
  const approvalTimeoutMs = input.approvalTimeoutMs ?? DEFAULT_APPROVAL_TIMEOUT_MS;
  let state: TaskState = carry?.state ?? 'pending';
  let round = carry?.round ?? 0;
  let attempt = carry?.attempt ?? 1;
  let usage: UsageTotals = carry?.usage ?? ZERO_USAGE_TOTALS;
  let noSubmitRetries = carry?.noSubmitRetries ?? 0;
  let revisionFeedback = carry?.revisionFeedback;
  let submission = carry?.submission;
  let lastError: string | undefined;
  let phase: TaskPhase = 'starting';
  let iteration = 0;
  let roundUsage: UsageTotals = ZERO_USAGE_TOTALS;
  let pendingApprovals: PendingApproval[] = [];
  const decided = new Set<string>();
  const reviews: ReviewDecision[] = [...(carry?.pendingReview ?? [])];
  const queuedComments: TaskComment[] = [...(carry?.comments ?? [])];
  let child: ChildWorkflowHandle<typeof taskRoundWorkflow> | undefined;
  let roundScope: CancellationScope | undefined;
  let pauseRequested = false;
  let resumeRequested = false;

  setHandler(statusQuery, (): TaskStatus => ({
    taskId,
    agentId,
    state,
    round,
    iteration,
    phase,
    pendingApprovals,
    usage: addUsage(usage, roundUsage),
    ...(lastError ? { lastError } : {}),
    ...(submission ? { submission } : {}),
  }));
  setHandler(roundProgressSignal, (p) => {
    if (p.round !== round) return;
    iteration = p.iteration;
    phase = p.phase;
    roundUsage = p.usage;
    pendingApprovals = p.pendingApprovals.filter((a) => !decided.has(a.requestId));
  });
  const forward = async (decision: ApprovalDecision): Promise<void> => {
    decided.add(decision.requestId);
    pendingApprovals = pendingApprovals.filter((a) => a.requestId !== decision.requestId);
    if (child) await child.signal(approvalDecisionSignal, decision);
  };
  setHandler(approvalDecisionSignal, forward);
  setHandler(
    decideApprovalUpdate,
    async (decision) => {
      const request = pendingApprovals.find((a) => a.requestId === decision.requestId)!;
      await forward(decision);
      return { ...decision, tool: request.tool, decidedAt: new Date().toISOString() };
    },
    {
      validator: (decision) => {
        if (decided.has(decision.requestId)) throw new Error(`approval request ${decision.requestId} was already decided`);
        if (!pendingApprovals.some((a) => a.requestId === decision.requestId)) {
          throw new Error(`no pending approval request ${decision.requestId}; pending: ${pendingApprovals.map((a) => a.requestId).join(', ') || 'none'}`);
        }
        if (decision.decision !== 'approved' && decision.decision !== 'rejected') throw new Error(`decision must be 'approved' or 'rejected'`);
      },
    },
  );
  setHandler(reviewDecisionSignal, (d) => void reviews.push(d));
  setHandler(commentSignal, async (c) => {
    if (child && state === 'in_progress') await child.signal(commentSignal, c);
    else queuedComments.push(c);
  });
  setHandler(pauseSignal, () => {
    if (state !== 'in_progress') return;
    pauseRequested = true;
    roundScope?.cancel();
  });
  setHandler(resumeSignal, () => void (resumeRequested = true));

  const moveTo = async (to: TaskState, error?: string): Promise<void> => {
    state = transition(state, to);
    lastError = error;
    upsertSearchAttributes([{ key: TaskStateSearchAttribute, value: state }]);
    setCurrentDetails(`task ${taskId} · ${state} · round ${round}`);
    await store.recordTaskState({ taskId, state, round, lastError: error, eventKey: `state:${round}:${attempt}:${state}` });
  };

  upsertSearchAttributes([
    { key: AgentIdSearchAttribute, value: agentId },
    { key: TaskIdSearchAttribute, value: taskId },
    { key: TaskStateSearchAttribute, value: state },
  ]);

  try {
    const context = await store.loadTaskContext({ taskId });
    if (state === 'pending') {
      round = 1;
      await moveTo('in_progress');
    }
    while (!isTerminal(state)) {
      if (state === 'in_progress') {
        const outcome = await runRound(context.modelLabel);
        if (outcome === 'paused') {
          pauseRequested = false;
          phase = 'paused';
          await moveTo('blocked');
          await condition(() => resumeRequested);
          resumeRequested = false;
          attempt += 1;
          await moveTo('in_progress');
          continue;
        }
        if (outcome.kind === 'failed') {
          await moveTo('failed', outcome.error);
          break;
        }
        usage = addUsage(usage, outcome.usage);
        roundUsage = ZERO_USAGE_TOTALS;
        if (outcome.kind === 'submitted') {
          submission = outcome.summary;
          phase = 'awaiting-review';
          await moveTo('review');
          continue;
        }
        noSubmitRetries += 1;
        if (noSubmitRetries > TASK_MAX_NO_SUBMIT_RETRIES) {
          await moveTo('failed', `the agent stopped ${noSubmitRetries} times without calling task_submit_review`);
          break;
        }
        log.info('round ended without a submission; retrying in the same session', { round, attempt, noSubmitRetries });
        attempt += 1;
        continue;
      }
      if (state === 'review') {
        if (workflowInfo().continueAsNewSuggested) {
          await continueAsNew<typeof taskWorkflow>({
            ...input,
            carry: { state, round, attempt, usage, noSubmitRetries, revisionFeedback, submission, pendingReview: reviews, comments: queuedComments },
          });
        }
        await condition(() => reviews.length > 0);
        const review = reviews.shift()!;
        if (review.decision === 'accept') {
          phase = 'finished';
          await moveTo('completed');
          break;
        }
        round += 1;
        attempt = 1;
        noSubmitRetries = 0;
        revisionFeedback = review.feedback ?? 'The reviewer asked for a revision without further comment.';
        submission = undefined;
        await moveTo('in_progress');
      }
    }
  } catch (error) {
    if (isCancellation(error)) {
      await CancellationScope.nonCancellable(async () => {
        phase = 'finished';
        if (!isTerminal(state)) await moveTo('cancelled');
      });
    }
    throw error;
  }
  return { taskId, state, rounds: round, usage, ...(submission ? { submission } : {}), ...(lastError ? { error: lastError } : {}) };

  /** Runs one attempt of the current round; transient failures retry the round up to the seed's limit. */
  async function runRound(modelLabel: string): Promise<RoundOutcome | 'paused' | { kind: 'failed'; error: string }> {
    for (let transient = 0; ; transient++) {
      roundScope = new CancellationScope();
      try {
        return await roundScope.run(async () => {
          child = await startChild(taskRoundWorkflow, {
            workflowId: roundWorkflowId(taskId, round),
            args: [
              {
                taskId,
                agentId,
                round,
                attempt,
                sessionId: roundSessionId(taskId, round),
                modelLabel,
                approvalTimeoutMs,
                parentWorkflowId: workflowInfo().workflowId,
                revisionFeedback,
                carry: undefined,
              },
            ],
            parentClosePolicy: ParentClosePolicy.TERMINATE,
            typedSearchAttributes: [
              { key: AgentIdSearchAttribute, value: agentId },
              { key: TaskIdSearchAttribute, value: taskId },
            ],
            staticSummary: `round ${round} · attempt ${attempt}`,
          });
          for (const c of queuedComments.splice(0)) await child.signal(commentSignal, c);
          return await child.result();
        });
      } catch (error) {
        if (pauseRequested && isCancellation(error)) return 'paused';
        if (isCancellation(error)) throw error;
        const message = failureMessage(error);
        if (isNonRetryable(error) || transient >= TASK_MAX_TRANSIENT_ROUND_RETRIES) {
          return { kind: 'failed', error: message };
        }
        lastError = message;
        log.warn('round failed; retrying after a delay in the same session', { round, attempt, error: message });
        attempt += 1;
        await sleep(transientRetryDelayMs(transient + 1));
      } finally {
        child = undefined;
        roundScope = undefined;
      }
    }
  }
}

/** The failure chain, outermost first (ChildWorkflowFailure → ActivityFailure → ApplicationFailure → …). */
function failureChain(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let current = error; current !== undefined && current !== null && chain.length < 10; current = (current as { cause?: unknown }).cause) {
    chain.push(current);
    if (!(current instanceof Error)) break;
  }
  return chain;
}

/** Non-retryable when any application failure in the chain says so (e.g. a provider 401). */
function isNonRetryable(error: unknown): boolean {
  return failureChain(error).some((e) => e instanceof ApplicationFailure && e.nonRetryable === true);
}

/** The message of the first application failure in the chain: ours, written for people. */
function failureMessage(error: unknown): string {
  const chain = failureChain(error);
  const application = chain.find((e): e is ApplicationFailure => e instanceof ApplicationFailure);
  if (application) return application.message;
  const last = chain.at(-1);
  return last instanceof Error ? last.message : String(last);
}
