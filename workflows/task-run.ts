import {
  allHandlersFinished,
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
  upsertSearchAttributes,
  workflowInfo,
  type ChildWorkflowHandle,
} from '@temporalio/workflow';
import { TASK_STORE } from './activity-options';
import { roundStopStore, taskRowStore } from './task-store';
import {
  BASELINE_0_9_0_PATCH,
  DEPENDENCY_WAKE_KEPT_PATCH,
  ROUND_STOP_RECORDED_PATCH,
  START_GATES_PATCH,
  TASK_FAILURE_RECORDED_PATCH,
} from './patches';
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
  TaskIdSearchAttribute,
  TaskStateSearchAttribute,
  taskWorkflowId,
  ZERO_USAGE_TOTALS,
  type PendingApproval,
  type ReviewDecision,
  type RoundOutcome,
  type TaskCarry,
  type TaskComment,
  type TaskPhase,
  type TaskStatus,
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
import { settleBudgetReport, withTreeCost } from './rules/subagents';
import { isTerminal, transition, type TaskState } from './rules/task-state';
import { budgetQuery, type BudgetReport } from './subagent-contract';
import { installDecisionHandlers } from './task-decisions';
import { ApprovalMirror } from './approval-mirror';
import { startPostTaskReflection } from './reflection';
import { taskRoundWorkflow } from './task-round';
import { inheritedOrgAttribute } from './org-attribute';

const store = proxyActivities<Activities>(TASK_STORE);

type RoundResult = RoundOutcome | { kind: 'paused' } | { kind: 'failed'; error: string };
/** What the lifecycle does after a step: go round the loop again, or end the task. */
export type Next = 'next' | 'end';

/**
 * One task workflow run's state and its transitions, with the handlers (status, progress, comments,
 * pause, resume, decisions) installed on it. `taskWorkflow` drives it through its lifecycle. Every
 * method keeps the command order the workflow had when this state was a set of closures: the
 * committed histories replay it.
 */
export class TaskRun {
  readonly agentId: string;
  readonly approvalTimeoutMs: number;
  /** A human's retry or rerun starts like a run carried over in `pending`, after the task's last round. */
  readonly carry: TaskCarry | undefined;
  state: TaskState;
  round: number;
  attempt: number;
  usage: UsageTotals;
  noSubmitRetries: number;
  revisionFeedback: string | undefined;
  submission: string | undefined;
  /** The status query's `lastError`: what failed, or what a blocked task waits for. */
  lastError: string | undefined;
  phase: TaskPhase;
  iteration = 0;
  roundUsage: UsageTotals = ZERO_USAGE_TOTALS;
  pendingApprovals: PendingApproval[] = [];
  /** Request ids already decided: a second decision on one is refused. */
  readonly decided = new Set<string>();
  /** The running round's approval waits under a policy, as it reported them. */
  readonly approvalWaits = new ApprovalMirror();
  /** Review decisions waiting for the lifecycle. */
  readonly reviews: ReviewDecision[];
  /** Comments for the next attempt or round (none is running, or it ended before it got them). */
  readonly queuedComments: TaskComment[];
  child: ChildWorkflowHandle<typeof taskRoundWorkflow> | undefined;
  roundScope: CancellationScope | undefined;
  pauseRequested = false;
  /** A human sent `resume` while the task was blocked or pausing. */
  resumeRequested = false;
  /** The round's tree budget as it last reported it (with a cost budget or sub-agents). */
  budget: BudgetReport | undefined;
  /** True while `budget` comes from the round that is running now (it counts sub-agents as they spend). */
  budgetLive = false;
  /** The task row exists (recorded from the input): a failure from here on is recorded on it. */
  recorded = false;
  /** Started by 0.9.0 or later: every earlier patch is taken without being asked ('The release baseline' in patches.ts). */
  readonly baseline: boolean;
  /** This run records a round's stop request for its local steps (ROUND_STOP_RECORDED_PATCH). */
  readonly recordsRoundStops: boolean;
  /**
   * The later patches, asked in the run's first workflow task by a run that records round stops
   * ('Up-front patches' in patches.ts), or all taken with the baseline; undefined for runs before 0.8.0,
   * which ask where they branch.
   */
  readonly upFront: { startGates: boolean; dependencyWakeKept: boolean; failureRecorded: boolean } | undefined;

