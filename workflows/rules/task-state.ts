/**
 * The task state machine: one transition table, enforced by the task workflow.
 * Pure: imported by workflows, activities and tests.
 */
import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../failure-types';

export const TASK_STATES = [
  'pending',
  'in_progress',
  'blocked',
  'review',
  'completed',
  'failed',
  'rejected',
  'cancelled',
  'archived',
] as const;
export type TaskState = (typeof TASK_STATES)[number];

/**
 * Allowed transitions: the design's documented table, plus pending → cancelled (a task cancelled before
 * it starts; the reference code allows it too). `archived` is terminal.
 */
export const TASK_TRANSITIONS: Readonly<Record<TaskState, readonly TaskState[]>> = {
  pending: ['in_progress', 'blocked', 'rejected', 'cancelled'],
  in_progress: ['review', 'blocked', 'failed', 'cancelled'],
  blocked: ['in_progress', 'cancelled'],
  review: ['completed', 'in_progress', 'cancelled'],
  failed: ['in_progress', 'archived'],
  completed: ['archived'],
  rejected: ['archived'],
  cancelled: ['in_progress', 'archived'],
  archived: [],
};

/** States in which the task's workflow has nothing left to do. */
export const TERMINAL_STATES: readonly TaskState[] = ['completed', 'failed', 'rejected', 'cancelled', 'archived'];

export const INVALID_TRANSITION_ERROR = FailureType.InvalidTaskTransition;

/**
 * An illegal move in the transition table. An `ApplicationFailure` (non-retryable, type
 * `InvalidTaskTransition`), so thrown inside a workflow it fails the workflow at once; a plain `Error`
 * would fail only the workflow task, which Temporal retries forever and the task would hang.
 */
export class InvalidTaskTransitionError extends ApplicationFailure {
  constructor(
    readonly from: TaskState,
    readonly to: TaskState,
  ) {
    super(
      `illegal task transition ${from} → ${to}; allowed from ${from}: ${TASK_TRANSITIONS[from].join(', ') || 'none (terminal)'}`,
      INVALID_TRANSITION_ERROR,
      true,
      [{ from, to }],
    );
  }
}

export function canTransition(from: TaskState, to: TaskState): boolean {
  return TASK_TRANSITIONS[from].includes(to);
}

/** Returns `to`, or throws `InvalidTaskTransitionError` naming the allowed targets. */
export function transition(from: TaskState, to: TaskState): TaskState {
  if (!canTransition(from, to)) throw new InvalidTaskTransitionError(from, to);
  return to;
}

export function isTerminal(state: TaskState): boolean {
  return TERMINAL_STATES.includes(state);
}
