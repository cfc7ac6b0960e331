import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import type { ChatMessage, ContentBlock, MessageKind } from '../llm/types';
import { storableDeep } from '../security/binary';

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
  const inserted = await appendMessageQuery(db, sessionId, idemKey, message).executeTakeFirst();
  return inserted !== undefined;
}

/**
 * `appendMessage`'s statement, not run: to combine it with other writes in one statement (one round
 * trip) as a data-modifying CTE. Returns the new row's id, or no row when the key existed.
 */
export function appendMessageQuery(db: Kysely<Database>, sessionId: string, idemKey: string, message: ChatMessage) {
  return db
    .insertInto('messages')
    .values({
      session_id: sessionId,
      idem_key: idemKey,
      role: message.role,
      kind: message.kind ?? 'normal',
      // A NUL or a lone surrogate from anyone (a comment, a tool result, a reply) would fail this write
      // on every retry of the step: stored escaped instead (idempotent on text already made storable).
      content: JSON.stringify(storableDeep(message.content)),
    })
    .onConflict((oc) => oc.columns(['session_id', 'idem_key']).doNothing())
    .returning('id');
}

export async function loadMessages(db: Kysely<Database>, sessionId: string): Promise<ChatMessage[]> {
  const rows = await db
    .selectFrom('messages')
    .select(['role', 'kind', 'content'])
    .where('session_id', '=', sessionId)
    .orderBy('id')
    .execute();
  return rows.map((r) => ({ role: r.role, kind: r.kind as MessageKind, content: r.content as ContentBlock[] }));
}

export async function findMessage(
  db: Kysely<Database>,
  sessionId: string,
  idemKey: string,
): Promise<ChatMessage | undefined> {
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

/** Sessions whose messages the worker keeps in memory (least recently used beyond this are dropped). */
export const SESSION_CACHE_MAX_SESSIONS = 512;
/** Characters of message content kept in memory across all cached sessions (~2 bytes each). */
export const SESSION_CACHE_MAX_CHARS = 64_000_000;

interface CachedSession {
  ids: string[];
  /** Each message's idempotency key, beside its id. */
  keys: string[];
  messages: ChatMessage[];
  chars: number;
}

/**
 * The messages of a session, loaded incrementally: the worker keeps each session's messages in memory
 * and reads only rows it has not seen. Messages are append-only, so a row once read never changes;
 * the id list comes back on every call, so a row that committed late with a lower id (a zombie
 * activity attempt) is still found. The returned message objects are the same from call to call, which
 * is what lets the token counter's per-object memo skip recounting the conversation, and they must not
 * be modified. A worker that restarts or evicts a session reads it whole once.
 */
export class SessionMessageCache {
  private readonly sessions = new Map<string, CachedSession>();
  private totalChars = 0;

  /** Whether this worker has loaded the session (so it exists in PostgreSQL). */
  has(sessionId: string): boolean {
    return this.sessions.has(sessionId);
  }

  async load(db: Kysely<Database>, sessionId: string): Promise<ChatMessage[]> {
    const cached = this.sessions.get(sessionId);
    const lastId = cached?.ids.at(-1) ?? '0';
    const rows = await db
      .selectFrom('messages')
      .select((eb) => [
        'id',
        'idem_key',
        'role',
        'kind',
        eb.case().when('id', '>', lastId).then(eb.ref('content')).else(null).end().as('content'),
      ])
      .where('session_id', '=', sessionId)
      .orderBy('id')
      .execute();
    const known = new Map<string, ChatMessage>();
    if (cached) for (const [i, id] of cached.ids.entries()) known.set(id, cached.messages[i]!);
    const missing = rows.filter((r) => r.content === null && !known.has(String(r.id))).map((r) => r.id);
    const late = new Map<string, unknown[]>();
    if (missing.length > 0) {
      for (const r of await db.selectFrom('messages').select(['id', 'content']).where('id', 'in', missing).execute())
        late.set(String(r.id), r.content);
    }
    const ids: string[] = [];
    const keys: string[] = [];
    const messages: ChatMessage[] = [];
    let chars = 0;
    for (const r of rows) {
      const id = String(r.id);
      let message = known.get(id);
      if (!message) {
        const content = (r.content ?? late.get(id) ?? []) as ContentBlock[];
        message = { role: r.role, kind: r.kind as MessageKind, content };
      }
      ids.push(id);
      keys.push(r.idem_key);
      messages.push(message);
      chars += messageChars(message);
    }
    this.remember(sessionId, { ids, keys, messages, chars });
    return messages;
  }

  /**
   * The message stored under `idemKey` as of this session's last `load` (what `findMessage` would have
   * read then), without a statement of its own; undefined when the session is not loaded or has none.
   */
  findLoaded(sessionId: string, idemKey: string): ChatMessage | undefined {
    const cached = this.sessions.get(sessionId);
    const i = cached?.keys.lastIndexOf(idemKey) ?? -1;
    return i >= 0 ? cached!.messages[i] : undefined;
  }

  private remember(sessionId: string, entry: CachedSession): void {
    const previous = this.sessions.get(sessionId);
    if (previous) {
      this.totalChars -= previous.chars;
      this.sessions.delete(sessionId);
    }
    this.sessions.set(sessionId, entry);
    this.totalChars += entry.chars;
    for (const [id, old] of this.sessions) {
      if (this.sessions.size <= SESSION_CACHE_MAX_SESSIONS && this.totalChars <= SESSION_CACHE_MAX_CHARS) break;
      if (id === sessionId) continue;
      this.sessions.delete(id);
      this.totalChars -= old.chars;
    }
  }
}

function messageChars(message: ChatMessage): number {
  let n = 0;
  for (const block of message.content)
    n +=
      block.type === 'text'
        ? block.text.length
        : block.type === 'tool_result'
          ? block.content.length + (block.images ?? []).reduce((sum, image) => sum + image.data.length, 0)
          : JSON.stringify(block.input ?? null).length;
  return n;
}
