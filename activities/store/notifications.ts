/**
 * The humans' notification inbox: what agents tell people with `notify_user`, and the questions they
 * ask with `request_user_approval` where nobody waits for the answer (outside a task). Every row has
 * a read state; the client and the CLI list and mark them.
 */
import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database, NotificationRow } from '../../schema/database';
import type { NotificationPriority } from '../../workflows/rules/priority';

/** A listing shows at most this many rows (newest first); older ones stay in the table. */
export const NOTIFICATIONS_LIST_MAX = 200;
/** Notification titles longer than this are cut (the body keeps the whole text). */
export const NOTIFICATION_TITLE_CHARS = 120;

export type { NotificationPriority } from '../../workflows/rules/priority';

export interface NewNotification {
  agentId: string;
  taskId?: string;
  kind: 'notification' | 'approval_request';
  title?: string;
  body: string;
  priority?: NotificationPriority;
  options?: string[];
}

/** The id of the notification a tool call writes: a retried call finds its own row. */
export function notificationId(sessionId: string, toolCallId: string): string {
  return `ntf_${createHash('sha256').update(`${sessionId}\0${toolCallId}`).digest('hex').slice(0, 24)}`;
}

/** Stores a notification once per id; returns the stored row. */
export async function storeNotification(
  db: Kysely<Database>,
  id: string,
  n: NewNotification,
): Promise<NotificationRow> {
  const title = (n.title?.trim() || n.body.split('\n')[0]!).slice(0, NOTIFICATION_TITLE_CHARS);
  await db
    .insertInto('notifications')
    .values({
      id,
      agent_id: n.agentId,
      task_id: n.taskId ?? null,
      kind: n.kind,
      title,
      body: n.body,
      priority: n.priority ?? 'normal',
      options: n.options?.length ? JSON.stringify(n.options) : null,
    })
    .onConflict((oc) => oc.column('id').doNothing())
    .execute();
  return db.selectFrom('notifications').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
}

export interface NotificationFilter {
  agentId?: string;
  unreadOnly?: boolean;
  limit?: number;
}

export async function listNotifications(
  db: Kysely<Database>,
  filter: NotificationFilter = {},
): Promise<NotificationRow[]> {
  let query = db.selectFrom('notifications').selectAll().orderBy('created_at', 'desc').orderBy('id');
  if (filter.agentId) query = query.where('agent_id', '=', filter.agentId);
  if (filter.unreadOnly) query = query.where('read_at', 'is', null);
  return query.limit(Math.min(filter.limit ?? NOTIFICATIONS_LIST_MAX, NOTIFICATIONS_LIST_MAX)).execute();
}

/** Marks notifications read (already-read ones keep their first reader); returns how many changed. */
export async function markNotificationsRead(db: Kysely<Database>, ids: string[], readBy?: string): Promise<number> {
  if (!ids.length) return 0;
  const result = await db
    .updateTable('notifications')
    .set({ read_at: new Date(), read_by: readBy ?? null })
    .where('id', 'in', ids)
    .where('read_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}
