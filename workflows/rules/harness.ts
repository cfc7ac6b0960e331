/**
 * The task-execution harness rules, as pure functions and
 * named constants. The round workflow applies them; tests pin them.
 */
import { reflectionCheckpointText, reminderText } from '../../prompts/task';

/** Inject `[SYSTEM REMINDER]` to call task_submit_review every this many tool iterations. */
export const TASK_REMINDER_EVERY_TOOL_ITERATIONS = 10;
/** Inject `[REFLECTION CHECKPOINT]` (save insights) every this many tool iterations. */
export const REFLECTION_CHECKPOINT_EVERY_TOOL_ITERATIONS = 30;
/** After the one final critical reminder, this many no-submit retries before the task fails. */
export const TASK_MAX_NO_SUBMIT_RETRIES = 8;
/** Round attempts after transient failures before the task fails (up to 8 retries). */
export const TASK_MAX_TRANSIENT_ROUND_RETRIES = 8;
/** First delay before retrying a round after a transient failure (30 s, growing to 10 min). */
export const TASK_TRANSIENT_RETRY_FIRST_DELAY_MS = 30_000;
/** Cap of the round retry delay: a task waits at most this long between attempts. */
export const TASK_TRANSIENT_RETRY_MAX_DELAY_MS = 10 * 60_000;
/** Safety cap for chat-like scenarios; task execution has none (it runs until the agent submits for review, with reminders on the way). */
export const CHAT_MAX_TOOL_ITERATIONS = 200;
/** Heartbeat tool-iteration cap (the reference code's value). */
export const HEARTBEAT_MAX_TOOL_ITERATIONS = 30;
/** Tool results larger than this are offloaded to PostgreSQL with a preview (ARCHITECTURE §4). */
export const TOOL_RESULT_OFFLOAD_CHARS = 50_000;
/** How much of an offloaded result the model sees inline (the reference code's preview). */
export const TOOL_RESULT_PREVIEW_CHARS = 2_000;
/** How long a tool call waits for a human approval before it is treated as rejected. */
export const DEFAULT_APPROVAL_TIMEOUT_MS = 24 * 60 * 60_000;
/**
 * A round continues as new when Temporal suggests it or when its run's history reaches this many
 * events, whichever comes first: a worker that picks the round up after a restart or a cache eviction
 * replays the whole run, and 2,000 events replay in well under a second (Temporal's own suggestion
 * comes at ~4K events, its warning at 10K, its hard limit at 51,200).
 */
export const ROUND_MAX_HISTORY_EVENTS_PER_RUN = 2_000;
/** The task workflow continues as new (between rounds, or while waiting for review) past this many events. */
export const TASK_MAX_HISTORY_EVENTS_PER_RUN = 5_000;

/** Harness injections due after a tool iteration. */
export function injectionsAfterToolIteration(taskId: string, toolIterations: number): string[] {
  const out: string[] = [];
  if (toolIterations > 0 && toolIterations % TASK_REMINDER_EVERY_TOOL_ITERATIONS === 0) {
    out.push(reminderText(taskId, toolIterations));
  }
  if (toolIterations > 0 && toolIterations % REFLECTION_CHECKPOINT_EVERY_TOOL_ITERATIONS === 0) {
    out.push(reflectionCheckpointText(toolIterations));
  }
  return out;
}

/**
 * The fused loop reports to its task workflow only when its phase changes for a human: the first
 * report, and approval requests and decisions (forced). Per-iteration signals would add a workflow
 * task to the parent for every few iterations; the round's own current details stay live.
 */
export function phaseReportDue(lastReportedIteration: number | undefined, force = false): boolean {
  return force || lastReportedIteration === undefined;
}

/** Whether a run with this history should continue as new (Temporal's suggestion or our own bound). */
export function shouldContinueAsNew(
  info: { continueAsNewSuggested: boolean; historyLength: number },
  maxEvents: number,
): boolean {
  return info.continueAsNewSuggested || info.historyLength >= maxEvents;
}

/** Delay before the n-th (1-based) transient round retry: 30 s doubling, capped at 10 min. */
export function transientRetryDelayMs(attempt: number): number {
  return Math.min(
    TASK_TRANSIENT_RETRY_FIRST_DELAY_MS * 2 ** Math.max(0, attempt - 1),
    TASK_TRANSIENT_RETRY_MAX_DELAY_MS,
  );
}
