import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import type { ChatMessage, ContentBlock, MessageKind } from '../llm/types';

export async function ensureSession(
  db: Kysely<Database>,
  session: { id: string; agentId: string; taskId?: string; kind: string },
): Promise<void> {
  await db
    .insertInto('sessions')
    .values({ id: session.id, agent_id: session.agentId, task_id: session.taskId ?? null, kind: session.kind })
    .onConflict((oc) => oc.column('id').doNothing())
    .execute();
}

/**
 * Appends a message under a caller-chosen key. The same key again is a no-op (returns false), which
 * is what makes a retried activity safe: it re-appends nothing.
 */
export async function appendMessage(
  db: Kysely<Database>,
  sessionId: string,
  idemKey: string,
  message: ChatMessage,
): Promise<boolean> {
  const inserted = await db
    .insertInto('messages')
    .values({
      session_id: sessionId,
      idem_key: idemKey,
      role: message.role,
      kind: message.kind ?? 'normal',
      content: JSON.stringify(message.content),
    })
    .onConflict((oc) => oc.columns(['session_id', 'idem_key']).doNothing())
    .returning('id')
    .executeTakeFirst();
  return inserted !== undefined;
}

export async function loadMessages(db: Kysely<Database>, sessionId: string): Promise<ChatMessage[]> {
  const rows = await db.selectFrom('messages').select(['role', 'kind', 'content']).where('session_id', '=', sessionId).orderBy('id').execute();
  return rows.map((r) => ({ role: r.role, kind: r.kind as MessageKind, content: r.content as ContentBlock[] }));
}

export async function findMessage(db: Kysely<Database>, sessionId: string, idemKey: string): Promise<ChatMessage | undefined> {
  const row = await db
    .selectFrom('messages')
    .select(['role', 'kind', 'content'])
    .where('session_id', '=', sessionId)
    .where('idem_key', '=', idemKey)
    .executeTakeFirst();
  return row ? { role: row.role, kind: row.kind as MessageKind, content: row.content as ContentBlock[] } : undefined;
}

export async function countMessages(db: Kysely<Database>, sessionId: string): Promise<number> {
  const row = await db
    .selectFrom('messages')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('session_id', '=', sessionId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}
