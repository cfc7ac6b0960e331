import { ApplicationFailure } from '@temporalio/common';
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { FailureType } from '../../workflows/failure-types';
import { ROUND_STOP_POLL_MS, roundStopKey } from '../../workflows/rules/step-placement';
import { addTaskEvent } from '../store/tasks';
import { withStopSignal } from './activity-context';

/** The task event that records a round attempt's stop request (a pause or a cancel). */
export const ROUND_STOP_EVENT = 'round-stop-requested';

/** Records that a round attempt is being stopped; idempotent by its `roundStopKey`. */
export async function recordRoundStop(
  db: Kysely<Database>,
  input: { taskId: string; round: number; attempt: number; reason: 'pause' | 'cancel' },
): Promise<void> {
  const { taskId, ...data } = input;
  await addTaskEvent(db, taskId, ROUND_STOP_EVENT, data, roundStopKey(input.round, input.attempt));
}

/**
 * Runs a local step so that its round's stop request stops it: every ROUND_STOP_POLL_MS it looks for
 * the request, and once found aborts the provider call or tool it is in, then fails with the
 * non-retryable `RoundStopRequested`. A regular step needs none of this: its heartbeat carries the
 * cancellation.
 */
export async function stoppableStep<T>(
  db: Kysely<Database>,
  stop: { taskId: string; stopKey: string },
  work: () => Promise<T>,
): Promise<T> {
  const controller = new AbortController();
  let polling = false;
  const poll = setInterval(() => {
    if (polling || controller.signal.aborted) return;
    polling = true;
    void db
      .selectFrom('task_events')
      .select('id')
      .where('task_id', '=', stop.taskId)
      .where('idem_key', '=', stop.stopKey)
      .executeTakeFirst()
      .then((found) => found && controller.abort())
      // A failed poll is retried at the next tick; the step itself is unaffected.
      .catch(() => undefined)
      .finally(() => (polling = false));
  }, ROUND_STOP_POLL_MS);
  try {
    return await withStopSignal(controller.signal, work);
  } catch (error) {
    if (!controller.signal.aborted) throw error;
    throw ApplicationFailure.create({
      message: 'the round was asked to stop (pause or cancel) while this step ran',
      type: FailureType.RoundStopRequested,
      nonRetryable: true,
      cause: error instanceof Error ? error : undefined,
    });
  } finally {
    clearInterval(poll);
  }
}
