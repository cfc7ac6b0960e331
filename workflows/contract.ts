/**
 * The contract that services, the Temporal UI and humans rely on (ARCHITECTURE.md §3): task queue,
 * workflow ids, signals, queries, updates, search attributes and the workflow input/output types.
 * Defined once; imported by workflows, the client library, the CLI and the tests.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { withTreeCost } from './rules/subagents';
import type { TaskState } from './rules/task-state';
import type { BudgetReport, SubagentCarry } from './subagent-contract';
import { ZERO_USAGE_TOTALS, type UsageTotals } from './usage';
import { FailureType } from './failure-types';
import type { TaskPriority } from './rules/priority';
import type { ApprovalWaitState } from './rules/approval-wait-rules';

export { ZERO_USAGE_TOTALS, type UsageTotals } from './usage';

export const DEFAULT_TASK_QUEUE = 'agents';
export const DEFAULT_NAMESPACE = 'default';

export const taskWorkflowId = (taskId: string): string => `task-${taskId}`;
export const roundWorkflowId = (taskId: string, round: number): string => `task-${taskId}-r${round}`;
/** Each round has its own conversation; a retry inside a round reuses it. */
export const roundSessionId = (taskId: string, round: number): string => `task_${taskId}_r${round}`;
export const reflectionWorkflowId = (taskId: string): string => `reflection-${taskId}`;
/**
 * The task's run viewer, a page of the HTTP API (every LLM and tool call of every round): its path,
 * relative to the API's public URL. The round's current details link to it.
 */
export const runViewerPath = (taskId: string): string => `/runs/${encodeURIComponent(taskId)}`;
export const heartbeatScheduleId = (agentId: string): string => `heartbeat-${agentId}`;
export const consolidationScheduleId = (agentId: string): string => `consolidation-${agentId}`;

export const AgentIdSearchAttribute = defineSearchAttributeKey('AgentId', SearchAttributeType.KEYWORD);
export const TaskIdSearchAttribute = defineSearchAttributeKey('TaskId', SearchAttributeType.KEYWORD);
export const TaskStateSearchAttribute = defineSearchAttributeKey('TaskState', SearchAttributeType.KEYWORD);
/** On a fork (`agents task fork`): the task it was forked from, so the UI lists every fork of a task. */
export const ForkOfSearchAttribute = defineSearchAttributeKey('ForkOf', SearchAttributeType.KEYWORD);
/**
 * The organisation a run works for (its agent's), so the Web UI and `temporal workflow list` filter by
 * it: `OrgId="acme"`. Runs started before organisations, and raw starts until their task is recorded,
 * have none.
 */
export const OrgIdSearchAttribute = defineSearchAttributeKey('OrgId', SearchAttributeType.KEYWORD);
/** Every search attribute the product writes; a namespace must have them all (the worker checks at start). */
export const PRODUCT_SEARCH_ATTRIBUTES = [
  AgentIdSearchAttribute,
  TaskIdSearchAttribute,
  TaskStateSearchAttribute,
  ForkOfSearchAttribute,
  OrgIdSearchAttribute,
] as const;

// ---- human decisions ---------------------------------------------------------------------------

export interface ApprovalDecision {
  requestId: string;
  decision: 'approved' | 'rejected';
  comment?: string;
  decidedBy?: string;
  /**
   * Groups the approver belongs to, as the caller vouches (the HTTP API and the inbox: the OIDC groups
   * claim and the token's scope); a policy's `@group` lets its members decide. Trusted like `decidedBy`.
   */
  decidedByGroups?: string[];
}

export interface ReviewDecision {
  decision: 'accept' | 'revise';
  feedback?: string;
  decidedBy?: string;
}

export interface TaskComment {
  text: string;
  from?: string;
  /**
   * `message`: a colleague's reply on a thread the task's agent opened from this task
   * (agent_send_message in a round); the text already names its sender and mailbox item.
   */
  kind?: 'message';
}

/** Approve or reject a pending tool call. Unknown or already-decided request ids are ignored. */
export const approvalDecisionSignal = defineSignal<[ApprovalDecision]>('approvalDecision');
/**
 * Same as the signal, but validated: rejects an unknown or already-decided `requestId`, and returns
 * the decision as recorded.
 */