  constructor(
    readonly input: TaskWorkflowInput,
    readonly taskId: string,
  ) {
    this.agentId = input.agentId;
    this.carry =
      input.carry ??
      (input.restart
        ? {
            state: 'pending',
            round: input.restart.afterRound,
            attempt: 1,
            usage: ZERO_USAGE_TOTALS,
            noSubmitRetries: 0,
          }
        : undefined);
    this.approvalTimeoutMs = input.approvalTimeoutMs ?? DEFAULT_APPROVAL_TIMEOUT_MS;
    this.state = this.carry?.state ?? 'pending';
    this.round = this.carry?.round ?? 0;
    this.attempt = this.carry?.attempt ?? 1;
    this.usage = this.carry?.usage ?? ZERO_USAGE_TOTALS;
    this.noSubmitRetries = this.carry?.noSubmitRetries ?? 0;
    this.revisionFeedback = this.carry?.revisionFeedback;
    this.submission = this.carry?.submission;
    this.phase = this.state === 'review' ? 'awaiting-review' : 'starting';
    this.reviews = [...(this.carry?.pendingReview ?? [])];
    this.queuedComments = [...(this.carry?.comments ?? [])];
    // Asked in the run's first workflow task (see 'Up-front patches' and 'The release baseline' in patches.ts).
    this.baseline = patched(BASELINE_0_9_0_PATCH);
    this.recordsRoundStops = this.baseline || patched(ROUND_STOP_RECORDED_PATCH);
    this.upFront = this.baseline
      ? { startGates: true, dependencyWakeKept: true, failureRecorded: true }
      : this.recordsRoundStops
        ? {
            startGates: patched(START_GATES_PATCH),
            dependencyWakeKept: patched(DEPENDENCY_WAKE_KEPT_PATCH),
            failureRecorded: patched(TASK_FAILURE_RECORDED_PATCH),
          }
        : undefined;
  }

  /** The running round's usage for the status: with a live tree report, its cost includes the sub-agents' spend so far. */
  liveRoundUsage(): UsageTotals {
    return this.budgetLive && this.state === 'in_progress'
      ? withTreeCost(this.roundUsage, this.budget, taskWorkflowId(this.taskId))
      : this.roundUsage;
  }

  /** The round ended: its report stops claiming running (or held) nodes. */
  settleBudget(outcome: 'completed' | 'failed' | 'stopped'): void {
    this.budgetLive = false;
    if (this.budget) this.budget = settleBudgetReport(this.budget, outcome);
  }

  showDetails(): void {
    setCurrentDetails(
      `task ${this.taskId} · ${this.state} · round ${this.round} · iteration ${this.iteration} · ${this.phase}`,
    );
  }

  /** Shown by the status query while the task waits. */
  setPhase(phase: TaskPhase): void {
    this.phase = phase;
    this.showDetails();
  }

  status(): TaskStatus {
    return {
      taskId: this.taskId,
      agentId: this.agentId,
      state: this.state,
      round: this.round,
      iteration: this.iteration,
      phase: this.phase,
      pendingApprovals: this.pendingApprovals,
      usage: addUsage(this.usage, this.liveRoundUsage()),
      ...(this.state === 'in_progress' ? { roundUsage: this.liveRoundUsage() } : {}),
      ...(this.lastError ? { lastError: this.lastError } : {}),
      ...(this.submission ? { submission: this.submission } : {}),
      ...(this.budget ? { budget: this.budget } : {}),
    };
  }

  result(): TaskWorkflowResult {
    return {
      taskId: this.taskId,
      state: this.state,
      rounds: this.round,
      usage: this.usage,
      ...(this.submission ? { submission: this.submission } : {}),
      ...(this.lastError ? { error: this.lastError } : {}),
    };
  }

