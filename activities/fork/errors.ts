import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../../workflows/failure-types';

/** The stable failure type of a fork or eval that cannot be made from what was asked (never retried). */
export const INVALID_FORK = FailureType.InvalidFork;
export const INVALID_EVAL = FailureType.InvalidEval;

/** A fork that cannot be made: unknown task, a step past the end, malformed overrides. */
export class ForkError extends Error {
  readonly type = INVALID_FORK;
  constructor(message: string) {
    super(message);
    this.name = 'ForkError';
  }
}

/** An eval that cannot start: a candidate file that fails validation, a selection matching nothing. */
export class EvalError extends Error {
  readonly type = INVALID_EVAL;
  constructor(message: string) {
    super(message);
    this.name = 'EvalError';
  }
}

/** Across the activity boundary: the same message, non-retryable, with the stable type. */
export function asFailure(error: unknown): unknown {
  if (error instanceof ForkError || error instanceof EvalError)
    return ApplicationFailure.create({ type: error.type, message: error.message, nonRetryable: true });
  return error;
}
