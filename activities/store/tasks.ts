import { ApplicationFailure } from '@temporalio/common';
import type { Kysely } from 'kysely';
import type { Database, TaskRow } from '../../schema/database';
import { TaskFailureType, type TaskPriority } from '../../workflows/contract';
import type { TaskState } from '../../workflows/rules/task-state';
import { unknownAgent } from '../errors';
import { findAgent } from './agents';
import { storableDeep } from '../security/binary';

export async function findTask(db: Kysely<Database>, taskId: string): Promise<TaskRow | undefined> {
  return db.selectFrom('tasks').selectAll().where('id', '=', taskId).executeTakeFirst();
}

export async function getTask(db: Kysely<Database>, taskId: string): Promise<TaskRow> {
  const task = await findTask(db, taskId);
  if (!task) throw new Error(`task ${taskId} does not exist`);
  return task;
}

/**
 * Records a task event. With `idemKey`, a retried write of the same event is a no-op, so activity
 * retries never duplicate the task's timeline.
 */
export async function addTaskEvent(
  db: Kysely<Database>,
  taskId: string,
  type: string,
  data: Record<string, unknown> = {},
  idemKey?: string,
): Promise<void> {
  await taskEventInsert(db, taskId, type, data, idemKey).execute();
}

/** `addTaskEvent`'s statement, not run (to combine it with other writes in one statement). */
export function taskEventInsert(
  db: Kysely<Database>,
  taskId: string,
  type: string,
  data: Record<string, unknown> = {},
  idemKey?: string,
) {
  return (
    db
      .insertInto('task_events')
      // Event data quotes people and models (comments, approval notes, errors): stored escaped, never refused.
      .values({ task_id: taskId, type, data: JSON.stringify(storableDeep(data)), idem_key: idemKey ?? null })
      .onConflict((oc) => oc.columns(['task_id', 'idem_key']).doNothing())
  );
}

export async function updateTaskState(
  db: Kysely<Database>,
  taskId: string,
  state: TaskState,
  extra: { round?: number; lastError?: string | null; resultSummary?: string } = {},
): Promise<void> {
  const terminal = ['completed', 'failed', 'rejected', 'cancelled', 'archived'].includes(state);
  await db
    .updateTable('tasks')
    .set({
      state,
      updated_at: new Date(),
      ...(extra.round !== undefined ? { round: extra.round } : {}),
      ...(extra.lastError !== undefined ? { last_error: extra.lastError } : {}),
      ...(extra.resultSummary !== undefined ? { result_summary: extra.resultSummary } : {}),
      ...(terminal ? { completed_at: new Date() } : {}),
    })
    .where('id', '=', taskId)
    .execute();
}

export interface RecordTaskInput {
  taskId: string;
  agentId: string;
  title?: string;
  description?: string;
  priority?: TaskPriority;
  createdBy?: string;
}

/**
 * Records a task from its workflow's input: inserts the row (state `pending`) and a `task-created`
 * event unless the task exists, so a retried activity or a second start of the same task id writes
 * nothing more. Refusals are non-retryable `ApplicationFailure`s with a stable type: `UnknownAgent`;
 * `InvalidTaskInput` when the row must be created and there is no title; `TaskConflict` when the id
 * belongs to another agent's task.
 */
export async function recordTask(
  db: Kysely<Database>,
  input: RecordTaskInput,
): Promise<{ task: TaskRow; created: boolean }> {
  const existing = await findTask(db, input.taskId);
  if (existing) {
    if (input.agentId && existing.agent_id !== input.agentId) {
      throw ApplicationFailure.create({
        type: TaskFailureType.taskConflict,
        message: `task ${JSON.stringify(input.taskId)} belongs to agent ${JSON.stringify(existing.agent_id)}, not ${JSON.stringify(input.agentId)}: use a new task id`,
        nonRetryable: true,
      });
    }
    return { task: existing, created: false };
  }
  const agent = await findAgent(db, input.agentId);
  if (!agent) throw unknownAgent(input.agentId);
  const title = input.title?.trim();
  if (!title) {
    throw ApplicationFailure.create({
      type: TaskFailureType.invalidInput,
      message: `task ${JSON.stringify(input.taskId)} does not exist yet and the input has no title: pass { taskId, agentId, title, description? }`,
      nonRetryable: true,
    });
  }
  const inserted = await db
    .insertInto('tasks')
    .values({
      id: input.taskId,
      agent_id: agent.id,
      title,
      description: input.description ?? title,
      state: 'pending',
      priority: input.priority ?? 'medium',
      created_by: input.createdBy ?? null,
    })
    .onConflict((oc) => oc.column('id').doNothing())
    .returningAll()
    .executeTakeFirst();
  await addTaskEvent(
    db,
    input.taskId,
    'task-created',
    { title, agentId: agent.id, createdBy: input.createdBy ?? null },
    'created',
  );
  // Lost a race with a concurrent start of the same id: the other writer's row is the task.
  return inserted ? { task: inserted, created: true } : recordTask(db, input);
}
