/**
 * The task graph's effects on Temporal: starting the workflow of a task an agent created, waking the
 * tasks that wait on one that finished, and cancelling what hangs off a cancelled task. Used by the
 * task tools and the `recordTaskState` activity (through the worker's client) and by the client library.
 */
import { type Client, WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import type { Kysely } from 'kysely';
import type { Database } from '../schema/database';
import {
  AgentIdSearchAttribute,
  dependenciesChangedSignal,
  TaskIdSearchAttribute,
  TaskStateSearchAttribute,
  taskWorkflowId,
} from '../workflows/contract';
import { cascadeTargets, waitingDependants } from './store/task-graph';

/** States whose entry wakes the dependants (a final state of the dependency). */
const WAKES_DEPENDANTS = new Set(['completed', 'failed', 'cancelled', 'rejected', 'archived']);
/** States whose entry cancels the subtasks and the tasks waiting on it. */
const CASCADES = new Set(['cancelled', 'rejected']);

/**
 * Starts `task-{taskId}`. Idempotent: a workflow already started under that id (a retried tool call)
 * is fine. The workflow reads the task row, so the row must be recorded first.
 */
export async function startTaskWorkflow(
  client: Client,
  taskQueue: string,
  task: { id: string; agentId: string; title: string },
): Promise<{ workflowId: string; started: boolean }> {
  const workflowId = taskWorkflowId(task.id);
  try {
    await client.workflow.start('taskWorkflow', {
      workflowId,
      taskQueue,
      args: [{ taskId: task.id, agentId: task.agentId }],
      typedSearchAttributes: [
        { key: AgentIdSearchAttribute, value: task.agentId },
        { key: TaskIdSearchAttribute, value: task.id },
        { key: TaskStateSearchAttribute, value: 'pending' },
      ],
      staticSummary: `${task.agentId}: ${task.title}`.slice(0, 200),
    });
    return { workflowId, started: true };
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return { workflowId, started: false };
    throw error;
  }
}

/**
 * After a task entered `state`: a final state wakes the tasks waiting on it (they re-read their
 * dependencies); cancelled or rejected also cancels its unfinished subtasks and its waiting dependants,
 * each of which does the same for its own (the cascade is recursive through the workflows). A workflow
 * that is gone is skipped. Retried with its activity; every step is safe to repeat.
 */
export async function propagateTaskState(db: Kysely<Database>, client: Client, taskId: string, state: string): Promise<{ woken: string[]; cancelled: string[] }> {
  const woken: string[] = [];
  const cancelled: string[] = [];
  if (CASCADES.has(state)) {
    for (const id of await cascadeTargets(db, taskId)) {
      if (await ignoreGone(client.workflow.getHandle(taskWorkflowId(id)).cancel())) cancelled.push(id);
    }
  }
  if (WAKES_DEPENDANTS.has(state)) {
    for (const id of await waitingDependants(db, taskId)) {
      if (cancelled.includes(id)) continue;
      if (await ignoreGone(client.workflow.getHandle(taskWorkflowId(id)).signal(dependenciesChangedSignal))) woken.push(id);
    }
  }
  return { woken, cancelled };
}

/** True when the call reached a running workflow; false when the workflow is gone (finished or never started). */
export async function ignoreGone(call: Promise<unknown>): Promise<boolean> {
  try {
    await call;
    return true;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return false;
    throw error;
  }
}
