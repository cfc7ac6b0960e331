import { ActivityFailure, ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../failure-types';

/**
 * Where a round's next fused step runs: as a regular activity (an activity task through the server:
 * six history events and a workflow task of its own) or as a local activity (run by the worker inside
 * the workflow task that asked for it: one marker event). Pure; the round workflow applies it.
 *
 * A local step is cheap but holds its workflow task open while it runs, and the server delivers
 * nothing to the workflow (signals, cancellation, a fresh history length) until that task completes.
 * So only a step that is likely quick runs locally, and a chain of them is cut after a few seconds:
 * - the first step of every run is regular;
 * - a step that follows one that took under LOCAL_STEP_MAX_MS runs locally;
 * - once the local steps in a row have taken LOCAL_STEP_CHAIN_MAX_MS, the next step is regular, and the
 *   workflow task completes at it, so whatever waited gets in.
 * A status read does not wait for the chain: the client reads a busy round's progress from the rows its
 * steps wrote (`recordedRoundProgress`).
 * A slow local step (a long answer after quick ones) is still stoppable: the round's stop request is
 * recorded in PostgreSQL and the step polls for it (ROUND_STOP_POLL_MS).
 */

/**
 * A step under this wall time makes the next one local. 5 s, not 1 s (0.8.0 and 0.9.0): on a saturated
 * worker a quick step waits for a slot, and at 1 s most steps of 200 tasks at once went back to regular
 * activities (0.7 per iteration; 0.2 at 5 s, and a third less Temporal CPU: docs/benchmarks.md). Under
 * the SDK's workflow-task heartbeat (80 % of the 10 s workflow-task timeout).
 */
export const LOCAL_STEP_MAX_MS = 5_000;
/** Local steps in a row run at most this long in all before a regular step lets waiting signals in. */
export const LOCAL_STEP_CHAIN_MAX_MS = 5_000;

export interface LocalStepBounds {
  stepMaxMs: number;
  chainMaxMs: number;
}
/** The bounds of runs started by 0.10.0 or later (LOCAL_STEP_BOUNDS_5S_PATCH). */
export const LOCAL_STEP_BOUNDS: LocalStepBounds = { stepMaxMs: LOCAL_STEP_MAX_MS, chainMaxMs: LOCAL_STEP_CHAIN_MAX_MS };
/** The bounds of runs recorded by 0.8.0 and 0.9.0, kept so that their histories replay. */
export const LOCAL_STEP_BOUNDS_0_8_0: LocalStepBounds = { stepMaxMs: 1_000, chainMaxMs: 1_000 };
/** How often a running local step checks whether its round was asked to stop (it has no heartbeat). */
export const ROUND_STOP_POLL_MS = 1_000;
/**
 * A local step stopped by a recorded request waits this long for the cancellation itself to reach
 * the round; past it (a request whose cancel never came), the step runs again as a regular activity.
 */
export const ROUND_STOP_GRACE_MS = 60_000;

export type StepKind = 'regular' | 'local';

export interface StepPlacement {
  kind: StepKind;
  /** Wall time of the local steps run in a row so far, ms. */
  chainMs: number;
}

/** A run's first step. */
export const FIRST_STEP_PLACEMENT: StepPlacement = { kind: 'regular', chainMs: 0 };

/**
 * Where the step after `previous` runs, given how long `previous` took (ms; unknown counts as slow).
 * `previous` is the placement `previous` ran with.
 */
export function nextStepPlacement(
  previous: StepPlacement,
  elapsedMs: number | undefined,
  bounds: LocalStepBounds = LOCAL_STEP_BOUNDS,
): StepPlacement {
  if (elapsedMs === undefined || elapsedMs >= bounds.stepMaxMs) return FIRST_STEP_PLACEMENT;
  const chainMs = previous.kind === 'local' ? previous.chainMs + elapsedMs : 0;
  if (chainMs >= bounds.chainMaxMs) return FIRST_STEP_PLACEMENT;
  return { kind: 'local', chainMs };
}

/** The idempotency key of a round attempt's stop request (one per round and attempt). */
export function roundStopKey(round: number, attempt: number): string {
  return `round-stop:${round}:${attempt}`;
}

/**
 * Whether a local step failed because its round was asked to stop (`RoundStopRequested`). The step's
 * failure usually reaches the round as an `ActivityFailure` with it as the cause, but not always: a
 * local step resolved in a workflow task after the SDK's workflow-task heartbeats (a step over 8 s)
 * has been seen to arrive as the bare failure (a CI run of task-lifecycle.test.ts, where the round
 * then failed instead of waiting for its cancellation). Both shapes count.
 */
export function isRoundStop(error: unknown): boolean {
  const failure = error instanceof ActivityFailure ? error.cause : error;
  return failure instanceof ApplicationFailure && failure.type === FailureType.RoundStopRequested;
}
