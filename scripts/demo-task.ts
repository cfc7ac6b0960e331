/**
 * The demo task `npm start` runs, and what a later start does with the one an earlier start made: one
 * still open is shown again rather than started twice; a finished one, or one the Temporal server no
 * longer knows (its state file was removed), is named and a new one starts.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import type { DatabaseHandle } from '../activities/store/db';
import type { AgentsClient } from '../client';
import { taskWorkflowId } from '../workflows/contract';
import { TERMINAL_STATES } from '../workflows/rules/task-state';

export const DEMO_AGENT_ID = 'scribe';
export const DEMO_TASK_TITLE = 'Plan a one-page guide to durable agents';
/** `created_by` of the demo's tasks: how a later start finds the one an earlier start made. */
export const DEMO_CREATOR = 'demo';

/**
 * The demo task an earlier start made: `open` (its workflow runs: show it, start none), `finished` (it
 * ended: a new one starts) or `forgotten` (the database says unfinished, but the Temporal server has no
 * such workflow: a new one starts).
 */
export interface EarlierDemoTask {
  id: string;
  /** The task's state; for a workflow closed outside the task's own transitions, Temporal's word (`terminated`). */
  state: string;
  kind: 'open' | 'finished' | 'forgotten';
}

/**
 * The newest unfinished demo task or, when none is, the newest finished one; undefined on a first start.
 * An unfinished one is looked for first so that an older duplicate (earlier versions started one per
 * start) is still found while it waits for review.
 */
export async function earlierDemoTask(
  client: AgentsClient,
  database: DatabaseHandle,
): Promise<EarlierDemoTask | undefined> {
  const newest = (unfinished: boolean) => {
    let query = database.db
      .selectFrom('tasks')
      .select(['id', 'state'])
      .where('agent_id', '=', DEMO_AGENT_ID)
      .where('created_by', '=', DEMO_CREATOR)
      .where('title', '=', DEMO_TASK_TITLE);
    if (unfinished) query = query.where('state', 'not in', [...TERMINAL_STATES]);
    return query.orderBy('created_at', 'desc').limit(1).executeTakeFirst();
  };
  const unfinished = await newest(true);
  if (!unfinished) {
    const finished = await newest(false);
    return finished && { id: finished.id, state: finished.state, kind: 'finished' };
  }
  try {
    const described = await client.temporal.workflow.getHandle(taskWorkflowId(unfinished.id)).describe();
    if (described.status.name !== 'RUNNING') {
      // Closed without the task recording an end (terminated from the Web UI, say): Temporal's word stands.
      return { id: unfinished.id, state: described.status.name.toLowerCase(), kind: 'finished' };
    }
  } catch (error) {
    if (error instanceof WorkflowNotFoundError)
      return { id: unfinished.id, state: unfinished.state, kind: 'forgotten' };
    throw error;
  }
  return { id: unfinished.id, state: (await client.getStatus(unfinished.id)).state, kind: 'open' };
}

/** What a start says about the demo task an earlier start made, before it shows or starts one. */
export function describeEarlierDemoTask(earlier: EarlierDemoTask, temporalAddress: string, taskLink: string): string {
  const which = `Task ${earlier.id}, started by an earlier \`npm start\``;
  switch (earlier.kind) {
    case 'open':
      return `${which}, is still open (${earlier.state}): shown here, not started again.`;
    case 'finished':
      return `${which}, is finished (${earlier.state}); its history: ${taskLink}\nStarting a new demo task.`;
    case 'forgotten':
      return `${which}, is unknown to the Temporal server at ${temporalAddress} (its state was reset).\nStarting a new demo task.`;
  }
}
