import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import type { TaskState } from '../../workflows/rules/task-state';
import { withdrawPendingApprovals } from './approvals';
import { addTaskEvent, updateTaskState } from './tasks';

export interface TaskStateChange {
  taskId: string;
  state: TaskState;
  round: number;
  lastError?: string;
  eventKey: string;
}

/**
 * The task row's new state and its timeline event (idempotent by `eventKey`). Leaving for blocked,
 * cancelled or failed withdraws the attempt's undecided approval requests.
 */
export async function writeTaskState(db: Kysely<Database>, change: TaskStateChange): Promise<void> {
  await updateTaskState(db, change.taskId, change.state, { round: change.round, lastError: change.lastError ?? null });
  if (['blocked', 'cancelled', 'failed'].includes(change.state)) await withdrawPendingApprovals(db, change.taskId);
  await addTaskEvent(
    db,
    change.taskId,
    'state-changed',
    { state: change.state, round: change.round, error: change.lastError },
    change.eventKey,
  );
}

/** A blocked task's new reason to wait (a dependency failed or was cancelled): on its row and timeline. */
export async function writeTaskBlockers(
  db: Kysely<Database>,
  input: { taskId: string; message: string },
): Promise<void> {
  await db
    .updateTable('tasks')
    .set({ last_error: input.message, updated_at: new Date() })
    .where('id', '=', input.taskId)
    .execute();
  await addTaskEvent(db, input.taskId, 'blockers-changed', { message: input.message });
}

/** A human's approve/reject of a task an agent created (idempotent): approval clears the row's gate. */
export async function writeTaskApproval(
  db: Kysely<Database>,
  input: { taskId: string; approved: boolean; decidedBy?: string; comment?: string },
): Promise<void> {
  if (input.approved)
    await db
      .updateTable('tasks')
      .set({ needs_approval: false, updated_at: new Date() })
      .where('id', '=', input.taskId)
      .execute();
  await addTaskEvent(
    db,
    input.taskId,
    input.approved ? 'task-approved' : 'task-rejected',
    { decidedBy: input.decidedBy, comment: input.comment },
    'approval-gate',
  );
}
