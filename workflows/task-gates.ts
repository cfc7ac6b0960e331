/**
 * The start of a task workflow: its row recorded from the input, then the start gates passed before
 * its first round (a human's approval for a task an agent created, where the creator's config asks for
 * it, then its dependencies). Deterministic workflow code; the task row and the graph are read and
 * written through activities.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  condition,
  log,
  patched,
  proxyActivities,
  setHandler,
} from '@temporalio/workflow';
import { TASK_STORE } from './activity-options';
import type { Activities } from '../activities';
import type { StartGates } from '../activities/store/task-graph';
import {
  dependenciesChangedSignal,
  TaskFailureType,
  taskApprovalSignal,
  type TaskApprovalDecision,
  type TaskWorkflowInput,
} from './contract';
import { DEPENDENCY_RECHECK_INTERVAL_MS } from './rules/task-graph';
import { isTerminal, type TaskState } from './rules/task-state';
import { DEPENDENCY_WAKE_KEPT_PATCH } from './patches';
import type { TaskRun } from './task-run';
import { taskRowStore } from './task-store';

const store = proxyActivities<Activities>(TASK_STORE);

/**
 * Records the task row from the input (idempotent by task id) and loads what the workflow needs. A
 * non-retryable refusal (unknown agent, malformed input, a task id that already ran) ends the
 * workflow failed with the same stable type and message, so any client sees why. A carried run
 * (continue-as-new, retry, rerun) may find its task in any state.
 */
export async function recordTask(
  input: TaskWorkflowInput,
  taskId: string,
  carried: boolean,
): ReturnType<Activities['loadTaskContext']> {
  let context: Awaited<ReturnType<Activities['loadTaskContext']>>;
  try {
    context = await store.loadTaskContext(recordInput(input, taskId));
  } catch (error) {
    throw refusal(error);
  }
  checkNotEnded(context, taskId, carried);
  return context;
}

/**
 * `recordTask` for a fresh task, with its start folded into the same activity: when the row is
 * pending and no gate holds it, the activity also records the move to `in_progress` for `start.round`
 * (`started`); otherwise it returns the gates it read, for `passStartGates`. Same refusals as `recordTask`.
 * `baseline`: the run carries the release baseline (`TaskRun.baseline`).
 */
export async function openTask(
  input: TaskWorkflowInput,
  taskId: string,
  start: { round: number; attempt: number },
  baseline: boolean,
): ReturnType<Activities['openTask']> {
  let opened: Awaited<ReturnType<Activities['openTask']>>;
  try {
    opened = await taskRowStore(baseline).openTask({
      ...recordInput(input, taskId),
      start: { round: start.round, eventKey: `state:${start.round}:${start.attempt}:in_progress` },
    });
  } catch (error) {
    throw refusal(error);
  }
  checkNotEnded(opened.context, taskId, false);
  return opened;
}

function recordInput(input: TaskWorkflowInput, taskId: string) {
  return {
    taskId,
    agentId: input.agentId,
    title: input.title,
    description: input.description,
    priority: input.priority,
    createdBy: input.createdBy,
    ...(input.fork ? { fork: input.fork } : {}),
  };
}

/** A non-retryable refusal of the activity becomes the workflow's own failure, with the same type and message. */
function refusal(error: unknown): unknown {
  const cause = error instanceof ActivityFailure ? error.cause : undefined;
  if (cause instanceof ApplicationFailure && cause.nonRetryable) {
    return ApplicationFailure.create({
      type: cause.type ?? TaskFailureType.invalidInput,
      message: cause.message,
      nonRetryable: true,
    });
  }
  return error;
}

function checkNotEnded(context: { state?: string }, taskId: string, carried: boolean): void {
  // Histories recorded before tasks recorded themselves have no `state` here.
  if (!carried && context.state && isTerminal(context.state as TaskState)) {
    throw ApplicationFailure.create({
      type: TaskFailureType.taskConflict,
      message: `task ${JSON.stringify(taskId)} already ended (${context.state}); a task id runs once: start a new task`,
      nonRetryable: true,
    });
  }
}

/**
 * Waits until the task may start. Returns `rejected` when a human rejected it (the task is then
 * `rejected`), else `start` once it is approved (if it had to be) and every dependency completed.
 *
 * While a dependency is unfinished the task is `blocked`; the `dependenciesChanged` signal (sent when a
 * dependency reaches a final state) makes it re-read them, and it re-reads them every
 * DEPENDENCY_RECHECK_INTERVAL_MS anyway, so a lost signal delays the start but never loses it. A failed
 * or cancelled dependency keeps the task blocked (its error says which): a human retries the dependency,
 * or cancels this task. `resume` starts a blocked task without waiting (a human's override).
 */
export async function passStartGates(run: TaskRun, read?: StartGates): Promise<'start' | 'rejected'> {
  let approval: TaskApprovalDecision | undefined;
  let changed = false;
  setHandler(taskApprovalSignal, (decision) => {
    if (decision?.decision !== 'approve' && decision?.decision !== 'reject') {
      log.warn(`taskApproval ignored: decision must be 'approve' or 'reject'`);
      return;
    }
    approval ??= decision;
  });
  setHandler(dependenciesChangedSignal, () => {
    changed = true;
  });

  // `read`: the gates `openTask` read just before (not read again).
  let gates = read ?? (await store.taskStartGates({ taskId: run.taskId }));
  if (gates.awaitApproval) {
    run.setPhase('awaiting-approval');
    await condition(() => approval !== undefined);
    await store.recordTaskApproval({
      taskId: run.taskId,
      approved: approval!.decision === 'approve',
      decidedBy: approval!.decidedBy,
      comment: approval!.comment,
    });
    if (approval!.decision === 'reject') {
      await run.moveTo('rejected', approval!.comment ? `rejected: ${approval!.comment}` : 'rejected by a human');
      return 'rejected';
    }
    run.setPhase('starting');
    gates = await store.taskStartGates({ taskId: run.taskId });
  }
  run.resumeRequested = false; // a resume sent before the task was blocked is not an override
  let reason = '';
  const wakeKept =
    gates.blockedBy.length > 0 && (run.upFront?.dependencyWakeKept ?? patched(DEPENDENCY_WAKE_KEPT_PATCH));
  while (gates.blockedBy.length > 0) {
    const waitingFor = `waiting for ${gates.blockedBy.map((d) => `${d.id} (${d.state})`).join(', ')}`;
    if (run.state !== 'blocked') {
      run.setPhase('paused');
      await run.moveTo('blocked', waitingFor);
    } else if (waitingFor !== reason) {
      // Still blocked, for a new reason (a dependency failed or was cancelled): say so.
      run.lastError = waitingFor;
      await store.recordTaskBlockers({ taskId: run.taskId, message: waitingFor });
    }
    reason = waitingFor;
    if (!wakeKept) changed = false;
    await condition(() => changed || run.resumeRequested, DEPENDENCY_RECHECK_INTERVAL_MS);
    if (run.resumeRequested) {
      run.resumeRequested = false;
      break;
    }
    // Cleared before the read: a wake that arrives while it (or the blockers' record) runs is kept.
    if (wakeKept) changed = false;
    gates = await store.taskStartGates({ taskId: run.taskId });
  }
  run.setPhase('starting');
  return 'start';
}
