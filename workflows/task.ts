import {
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  isCancellation,
  log,
  ParentClosePolicy,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  startChild,
  TemporalFailure,
  upsertSearchAttributes,
  workflowInfo,
  type ChildWorkflowHandle,
} from '@temporalio/workflow';
import { TASK_STORE } from './activity-options';
import type { Activities } from '../activities';
import {
  addUsage,
  AgentIdSearchAttribute,
  commentSignal,
  pauseSignal,
  resumeSignal,
  roundProgressSignal,
  roundSessionId,
  roundWorkflowId,
  statusQuery,
  TaskFailureType,
  TaskIdSearchAttribute,
  taskIdFromWorkflowId,
  TaskStateSearchAttribute,
  taskWorkflowId,
  ZERO_USAGE_TOTALS,
  type PendingApproval,
  type ReviewDecision,
  type RoundOutcome,
  type TaskComment,
  type TaskPhase,
  type TaskStatus,
  type TaskCarry,
  type TaskWorkflowInput,
  type TaskWorkflowResult,
  type UsageTotals,
} from './contract';
import {
  DEFAULT_APPROVAL_TIMEOUT_MS,
  shouldContinueAsNew,
  TASK_MAX_HISTORY_EVENTS_PER_RUN,
  TASK_MAX_NO_SUBMIT_RETRIES,
  TASK_MAX_TRANSIENT_ROUND_RETRIES,
  transientRetryDelayMs,
} from './rules/harness';
import { failureMessage, isNonRetryable } from './rules/failures';
import { taskInputProblem } from './rules/task-input';
import { isTerminal, transition, type TaskState } from './rules/task-state';
import { startPostTaskReflection } from './reflection';
import { OPEN_TASK_PATCH, openTask, passStartGates, recordTask, START_GATES_PATCH, type GateHost } from './task-gates';
import { taskRoundWorkflow } from './task-round';
import { installDecisionHandlers } from './task-decisions';
import { budgetQuery, type BudgetReport } from './subagent-contract';
import { settleBudgetReport, withTreeCost } from './rules/subagents';

const store = proxyActivities<Activities>(TASK_STORE);

type RoundResult = RoundOutcome | { kind: 'paused' } | { kind: 'failed'; error: string };

/**
 * A task's lifecycle: pending → in_progress → review → completed, with blocked (pause),
 * failed and cancelled; every move goes through the transition table of `rules/task-state.ts` and is
 * mirrored to PostgreSQL and the `TaskState` search attribute. Each execution round runs as the child
 * workflow `task-{taskId}-r{round}` with the session `task_{taskId}_r{round}`; the `reviewDecision`
 * signal accepts the work (→ completed, and the post-task reflection starts as an abandoned child) or
 * opens a revision round with a fresh session. A round that ends without a submission is retried in the
 * same session up to TASK_MAX_NO_SUBMIT_RETRIES times, then the task fails. Human decisions arrive as
 * signals/updates on this workflow and are forwarded to the running round.
 *
 * Cancelling this workflow cancels the round (stopping an in-flight LLM stream or shell command) and
 * records `cancelled` in a scope that cannot itself be cancelled. `pause` cancels the round the same
 * way but leaves the task `blocked`; `resume` runs the same round again in the same session.
 */
