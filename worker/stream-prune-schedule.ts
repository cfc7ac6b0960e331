import { Client, Connection, ScheduleAlreadyRunning, ScheduleOverlapPolicy } from '@temporalio/client';
import { STREAM_PRUNE_SCHEDULE_ID } from '../workflows/stream-prune';

/** Pruning runs this often: rows outlive their retention by at most this much. */
export const STREAM_PRUNE_INTERVAL = '1 hour';

/** One schedule per task queue: `stream-prune-agents` for the default queue. */
export const streamPruneScheduleId = (taskQueue: string): string => `${STREAM_PRUNE_SCHEDULE_ID}-${taskQueue}`;

/**
 * Creates the `stream-prune-{taskQueue}` Schedule unless it exists (idempotent; every worker calls it at start,
 * so no deployment forgets it). An operator may pause or retune it in the Web UI; that is kept.
 */
export async function ensureStreamPruneSchedule(options: {
  address: string;
  namespace: string;
  taskQueue: string;
  scheduleId?: string;
}): Promise<void> {
  const connection = await Connection.connect({ address: options.address });
  try {
    const client = new Client({ connection, namespace: options.namespace });
    await client.schedule
      .create({
        scheduleId: options.scheduleId ?? streamPruneScheduleId(options.taskQueue),
        spec: { intervals: [{ every: STREAM_PRUNE_INTERVAL }] },
        policies: { overlap: ScheduleOverlapPolicy.SKIP },
        action: {
          type: 'startWorkflow',
          workflowType: 'streamPruneWorkflow',
          args: [{}],
          taskQueue: options.taskQueue,
          workflowId: options.scheduleId ?? streamPruneScheduleId(options.taskQueue),
        },
      })
      .catch((error: unknown) => {
        if (!(error instanceof ScheduleAlreadyRunning)) throw error;
      });
  } finally {
    await connection.close();
  }
}