  /** Queries, signals and updates of the task workflow, all reading and changing this run. */
  installHandlers(): void {
    setHandler(statusQuery, () => this.status());
    setHandler(
      budgetQuery,
      (): BudgetReport =>
        this.budget ?? {
          limitUsd: this.input.costBudgetUsd ?? null,
          spentUsd: addUsage(this.usage, this.roundUsage).costUsd,
          held: false,
          nodes: [],
        },
    );
    installDecisionHandlers({
      round: () => this.child,
      state: () => this.state,
      spentUsd: () => this.budget?.spentUsd ?? addUsage(this.usage, this.roundUsage).costUsd,
      pendingApprovals: () => this.pendingApprovals,
      setPendingApprovals: (list) => {
        this.pendingApprovals = list;
      },
      decided: this.decided,
      reviews: this.reviews,
      approvals: this.approvalWaits,
    });
    setHandler(roundProgressSignal, (p) => {
      if (p.round !== this.round || this.state !== 'in_progress') return;
      this.iteration = p.iteration;
      this.phase = p.phase;
      this.roundUsage = p.usage;
      if (p.budget) {
        this.budget = p.budget;
        this.budgetLive = true;
      }
      this.pendingApprovals = this.approvalWaits
        .observe(p.pendingApprovals)
        .filter((a) => !this.decided.has(a.requestId));
      this.showDetails();
    });
    setHandler(commentSignal, async (comment) => {
      if (typeof comment?.text !== 'string' || !comment.text.trim()) return;
      await this.deliverComment(comment);
    });
    setHandler(pauseSignal, () => {
      if (this.state !== 'in_progress') return;
      this.pauseRequested = true;
      this.resumeRequested = false;
      this.roundScope?.cancel();
    });
    setHandler(resumeSignal, () => {
      if (this.state === 'blocked' || this.pauseRequested) this.resumeRequested = true;
    });
  }

  /** The search attributes the UI lists runs by, and the first current details. */
  announce(): void {
    upsertSearchAttributes([
      { key: AgentIdSearchAttribute, value: this.agentId },
      { key: TaskIdSearchAttribute, value: this.taskId },
      { key: TaskStateSearchAttribute, value: this.state },
    ]);
    this.showDetails();
  }

  /** To the running round, else kept for the next attempt or round (a finished round returns what it did not use). */
  async deliverComment(comment: TaskComment): Promise<void> {
    if (!this.child || this.state !== 'in_progress' || this.pauseRequested) {
      this.queuedComments.push(comment);
      return;
    }
    try {
      await this.child.signal(commentSignal, comment);
    } catch {
      this.queuedComments.push(comment); // the round just ended: the next one gets it
    }
  }

  /** Returns the task's recorded usage when the move follows an interrupted attempt (→ blocked, failed). */
  async moveTo(to: TaskState, error?: string): Promise<UsageTotals | undefined> {
    this.state = transition(this.state, to);
    this.lastError = error;
    upsertSearchAttributes([{ key: TaskStateSearchAttribute, value: this.state }]);
    this.showDetails();
    // Histories recorded before the activity returned usage replay `undefined` here.
    return (
      (await taskRowStore(this.baseline).recordTaskState({
        taskId: this.taskId,
        state: this.state,
        round: this.round,
        lastError: error,
        eventKey: `state:${this.round}:${this.attempt}:${this.state}`,
      })) ?? undefined
    );
  }

  /** `openTask` already recorded the move to `in_progress` for the next round: mirror it here. */
  startedByOpen(): void {
    this.round += 1;
    this.state = transition(this.state, 'in_progress');
    upsertSearchAttributes([{ key: TaskStateSearchAttribute, value: this.state }]);
    this.showDetails();
  }

  /** A retry or rerun starts a run with the earlier rounds carried: its first round is a new one. */
  async startNextRound(): Promise<void> {
    this.round += 1;
    await this.moveTo('in_progress');
  }