export const decideApprovalUpdate = defineUpdate<RecordedApprovalDecision, [ApprovalDecision]>('decideApproval');
/** Accept the submitted work (→ completed) or ask for a revision (→ a new round). */
export const reviewDecisionSignal = defineSignal<[ReviewDecision]>('reviewDecision');
/** A human comment, merged into the agent's next LLM turn. */
export const commentSignal = defineSignal<[TaskComment]>('comment');
/** Pause (→ blocked) and resume (→ in_progress, same round and session). */
export const pauseSignal = defineSignal<[{ reason?: string }]>('pause');
export const resumeSignal = defineSignal<[]>('resume');

/** A human's decision on a task an agent created that waits for approval (pending → start, or → rejected). */
export interface TaskApprovalDecision {
  decision: 'approve' | 'reject';
  decidedBy?: string;
  comment?: string;
}
/** Approve or reject a pending task; ignored unless the task waits for approval. */
export const taskApprovalSignal = defineSignal<[TaskApprovalDecision]>('taskApproval');
/** A dependency of this task reached a final state: re-read the dependencies (a blocked task may start). */
export const dependenciesChangedSignal = defineSignal<[]>('dependenciesChanged');

export interface RecordedApprovalDecision extends ApprovalDecision {
  tool: string;
  decidedAt: string;
  /** Under an approval policy: what the request waits for after this decision ("1 of 2 approvals; …", or its outcome). */
  waitingFor?: string;
}

// ---- status ------------------------------------------------------------------------------------

export interface PendingApproval {
  requestId: string;
  tool: string;
  summary: string;
  requestedAt: string;
  /** Under an approval policy (docs/approvals.md): the policy and the decisions, reminders, escalation and delegations so far. */
  wait?: ApprovalWaitState;
}

export type TaskPhase =
  | 'starting'
  | 'thinking'
  | 'running-tool'
  | 'awaiting-approval'
  | 'awaiting-review'
  | 'awaiting-budget'
  | 'paused'
  | 'reflecting'
  | 'finished';

export interface TaskStatus {
  taskId: string;
  agentId: string;
  state: TaskState;
  round: number;
  iteration: number;
  phase: TaskPhase;
  pendingApprovals: PendingApproval[];
  usage: UsageTotals;
  lastError?: string;
  /** The summary the agent gave with `task_submit_review`, once it has. */
  submission?: string;
  /** With a cost budget or sub-agents: the tree's spend per node and in total, as the round last reported it. */
  budget?: BudgetReport;
  /** While a round runs: its part of `usage` (with sub-agents, their spend so far as the tree reports it). */
  roundUsage?: UsageTotals;
}

export const statusQuery = defineQuery<TaskStatus>('status');

// ---- workflow inputs and outputs ---------------------------------------------------------------

export { TASK_PRIORITIES, type TaskPriority } from './rules/priority';

/**
 * What starts a task: any Temporal client can send it (`temporal workflow start --type taskWorkflow`,
 * the Web UI, a Schedule, a Go or Python service). The workflow records the task row itself, so
 * starting it twice with the same `taskId` yields one task.
 */
export interface TaskWorkflowInput {
  /**
   * The task's id. When absent (a Temporal Schedule's action, whose runs get the ids
   * `<action workflow id>-<timestamp>`), it is derived from the workflow id: `task-` stripped if present
   * (see `taskIdFromWorkflowId`), so a schedule whose action id is `task-nightly` creates the tasks
   * `nightly-2026-12-01T03:00:00Z`, … — one per run.
   */
  taskId?: string;
  agentId: string;
  /** Needed to create the task; may be left out when the row already exists. */
  title?: string;
  description?: string;
  priority?: TaskPriority;
  createdBy?: string;
  /** How long a tool call waits for a human decision (default 24 h). */
  approvalTimeoutMs?: number;
  /**
   * Cost budget of the task in USD: every round's LLM calls plus its sub-agents'. Reaching it holds the
   * running round's tree until a `budgetDecision` (raise or stop). Absent: no limit.
   */
  costBudgetUsd?: number;
  /** Carried over continue-as-new; absent on the first run. */
  carry?: TaskCarry;
  /**
   * A human's retry (of a failed task) or rerun (of a completed or cancelled one): a new run of
   * `task-{taskId}` whose first round follows `afterRound`, the task's last one. Written by the task
   * admin client after it checked the task's state; without it an ended task id cannot run again.
   */
  restart?: { kind: 'retry' | 'rerun'; afterRound: number };
  /**
   * This task is a fork of a recorded one (see `ForkInput`): its first round starts from a copy of the
   * source round's session up to `atStep`, its tools replay, run in its own workspace, or are refused.
   */
  fork?: ForkInput;
}

