import { proxyActivities } from '@temporalio/workflow';
import { STREAM_PRUNE } from './activity-options';
import type { Activities } from '../activities';

const prune = proxyActivities<Activities>(STREAM_PRUNE);

/** Schedule id prefix of the deployment-wide stream pruning (`stream-prune-{taskQueue}`). */
export const STREAM_PRUNE_SCHEDULE_ID = 'stream-prune';
/** Activity calls per run: a huge backlog is cleared over a few scheduled runs instead of one long one. */
const STREAM_PRUNE_MAX_CALLS = 50;

export interface StreamPruneInput {
  retentionMs?: number;
  headRetentionMs?: number;
}

/**
 * Deletes run-stream rows past their retention, started hourly by the `stream-prune-{taskQueue}` Schedule that
 * the worker ensures at start. A deployment-wide schedule rather than a step of each agent's memory
 * consolidation: stream retention is an operator's storage concern, not an agent's, and must hold
 * even for agents whose consolidation is paused or never configured.
 */
export async function streamPruneWorkflow(input: StreamPruneInput = {}): Promise<{ events: number; heads: number }> {
  let events = 0;
  let heads = 0;
  for (let i = 0; i < STREAM_PRUNE_MAX_CALLS; i++) {
    const result = await prune.pruneStreamEvents(input);
    events += result.events;
    heads += result.heads;
    if (!result.more) break;
  }
  return { events, heads };
}