  /** One attempt of the current round, and the move its outcome calls for. */
  async runAttempt(modelLabel: string): Promise<Next> {
    const outcome = await this.runRound(modelLabel);
    this.settleBudget(outcome.kind === 'failed' ? 'failed' : outcome.kind === 'paused' ? 'stopped' : 'completed');
    // A paused or failed attempt returns no usage: keep what it last reported.
    if (outcome.kind === 'paused' || outcome.kind === 'failed') this.usage = addUsage(this.usage, this.roundUsage);
    this.iteration = 0;
    this.roundUsage = ZERO_USAGE_TOTALS;
    this.pendingApprovals = [];
    this.approvalWaits.clear();
    if (outcome.kind === 'paused') {
      this.pauseRequested = false;
      this.phase = 'paused';
      // The attempt reported its usage only when a human was needed: the recorded calls say what it used.
      this.usage = (await this.moveTo('blocked')) ?? this.usage;
      await condition(() => this.resumeRequested);
      this.resumeRequested = false;
      this.attempt += 1;
      this.phase = 'starting';
      await this.moveTo('in_progress');
      return 'next';
    }
    if (outcome.kind === 'failed') {
      this.phase = 'finished';
      this.usage = (await this.moveTo('failed', outcome.error)) ?? this.usage;
      return 'end';
    }
    if (outcome.kind === 'blocked') {
      // An approval policy said: when nobody decides in time, the task waits for a human (resume).
      this.queuedComments.push(...(outcome.undeliveredComments ?? []));
      this.phase = 'paused';
      this.usage = (await this.moveTo('blocked', outcome.reason)) ?? addUsage(this.usage, outcome.usage);
      await condition(() => this.resumeRequested);
      this.resumeRequested = false;
      this.attempt += 1;
      this.phase = 'starting';
      await this.moveTo('in_progress');
      return 'next';
    }
    this.usage = addUsage(this.usage, outcome.usage);
    // The status query shows how many tool iterations the finished attempt took.
    this.iteration = outcome.iterations;
    this.queuedComments.push(...(outcome.undeliveredComments ?? []));
    if (outcome.kind === 'submitted') {
      this.submission = outcome.summary;
      this.phase = 'awaiting-review';
      await this.moveTo('review');
      return 'next';
    }
    this.noSubmitRetries += 1;
    if (this.noSubmitRetries > TASK_MAX_NO_SUBMIT_RETRIES) {
      this.phase = 'finished';
      await this.moveTo('failed', `the agent stopped ${this.noSubmitRetries} times without calling task_submit_review`);
      return 'end';
    }
    log.info('round ended without a submission; retrying in the same session', {
      round: this.round,
      attempt: this.attempt,
      noSubmitRetries: this.noSubmitRetries,
    });
    this.attempt += 1;
    return 'next';
  }

  /** Waits for the reviewer: accept completes the task (and starts the reflection), revise opens a new round. */
  async awaitReview(): Promise<Next> {
    await condition(
      () => this.reviews.length > 0 || shouldContinueAsNew(workflowInfo(), TASK_MAX_HISTORY_EVENTS_PER_RUN),
    );
    const review = this.reviews.shift();
    if (!review) return 'next'; // continue as new at the top of the loop
    if (review.decision === 'accept') {
      this.phase = 'finished';
      await this.moveTo('completed');
      await startPostTaskReflection(this.taskId, this.agentId);
      return 'end';
    }
    this.round += 1;
    this.attempt = 1;
    this.noSubmitRetries = 0;
    this.revisionFeedback = review.feedback?.trim() || 'The reviewer asked for a revision without further comment.';
    this.submission = undefined;
    this.phase = 'starting';
    await this.moveTo('in_progress');
    return 'next';
  }

  /** Cancelled: the task is recorded `cancelled` in a scope that cannot itself be cancelled. */
  async cancelled(): Promise<void> {
    this.settleBudget('stopped');
    await CancellationScope.nonCancellable(async () => {
      this.phase = 'finished';
      this.pendingApprovals = []; // nobody can decide them any more
      if (!isTerminal(this.state)) await this.moveTo('cancelled');
    });
  }

  /**
   * The workflow itself is failing (a refused transition, a store write that ran out of retries): mark
   * the task failed so the row does not claim it is still running. Best effort: the original error
   * is what the workflow fails with.
   */
  async recordWorkflowFailure(error: unknown): Promise<void> {
    const message = error instanceof Error ? error.message : String(error);
    try {
      await CancellationScope.nonCancellable(async () => {
        this.state = 'failed';
        this.phase = 'finished';
        this.lastError = message;
        upsertSearchAttributes([{ key: TaskStateSearchAttribute, value: this.state }]);
        await taskRowStore(this.baseline).recordTaskState({
          taskId: this.taskId,
          state: this.state,
          round: this.round,
          lastError: message,
          eventKey: `state:${this.round}:${this.attempt}:failed`,
        });
      });
    } catch (recordError) {
      log.warn('could not record the failed task state', { error: String(recordError) });
    }
  }