/**
 * What a fork starts from and what it changes. Applied by activities (the task workflow runs a fork as
 * any task): the session copy, the fork's workspace and its tool policy are prepared when the task is
 * recorded, the overrides are read by every LLM step and tool call of the fork.
 */
export interface ForkInput {
  sourceTaskId: string;
  /** The source round whose session is copied (default 1). */
  round?: number;
  /** How many of the source round's LLM steps (each with its tool results) the fork keeps: 0 starts from the task prompt. */
  atStep: number;
  overrides?: ForkOverrides;
  /** Tools with outside effects the fork may run for real, by name (default none: they are answered "not run in a fork"). */
  allowTools?: string[];
}

export interface ForkOverrides {
  provider?: string;
  model?: string;
  tier?: 'cheap' | 'standard' | 'premium';
  /** Identity files replacing the agent's in the fork's prompts (the agent itself is unchanged). */
  identity?: { soul?: string; agents?: string; heartbeat?: string; tools?: string };
  /** Replaces the recorded result of a call of the fork step (the last one unless `callIndex`, 0-based within the step). */
  toolResult?: { content: string; isError?: boolean; callIndex?: number };
  /** Extra instructions, added as a user message after the copied session. */
  instructions?: string;
}

/** The task id of a workflow started without one (a Schedule's run): its workflow id, `task-` stripped. */
export const taskIdFromWorkflowId = (workflowId: string): string =>
  workflowId.startsWith('task-') ? workflowId.slice('task-'.length) : workflowId;

/**
 * Stable failure types a task workflow can end with (non-retryable `ApplicationFailure`s), so callers
 * can branch on `error.cause.type` whichever language their client is written in.
 */
export const TaskFailureType = {
  /** The input names an agent that does not exist. */
  unknownAgent: FailureType.UnknownAgent,
  /** The input is malformed (missing agent id, a title needed to create the task, a bad priority…). */
  invalidInput: FailureType.InvalidTaskInput,
  /** The task id already belongs to another agent, or that task already ended: a task id runs once. */
  taskConflict: FailureType.TaskConflict,
  /** The workflow asked for a move the task state machine forbids (a bug, never retried). */
  invalidTransition: FailureType.InvalidTaskTransition,
  /** A malformed or stale human decision sent by update (rejected by its validator). */
  invalidDecision: FailureType.InvalidDecision,
} as const;

/** What a continued-as-new task workflow needs: counters and ids only. */
export interface TaskCarry {
  state: TaskState;
  round: number;
  attempt: number;
  revisionFeedback?: string;
  submission?: string;
  usage: UsageTotals;
  noSubmitRetries: number;
  pendingReview?: ReviewDecision[];
  comments?: TaskComment[];
}

export interface TaskWorkflowResult {
  taskId: string;
  state: TaskState;
  rounds: number;
  usage: UsageTotals;
  submission?: string;
  error?: string;
}

export interface RoundWorkflowInput {
  taskId: string;
  agentId: string;
  round: number;
  /** 1-based attempt within the round; attempts share the round's session. */
  attempt: number;
  sessionId: string;
  /** Shown in activity summaries ("llm claude-sonnet-4 · turn 3"). */
  modelLabel: string;
  approvalTimeoutMs: number;
  /** Workflow id of the parent task workflow, for progress signals. */
  parentWorkflowId: string;
  /** Reviewer feedback that opens a revision round. */
  revisionFeedback?: string;
  /** Human comments received between attempts: merged into the attempt's first LLM turn. */
  comments?: TaskComment[];
  /** The task's cost budget in USD (see `TaskWorkflowInput.costBudgetUsd`). */
  budgetUsd?: number;
  /** What the task's earlier rounds and attempts spent: it counts against `budgetUsd`. */
  budgetSpentBeforeUsd?: number;
  /** Carried over continue-as-new. */
  carry?: RoundCarry;
}

export interface RoundCarry {
  pendingInjections: string[];
  llmTurn: number;
  toolIterations: number;
  finalReminderSent: boolean;
  usage: UsageTotals;
  comments: TaskComment[];
  approvalDecisions: ApprovalDecision[];
  /** Sub-agents started so far and the tree's spend (absent in runs that had neither). */
  subagents?: SubagentCarry;
}

export type RoundOutcome = (
  | { kind: 'submitted'; summary: string; usage: UsageTotals; iterations: number }
  | { kind: 'not-submitted'; usage: UsageTotals; iterations: number; lastText?: string }
  /** An approval request expired under a policy that says the task then waits for a human (→ blocked). */
  | { kind: 'blocked'; reason: string; usage: UsageTotals; iterations: number }
) & {
  /** Comments that arrived after the round's last LLM turn: the task workflow keeps them for the next one. */
  undeliveredComments?: TaskComment[];
};

