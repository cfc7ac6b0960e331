import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { appendStreamEvents, pruneStreams } from './store';

/**
 * Stream rows are kept this long: long enough for a client to reconnect after a laptop sleeps or a
 * deploy, short enough that a busy agent's token stream does not grow the database for ever (the
 * durable record of an answer is the session's messages, not its stream).
 */
export const STREAM_RETENTION_MS = 24 * 60 * 60_000;
/** Heads (one small row per stream) outlive their rows, so a stream that wakes up never reuses a number. */
export const STREAM_HEAD_RETENTION_MS = 30 * 24 * 60 * 60_000;
/** Rows deleted per statement: short transactions, no long locks on a hot table. */
export const STREAM_PRUNE_BATCH = 5_000;
/** Batches per activity call: the activity stays well inside its timeout; the workflow calls again. */
export const STREAM_PRUNE_BATCHES_PER_CALL = 20;

export function createStreamActivities(deps: { db: Kysely<Database> }) {
  const { db } = deps;
  return {
    /**
     * Appends a run event (`event`) or the end marker (`end`) to a stream. At least once: a retried
     * call may append it twice, which a client folding the stream tolerates (`end` is idempotent).
     */
    async publishStreamEvent(input: {
      streamId: string;
      agentId?: string;
      taskId?: string;
      kind: 'event' | 'end';
      data: Record<string, unknown>;
    }): Promise<{ seq: number }> {
      const [seq] = await appendStreamEvents(
        db,
        { streamId: input.streamId, agentId: input.agentId, taskId: input.taskId },
        [{ kind: input.kind, data: input.data }],
      );
      return { seq: seq! };
    },

    /** Deletes stream rows past their retention (see STREAM_RETENTION_MS); `more` when a backlog remains. */
    async pruneStreamEvents(
      input: { retentionMs?: number; headRetentionMs?: number } = {},
    ): Promise<{ events: number; heads: number; more: boolean }> {
      const now = Date.now();
      return pruneStreams(db, {
        olderThan: new Date(now - (input.retentionMs ?? STREAM_RETENTION_MS)),
        headsOlderThan: new Date(now - (input.headRetentionMs ?? STREAM_HEAD_RETENTION_MS)),
        batchSize: STREAM_PRUNE_BATCH,
        maxBatches: STREAM_PRUNE_BATCHES_PER_CALL,
      });
    },
  };
}
