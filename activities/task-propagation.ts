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

/** States whose entry cancels the subtasks and the tasks waiting on it. */
const CASCADES = new Set(['cancelled', 'rejected']);

/**
 * Starts `task-{taskId}`. Idempotent: a workflow already started under that id (a retried tool call)
 * is fine. The workflow reads the task row, so the row must be recorded first.
 */
export async function startTaskWorkflow(
  client: Client,
  taskQueue: string,
  /** `costBudgetUsd`: the task's cost budget (a budget child's grant, store/task-budget.ts); absent: none. */
  task: { id: string; agentId: string; title: string; costBudgetUsd?: number },
): Promise<{ workflowId: string; started: boolean }> {
  const workflowId = taskWorkflowId(task.id);
  try {
    await client.workflow.start('taskWorkflow', {
      workflowId,
      taskQueue,
      args: [
        {
          taskId: task.id,
          agentId: task.agentId,
          ...(task.costBudgetUsd !== undefined ? { costBudgetUsd: task.costBudgetUsd } : {}),
        },
      ],
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

/** Who hears about a task's new state: the tasks to cancel and the tasks to wake. */
export interface Propagation {
  cancel: string[];
  wake: string[];
}

/**
 * Reads, before the state is written, who must hear about it: every new state wakes the tasks waiting
 * on this one (they re-read their dependencies: a final state may let them start, and any other one
 * changes what their `lastError` says they wait for, which must not lag until the periodic recheck);
 * cancelled or rejected also cancels its unfinished subtasks and its waiting dependants. Read first so
 * that a task with no graph around it costs nothing after its state is visible (the workflow closes
 * right after).
 */
export async function planPropagation(db: Kysely<Database>, taskId: string, state: string): Promise<Propagation> {
  const cancel = CASCADES.has(state) ? await cascadeTargets(db, taskId) : [];
  const wake = (await waitingDependants(db, taskId)).filter((id) => !cancel.includes(id));
  return { cancel, wake };
}

/**
 * Cancels and wakes, after the state was written. Each cancelled task does the same for its own
 * subtasks and dependants (the cascade is recursive through the workflows). A workflow that is gone is
 * skipped. Every step is safe to repeat (the activity may be retried).
 */
export async function applyPropagation(client: Client, plan: Propagation): Promise<void> {
  for (const id of plan.cancel) await ignoreGone(client.workflow.getHandle(taskWorkflowId(id)).cancel());
  for (const id of plan.wake)
    await ignoreGone(client.workflow.getHandle(taskWorkflowId(id)).signal(dependenciesChangedSignal));
}

/** Both steps, for callers that write the state themselves first (archive, a cancel without a workflow). */
export async function propagateTaskState(
  db: Kysely<Database>,
  client: Client,
  taskId: string,
  state: string,
): Promise<void> {
  await applyPropagation(client, await planPropagation(db, taskId, state));
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
