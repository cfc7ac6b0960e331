import { patched, proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { TASK_STORE, TASK_STORE_LOCAL } from './activity-options';
import { TASK_STORE_LOCAL_PATCH } from './patches';

const remote = proxyActivities<Activities>(TASK_STORE);
const local = proxyLocalActivities<Activities>(TASK_STORE_LOCAL);

/**
 * The task row's own writes: its opening and its state moves. Runs recorded before 0.7.0 ran them as
 * activities and replay that way; new runs run them as local activities (`TASK_STORE_LOCAL`). `baseline`:
 * the run carries the release baseline, which takes the patch without asking it.
 */
export function taskRowStore(baseline: boolean): Pick<Activities, 'openTask' | 'recordTaskState'> {
  return baseline || patched(TASK_STORE_LOCAL_PATCH) ? local : remote;
}

/** A round's stop request, written while the task workflow's scope is being cancelled (a local activity). */
export const roundStopStore: Pick<Activities, 'recordRoundStop'> = local;