  /** Between rounds and while waiting for review: carry counters and undelivered signals only. */
  async continueAsNewIfDue(): Promise<void> {
    // A pause received in this activation is not part of the carry: act on it first (→ blocked).
    if (this.pauseRequested || !shouldContinueAsNew(workflowInfo(), TASK_MAX_HISTORY_EVENTS_PER_RUN)) return;
    await condition(allHandlersFinished);
    const { state, round, attempt, usage, noSubmitRetries, revisionFeedback, submission } = this;
    // The workflow's own type, named here by its signature: importing it would close an import cycle.
    await continueAsNew<(input: TaskWorkflowInput) => Promise<TaskWorkflowResult>>({
      ...this.input,
      carry: {
        state,
        round,
        attempt,
        usage,
        noSubmitRetries,
        revisionFeedback,
        submission,
        pendingReview: this.reviews,
        comments: this.queuedComments,
      },
    });
  }

  /**
   * When `roundScope` is cancelled (a pause, or the task's cancellation) while its round runs, records
   * the stop request in PostgreSQL: a local step learns of the round's cancellation only when its
   * workflow task ends, so it polls for this instead (activities/step/round-stop.ts).
   */
  private recordStopWhenCancelled(roundScope: CancellationScope): void {
    const { round, attempt, taskId } = this;
    roundScope.cancelRequested.catch(async () => {
      if (this.roundScope !== roundScope) return; // the round had already ended
      const reason = this.pauseRequested ? 'pause' : 'cancel';
      await CancellationScope.nonCancellable(() =>
        roundStopStore.recordRoundStop({ taskId, round, attempt, reason }),
      ).catch((error: unknown) => log.warn('could not record the round stop request', { error: String(error) }));
    });
  }

  /** Runs the current round (attempt); transient failures retry it in the same session up to the design's limit. */
  private async runRound(modelLabel: string): Promise<RoundResult> {
    const { input, taskId, agentId } = this;
    for (let transient = 0; ; transient++) {
      if (this.pauseRequested) return { kind: 'paused' };
      const roundScope = new CancellationScope();
      this.roundScope = roundScope;
      if (this.recordsRoundStops) this.recordStopWhenCancelled(roundScope);
      try {
        return await roundScope.run(async () => {
          // With a budget: what earlier rounds and attempts spent (recorded calls, sub-agents included) counts.
          const spentBefore = input.costBudgetUsd !== undefined ? await store.taskCostUsd({ taskId }) : undefined;
          const forAttempt = this.queuedComments.splice(0);
          const child = await startChild(taskRoundWorkflow, {
            workflowId: roundWorkflowId(taskId, this.round),
            args: [
              {
                taskId,
                agentId,
                round: this.round,
                attempt: this.attempt,
                sessionId: roundSessionId(taskId, this.round),
                modelLabel,
                approvalTimeoutMs: this.approvalTimeoutMs,
                parentWorkflowId: workflowInfo().workflowId,
                revisionFeedback: this.revisionFeedback,
                comments: forAttempt,
                ...(input.costBudgetUsd !== undefined
                  ? { budgetUsd: input.costBudgetUsd, budgetSpentBeforeUsd: spentBefore }
                  : {}),
                carry: undefined,
              },
            ],
            parentClosePolicy: ParentClosePolicy.TERMINATE,
            typedSearchAttributes: [
              { key: AgentIdSearchAttribute, value: agentId },
              { key: TaskIdSearchAttribute, value: taskId },
              ...inheritedOrgAttribute(),
            ],
            staticSummary: `round ${this.round} · attempt ${this.attempt}`,
          }).catch((error: unknown) => {
            this.queuedComments.unshift(...forAttempt);
            throw error;
          });
          this.child = child;
          // Comments that came in while the round was starting.
          for (const c of this.queuedComments.splice(0)) await this.deliverComment(c);
          this.phase = 'thinking';
          this.showDetails();
          return await child.result();
        });
      } catch (error) {
        const workflowCancelled = CancellationScope.current().consideredCancelled;
        if (isCancellation(error) && this.pauseRequested && !workflowCancelled) return { kind: 'paused' };
        if (isCancellation(error)) throw error;
        const message = failureMessage(error);
        if (isNonRetryable(error) || transient >= TASK_MAX_TRANSIENT_ROUND_RETRIES) {
          return { kind: 'failed', error: message };
        }
        this.lastError = message;
        log.warn('round failed; retrying after a delay in the same session', {
          round: this.round,
          attempt: this.attempt,
          error: message,
        });
        this.attempt += 1;
        // A pause during the delay ends the wait early (and the loop returns 'paused').
        await condition(() => this.pauseRequested, transientRetryDelayMs(transient + 1));
      } finally {
        this.child = undefined;
        this.roundScope = undefined;
      }
    }
  }
}
