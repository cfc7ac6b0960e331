/**
 * Every activity's timeouts and retry policy, in one place with the reason for each. Provider SDK
 * retries are off, so these policies are the only retries; non-retryable failures (a 400 from a
 * provider, `UnknownAgent`) stop at once whatever the attempt count says.
 */
import type { ActivityOptions, LocalActivityOptions } from '@temporalio/workflow';
import { HEARTBEAT_MAX_RETRIES, HEARTBEAT_RETRY_BASE_MS } from './rules/heartbeat-rules';
import { SUBAGENT_MAX_LLM_RETRIES, SUBAGENT_RETRY_BASE_MS } from './rules/subagents';

/** Heartbeats come every second from LLM streams and tools: 20 s of silence means the worker is gone. */
const LIVENESS = '20 seconds';

/**
 * A task's LLM call: long answers stream for minutes, and a provider outage is ridden out for about
 * 10 minutes of backoff (2 s doubling to 2 min, 8 attempts) before the round fails and the task
 * workflow decides.
 */
export const TASK_LLM: ActivityOptions = {
  startToCloseTimeout: '20 minutes',
  heartbeatTimeout: LIVENESS,
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '2 minutes', maximumAttempts: 8 },
};

/** A task's tool call (a build, a test run): the ledger makes retries safe (3 attempts, 500 ms base). */
export const TASK_TOOL: ActivityOptions = {
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: LIVENESS,
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumAttempts: 3 },
};

/**
 * The fused step (LLM call + its auto-allowed tool calls): the longer of the two timeouts above plus
 * the LLM retry policy. Retrying the whole step is safe: the reply is found by its key and every tool
 * call by its ledger row, so nothing is asked or run twice.
 */
export const FUSED_STEP: ActivityOptions = { ...TASK_LLM, startToCloseTimeout: '50 minutes' };

/**
 * The fused step run as a local activity (a quick step after a quick one: rules/step-placement.ts):
 * the same timeout and retry policy. It has no heartbeat; a dead worker is noticed by its workflow
 * task's timeout, and the step runs again on another worker, where its keys and the ledger find
 * whatever it already did.
 */
export const FUSED_STEP_LOCAL: LocalActivityOptions = {
  startToCloseTimeout: FUSED_STEP.startToCloseTimeout!,
  retry: FUSED_STEP.retry!,
};

/**
 * The line that shows a round's last calls (`showLastStepCalls`): a local activity that does nothing.
 * A worker that dies under it has its workflow task retried, which schedules it again; a few quick
 * attempts are plenty.
 */
export const LAST_CALLS_LINE_LOCAL: LocalActivityOptions = {
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '100 milliseconds', maximumAttempts: 3 },
};

/** Chat is interactive: a provider outage fails the reply within minutes rather than hours. */
export const CHAT_LLM: ActivityOptions = {
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: LIVENESS,
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 6 },
};

/** Tools outside task rounds (conversations, heartbeats, reflections, sub-agents): shorter work, same ledger rule. */
export const RUN_TOOL: ActivityOptions = { ...TASK_TOOL, startToCloseTimeout: '10 minutes' };

/** Background LLM calls (daily report, dream): nobody waits, so the task's patient retry policy, shorter calls. */
export const BACKGROUND_LLM: ActivityOptions = { ...TASK_LLM, startToCloseTimeout: '10 minutes' };

/** Short database reads and writes; PostgreSQL restarts are ridden out for about 5 minutes. */
export const STORE: ActivityOptions = {
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 10 },
};

/** A task's own bookkeeping: losing it loses the task's state, so it outlasts a longer outage (about 10 minutes). */
export const TASK_STORE: ActivityOptions = { ...STORE, retry: { ...STORE.retry, maximumAttempts: 20 } };

/**
 * The task row's opening and state moves (a few milliseconds each, idempotent by their event keys): local
 * activities, so each runs inside the workflow task that asks for it. Per task that saves two activity
 * tasks, two workflow tasks and nine history events. Same timeout and retries as `TASK_STORE`; a worker
 * that dies mid-write has its workflow task retried elsewhere, which runs the write again.
 */
export const TASK_STORE_LOCAL: LocalActivityOptions = {
  startToCloseTimeout: TASK_STORE.startToCloseTimeout!,
  retry: TASK_STORE.retry!,
};

/** Consolidation's reads span a day of an agent's memory: a minute each. */
export const CONSOLIDATION_STORE: ActivityOptions = { ...STORE, startToCloseTimeout: '1 minute' };

/**
 * Mailbox and chat-turn bookkeeping: short writes on the path of every chat, so local activities (a
 * delivery is stored and triaged in one workflow task), retried quickly (at most 10 s apart).
 */
export const MAILBOX_STORE_LOCAL: LocalActivityOptions = {
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '10 seconds', maximumAttempts: 10 },
};

/** Replies to another agent's workflow go through the Temporal client: a regular activity, quick retries. */
export const MESSAGING: ActivityOptions = {
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', maximumInterval: '10 seconds', maximumAttempts: 10 },
};

/** Deleting a batch of old stream rows; the next hourly run picks up whatever a failed one left. */
export const STREAM_PRUNE: ActivityOptions = {
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute', maximumAttempts: 5 },
};

/** A heartbeat's LLM call: 3 retries from 3 s; a check-in that cannot reach a provider waits for the next tick. */
export const HEARTBEAT_LLM: ActivityOptions = {
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: LIVENESS,
  retry: {
    initialInterval: HEARTBEAT_RETRY_BASE_MS,
    backoffCoefficient: 2,
    maximumAttempts: HEARTBEAT_MAX_RETRIES + 1,
  },
};

/** A sub-agent's LLM call: 2 retries from 2 s; the parent gets the error and decides. */
export const SUBAGENT_LLM: ActivityOptions = {
  startToCloseTimeout: '20 minutes',
  heartbeatTimeout: LIVENESS,
  retry: {
    initialInterval: SUBAGENT_RETRY_BASE_MS,
    backoffCoefficient: 2,
    maximumAttempts: 1 + SUBAGENT_MAX_LLM_RETRIES,
  },
};

/**
 * An eval's bookkeeping (selection, forks made with their workspace copies, totals): patient like a
 * task's store work; heartbeating, so work a dead worker held is taken over within LIVENESS.
 */
export const EVAL_STORE: ActivityOptions = {
  ...TASK_STORE,
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: LIVENESS,
};
/**
 * Waiting for a fork to settle: as long as a task may take, heartbeating while it polls, so a dead
 * worker's wait is taken over within LIVENESS.
 */
export const EVAL_SETTLE: ActivityOptions = {
  startToCloseTimeout: '24 hours',
  heartbeatTimeout: LIVENESS,
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
};
/** Grading reads records and may ask the judge model: the LLM retry policy. */
export const EVAL_GRADE: ActivityOptions = { ...TASK_LLM, startToCloseTimeout: '10 minutes' };