/** Internal: the round tells its parent what it is doing, so the parent's `status` query is live. */
export interface RoundProgress {
  round: number;
  iteration: number;
  phase: TaskPhase;
  usage: UsageTotals;
  pendingApprovals: PendingApproval[];
  budget?: BudgetReport;
}
export const roundProgressSignal = defineSignal<[RoundProgress]>('roundProgress');
/**
 * A round's live progress, on `task-{id}-r{n}`. The round signals its task workflow only when a human
 * needs to know (approvals, budget holds), so the task's `status` query alone lags behind a running
 * round; the client's `getStatus` merges this in (`withLiveRound`).
 */
export const roundProgressQuery = defineQuery<RoundProgress>('progress');

/**
 * A task's status with its running round's live progress: iteration, phase, usage (the task's earlier
 * rounds plus this round's) and the tree's budget. Unchanged unless the round is the task's current one.
 */
export function withLiveRound(status: TaskStatus, live: RoundProgress): TaskStatus {
  if (status.state !== 'in_progress' || live.round !== status.round) return status;
  const reported = status.roundUsage ?? ZERO_USAGE_TOTALS;
  // The round's own usage counts its sub-agents only once they have all answered; its tree report counts them as they spend.
  const roundUsage = withTreeCost(live.usage, live.budget, taskWorkflowId(status.taskId));
  const before = addUsage(status.usage, {
    inputTokens: -reported.inputTokens,
    outputTokens: -reported.outputTokens,
    cacheReadTokens: -reported.cacheReadTokens,
    cacheWriteTokens: -reported.cacheWriteTokens,
    costUsd: -reported.costUsd,
  });
  return {
    ...status,
    iteration: live.iteration,
    phase: live.phase,
    usage: addUsage(before, roundUsage),
    roundUsage,
    ...(live.budget ? { budget: live.budget } : {}),
  };
}

export function addUsage(a: UsageTotals, b: Partial<UsageTotals>): UsageTotals {
  return {
    inputTokens: a.inputTokens + (b.inputTokens ?? 0),
    outputTokens: a.outputTokens + (b.outputTokens ?? 0),
    cacheReadTokens: a.cacheReadTokens + (b.cacheReadTokens ?? 0),
    cacheWriteTokens: a.cacheWriteTokens + (b.cacheWriteTokens ?? 0),
    costUsd: Math.round((a.costUsd + (b.costUsd ?? 0)) * 1e6) / 1e6,
  };
}

// ---- memory workflows (issue 5): heartbeat, consolidation, post-task reflection ------------------

/** A heartbeat's conversation: `hb_{agentId}_{ms}`, one per run. */
export const heartbeatSessionId = (agentId: string, startedAtMs: number): string => `hb_${agentId}_${startedAtMs}`;
/** Internal conversations (daily report, dream, reflection) use the `sys_` prefix. */
export const systemSessionId = (agentId: string, purpose: string): string => `sys_${agentId}_${purpose}`;

export interface HeartbeatWorkflowInput {
  agentId: string;
  /** Run even when nothing changed since the last heartbeat (skips the idle check). */
  force?: boolean;
}

/** skipped: idle, no LLM call · ok: HEARTBEAT_OK, nothing done · acted: used tools or replied · iteration-cap: stopped at 30 tool iterations. */
export type HeartbeatOutcome = 'skipped' | 'ok' | 'acted' | 'iteration-cap';

export interface HeartbeatWorkflowResult {
  agentId: string;
  outcome: HeartbeatOutcome;
  toolIterations: number;
  /** Idle skips in a row including this run (0 when it ran). */
  skippedInRow: number;
  sessionId?: string;
}

export interface ConsolidationWorkflowInput {
  agentId: string;
}

export interface ConsolidationWorkflowResult {
  agentId: string;
  dailyReport: 'written' | 'exists' | 'failed';
  dream: 'applied' | 'rejected' | 'too-few' | 'already-ran' | 'failed';
  /** Why a dream plan was rejected (nothing changed), or why a phase failed. */
  reason?: string;
  removed: number;
  merged: number;
  promoted: number;
}

export interface ReflectionWorkflowInput {
  taskId: string;
  agentId: string;
}

export interface ReflectionWorkflowResult {
  taskId: string;
  /** rate-limited: the agent already reflected 5 times today · already-done: this task was reflected on. */
  status: 'completed' | 'rate-limited' | 'already-done';
  toolIterations: number;
}
