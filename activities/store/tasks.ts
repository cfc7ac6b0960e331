import type { Kysely } from 'kysely';
import type { Database, TaskRow } from '../../schema/database';
import type { TaskState } from '../../workflows/rules/task-state';

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
  await db
    .insertInto('task_events')
    .values({ task_id: taskId, type, data: JSON.stringify(data), idem_key: idemKey ?? null })
    .onConflict((oc) => oc.columns(['task_id', 'idem_key']).doNothing())
    .execute();
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