export async function taskWorkflow(input: TaskWorkflowInput): Promise<TaskWorkflowResult> {
  // A Schedule's runs carry no task id: each run is its own task, named after its workflow id.
  const taskId = input?.taskId ?? taskIdFromWorkflowId(workflowInfo().workflowId);
  const inputProblem = taskInputProblem(input, taskId);
  if (inputProblem) throw ApplicationFailure.create({ type: TaskFailureType.invalidInput, message: `taskWorkflow input: ${inputProblem}`, nonRetryable: true });
  const { agentId } = input;
  // A human's retry or rerun starts like a run carried over in `pending`, after the task's last round.
  const carry: TaskCarry | undefined =
    input.carry ?? (input.restart ? { state: 'pending', round: input.restart.afterRound, attempt: 1, usage: ZERO_USAGE_TOTALS, noSubmitRetries: 0 } : undefined);
  const approvalTimeoutMs = input.approvalTimeoutMs ?? DEFAULT_APPROVAL_TIMEOUT_MS;
  let state: TaskState = carry?.state ?? 'pending';
  let round = carry?.round ?? 0;
  let attempt = carry?.attempt ?? 1;
  let usage: UsageTotals = carry?.usage ?? ZERO_USAGE_TOTALS;
  let noSubmitRetries = carry?.noSubmitRetries ?? 0;
  let revisionFeedback = carry?.revisionFeedback;
  let submission = carry?.submission;
  let lastError: string | undefined;
  let phase: TaskPhase = state === 'review' ? 'awaiting-review' : 'starting';
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
  /** The round's tree budget as it last reported it (with a cost budget or sub-agents). */
  let budget: BudgetReport | undefined;
  /** True while `budget` comes from the round that is running now (it counts sub-agents as they spend). */
  let budgetLive = false;
  /** The running round's usage for the status: with a live tree report, its cost includes the sub-agents' spend so far. */
  const liveRoundUsage = (): UsageTotals => (budgetLive && state === 'in_progress' ? withTreeCost(roundUsage, budget, taskWorkflowId(taskId)) : roundUsage);
  /** The round ended: its report stops claiming running (or held) nodes. */
  const settleBudget = (outcome: 'completed' | 'failed' | 'stopped'): void => {
    budgetLive = false;
    if (budget) budget = settleBudgetReport(budget, outcome);
  };

  const showDetails = (): void => setCurrentDetails(`task ${taskId} · ${state} · round ${round} · iteration ${iteration} · ${phase}`);

  setHandler(statusQuery, (): TaskStatus => ({
    taskId,
    agentId,
    state,
    round,
    iteration,
    phase,
    pendingApprovals,
    usage: addUsage(usage, liveRoundUsage()),
    ...(state === 'in_progress' ? { roundUsage: liveRoundUsage() } : {}),
    ...(lastError ? { lastError } : {}),
    ...(submission ? { submission } : {}),
    ...(budget ? { budget } : {}),
  }));
  setHandler(budgetQuery, (): BudgetReport => budget ?? { limitUsd: input.costBudgetUsd ?? null, spentUsd: addUsage(usage, roundUsage).costUsd, held: false, nodes: [] });
  installDecisionHandlers({
    round: () => child,
    state: () => state,
    spentUsd: () => budget?.spentUsd ?? addUsage(usage, roundUsage).costUsd,
    pendingApprovals: () => pendingApprovals,
    setPendingApprovals: (list) => {
      pendingApprovals = list;
    },
    decided,
    reviews,
  });
  setHandler(roundProgressSignal, (p) => {
    if (p.round !== round || state !== 'in_progress') return;
    iteration = p.iteration;
    phase = p.phase;
    roundUsage = p.usage;
    if (p.budget) {
      budget = p.budget;
      budgetLive = true;
    }
    pendingApprovals = p.pendingApprovals.filter((a) => !decided.has(a.requestId));
    showDetails();
  });

  setHandler(commentSignal, async (comment) => {
    if (typeof comment?.text !== 'string' || !comment.text.trim()) return;
    await deliverComment(comment);
  });
  /** To the running round, else kept for the next attempt or round (a finished round returns what it did not use). */
  const deliverComment = async (comment: TaskComment): Promise<void> => {
    if (!child || state !== 'in_progress' || pauseRequested) {
      queuedComments.push(comment);
      return;
    }
    try {
      await child.signal(commentSignal, comment);
    } catch {
      queuedComments.push(comment); // the round just ended: the next one gets it
    }
  };
  setHandler(pauseSignal, () => {
    if (state !== 'in_progress') return;
    pauseRequested = true;
    resumeRequested = false;
    roundScope?.cancel();
  });
  setHandler(resumeSignal, () => {
    if (state === 'blocked' || pauseRequested) resumeRequested = true;
  });

  /** Returns the task's recorded usage when the move follows an interrupted attempt (→ blocked, failed). */
  const moveTo = async (to: TaskState, error?: string): Promise<UsageTotals | undefined> => {
    state = transition(state, to);
    lastError = error;
    upsertSearchAttributes([{ key: TaskStateSearchAttribute, value: state }]);
    showDetails();
    // Histories recorded before the activity returned usage replay `undefined` here.
    return (await store.recordTaskState({ taskId, state, round, lastError: error, eventKey: `state:${round}:${attempt}:${state}` })) ?? undefined;
  };

  const gateHost: GateHost = {
    taskId,
    state: () => state,
    moveTo,
    setPhase: (p) => {
      phase = p;
      showDetails();
    },
    resumeRequested: () => resumeRequested,
    clearResume: () => {
      resumeRequested = false;
    },
    setLastError: (message) => {
      lastError = message;
    },
  };

  upsertSearchAttributes([
    { key: AgentIdSearchAttribute, value: agentId },
    { key: TaskIdSearchAttribute, value: taskId },
    { key: TaskStateSearchAttribute, value: state },
  ]);
  showDetails();

  let taskRecorded = false;
  try {
    // A fresh task records itself, reads its gates and (with none) starts in one activity.
    const fresh = carry === undefined && state === 'pending' && patched(OPEN_TASK_PATCH);
    let context: Awaited<ReturnType<typeof recordTask>>;
    let gates: Awaited<ReturnType<typeof openTask>>['gates'];
    if (fresh) {
      const opened = await openTask(input, taskId, { round: round + 1, attempt });
      context = opened.context;
      gates = opened.gates;
      if (opened.started) {
        round += 1;
        state = transition(state, 'in_progress');
        upsertSearchAttributes([{ key: TaskStateSearchAttribute, value: state }]);
        showDetails();
      }
    } else {
      context = await recordTask(input, taskId, carry !== undefined);
    }
    taskRecorded = true;
    if (state === 'pending') {
      // Approval (agent-created tasks, where configured) and dependencies (blocked until they complete).
      const gate = fresh || patched(START_GATES_PATCH) ? await passStartGates(gateHost, gates) : 'start';
      if (gate === 'start') {
        // A retry or rerun starts a run with the earlier rounds carried: its first round is a new one.
        round += 1;
        await moveTo('in_progress');
      }
    }
    while (!isTerminal(state)) {
      await continueAsNewIfDue();
      if (state === 'in_progress') {
        const outcome = await runRound(context.modelLabel);
        settleBudget(outcome.kind === 'failed' ? 'failed' : outcome.kind === 'paused' ? 'stopped' : 'completed');
        // A paused or failed attempt returns no usage: keep what it last reported.
        if (outcome.kind === 'paused' || outcome.kind === 'failed') usage = addUsage(usage, roundUsage);
        iteration = 0;
        roundUsage = ZERO_USAGE_TOTALS;
        pendingApprovals = [];
        if (outcome.kind === 'paused') {
          pauseRequested = false;
          phase = 'paused';
          // The attempt reported its usage only when a human was needed: the recorded calls say what it used.
          usage = (await moveTo('blocked')) ?? usage;
          await condition(() => resumeRequested);
          resumeRequested = false;
          attempt += 1;
          phase = 'starting';
          await moveTo('in_progress');
          continue;
        }
        if (outcome.kind === 'failed') {
          phase = 'finished';
          usage = (await moveTo('failed', outcome.error)) ?? usage;
          break;
        }
        usage = addUsage(usage, outcome.usage);
        // The status query shows how many tool iterations the finished attempt took.
        iteration = outcome.iterations;
        queuedComments.push(...(outcome.undeliveredComments ?? []));
        if (outcome.kind === 'submitted') {
          submission = outcome.summary;
          phase = 'awaiting-review';
          await moveTo('review');
          continue;
        }
        noSubmitRetries += 1;
        if (noSubmitRetries > TASK_MAX_NO_SUBMIT_RETRIES) {
          phase = 'finished';
          await moveTo('failed', `the agent stopped ${noSubmitRetries} times without calling task_submit_review`);
          break;
        }
        log.info('round ended without a submission; retrying in the same session', { round, attempt, noSubmitRetries });
        attempt += 1;
        continue;
      }
      if (state === 'review') {
        await condition(() => reviews.length > 0 || shouldContinueAsNew(workflowInfo(), TASK_MAX_HISTORY_EVENTS_PER_RUN));
        const review = reviews.shift();
        if (!review) continue; // continue as new at the top of the loop
        if (review.decision === 'accept') {
          phase = 'finished';
          await moveTo('completed');
          await startPostTaskReflection(taskId, agentId);
          break;
        }
        round += 1;
        attempt = 1;
        noSubmitRetries = 0;
        revisionFeedback = review.feedback?.trim() || 'The reviewer asked for a revision without further comment.';
        submission = undefined;
        phase = 'starting';
        await moveTo('in_progress');
      }
    }
  } catch (error) {
    if (isCancellation(error)) {
      settleBudget('stopped');
      await CancellationScope.nonCancellable(async () => {
        phase = 'finished';
        pendingApprovals = []; // nobody can decide them any more
        if (!isTerminal(state)) await moveTo('cancelled');
      });
    } else if (error instanceof TemporalFailure && taskRecorded && !isTerminal(state) && patched('task-failure-recorded')) {
      // Only failures that end the workflow: any other error fails just the workflow task, whose
      // commands are discarded and which Temporal retries (continue-as-new is not a failure either).
      await recordWorkflowFailure(error);
    }
    throw error;
  }
  await condition(allHandlersFinished);
  return { taskId, state, rounds: round, usage, ...(submission ? { submission } : {}), ...(lastError ? { error: lastError } : {}) };

  /**
   * The workflow itself is failing (a refused transition, a store write that ran out of retries): mark
   * the task failed so the row does not claim it is still running. Best effort: the original error
   * is what the workflow fails with.
   */
  async function recordWorkflowFailure(error: unknown): Promise<void> {
    const message = error instanceof Error ? error.message : String(error);
    try {
      await CancellationScope.nonCancellable(async () => {
        state = 'failed';
        phase = 'finished';
        lastError = message;
        upsertSearchAttributes([{ key: TaskStateSearchAttribute, value: state }]);
        await store.recordTaskState({ taskId, state, round, lastError: message, eventKey: `state:${round}:${attempt}:failed` });
      });
    } catch (recordError) {
      log.warn('could not record the failed task state', { error: String(recordError) });
    }
  }

  /** Between rounds and while waiting for review: carry counters and undelivered signals only. */
  async function continueAsNewIfDue(): Promise<void> {
    // A pause received in this activation is not part of the carry: act on it first (→ blocked).
    if (pauseRequested || !shouldContinueAsNew(workflowInfo(), TASK_MAX_HISTORY_EVENTS_PER_RUN)) return;
    await condition(allHandlersFinished);
    await continueAsNew<typeof taskWorkflow>({
      ...input,
      carry: { state, round, attempt, usage, noSubmitRetries, revisionFeedback, submission, pendingReview: reviews, comments: queuedComments },
    });
  }

  /** Runs the current round (attempt); transient failures retry it in the same session up to the design's limit. */
  async function runRound(modelLabel: string): Promise<RoundResult> {
    for (let transient = 0; ; transient++) {
      if (pauseRequested) return { kind: 'paused' };
      roundScope = new CancellationScope();
      try {
        return await roundScope.run(async () => {
          // With a budget: what earlier rounds and attempts spent (recorded calls, sub-agents included) counts.
          const spentBefore = input.costBudgetUsd !== undefined ? await store.taskCostUsd({ taskId }) : undefined;
          const forAttempt = queuedComments.splice(0);
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
                comments: forAttempt,
                ...(input.costBudgetUsd !== undefined ? { budgetUsd: input.costBudgetUsd, budgetSpentBeforeUsd: spentBefore } : {}),
                carry: undefined,
              },
            ],
            parentClosePolicy: ParentClosePolicy.TERMINATE,
            typedSearchAttributes: [
              { key: AgentIdSearchAttribute, value: agentId },
              { key: TaskIdSearchAttribute, value: taskId },
            ],
            staticSummary: `round ${round} · attempt ${attempt}`,
          }).catch((error: unknown) => {
            queuedComments.unshift(...forAttempt);
            throw error;
          });
          // Comments that came in while the round was starting.
          for (const c of queuedComments.splice(0)) await deliverComment(c);
          phase = 'thinking';
          showDetails();
          return await child.result();
        });
      } catch (error) {
        const workflowCancelled = CancellationScope.current().consideredCancelled;
        if (isCancellation(error) && pauseRequested && !workflowCancelled) return { kind: 'paused' };
        if (isCancellation(error)) throw error;
        const message = failureMessage(error);
        if (isNonRetryable(error) || transient >= TASK_MAX_TRANSIENT_ROUND_RETRIES) {
          return { kind: 'failed', error: message };
        }
        lastError = message;
        log.warn('round failed; retrying after a delay in the same session', { round, attempt, error: message });
        attempt += 1;
        // A pause during the delay ends the wait early (and the loop returns 'paused').
        await condition(() => pauseRequested, transientRetryDelayMs(transient + 1));
      } finally {
        child = undefined;
        roundScope = undefined;
      }
    }
  }
}
