import { createHash, randomUUID } from 'node:crypto';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../schema/database';
import {
  NOTEBOOK_KEY_MAX_CHARS,
  NOTEBOOK_MAX_AGENT_ENTRIES,
  NOTEBOOK_MAX_CHARS_PER_ENTRY,
  OBSERVATION_MAX_CHARS,
  OBSERVATIONS_MAX,
  type NotebookTag,
  type ObservationType,
} from '../../workflows/rules/memory-limits';

/**
 * Per-agent memory in PostgreSQL: the notebook (situational scratchpad), the observation
 * buffer (append-only facts, searched but never injected) and daily logs (audit only); curated
 * knowledge sections are in `knowledge-store.ts`. Every limit is enforced here, inside
 * the write's transaction, with the agent's row locked so concurrent writers cannot overshoot a cap.
 */

export type Db = Kysely<Database> | Transaction<Database>;

/** A write refused because it breaks a memory limit; the message tells the model what to do instead. */
export class MemoryLimitError extends Error {
  readonly type = 'MemoryLimit';
  constructor(message: string) {
    super(message);
    this.name = 'MemoryLimitError';
  }
}

export interface NotebookEntry {
  key: string;
  content: string;
  tag: NotebookTag;
  updatedAt: Date;
}

export interface KnowledgeSection {
  title: string;
  content: string;
}

export interface Observation {
  id: string;
  type: string;
  tags: string[];
  content: string;
  createdAt: Date;
}

/** Serialises memory writes of one agent (caps are checked and enforced under this lock). */
export async function lockAgent(trx: Transaction<Database>, agentId: string): Promise<void> {
  const row = await trx.selectFrom('agents').select('id').where('id', '=', agentId).forUpdate().executeTakeFirst();
  if (!row) throw new MemoryLimitError(`unknown agent ${agentId}`);
}

// ---- notebook ----------------------------------------------------------------------------------

/**
 * Upserts a notebook entry. Agent entries are capped at 6,000 characters (refused beyond) and 15 per
 * agent (the least recently updated are evicted); system and cpp entries are the runtime's and unbounded.
 * An agent cannot overwrite a runtime-managed key.
 */
export async function upsertNotebookEntry(
  db: Kysely<Database>,
  agentId: string,
  entry: { key: string; content: string; tag?: NotebookTag },
): Promise<{ created: boolean; evicted: string[] }> {
  const tag = entry.tag ?? 'agent';
  const key = entry.key.trim();
  if (!key || key.length > NOTEBOOK_KEY_MAX_CHARS)
    throw new MemoryLimitError(`a notebook key must be 1–${NOTEBOOK_KEY_MAX_CHARS} characters`);
  if (tag === 'agent' && entry.content.length > NOTEBOOK_MAX_CHARS_PER_ENTRY) {
    throw new MemoryLimitError(
      `notebook entry "${key}" has ${entry.content.length} characters; the limit is ${NOTEBOOK_MAX_CHARS_PER_ENTRY}. ` +
        `Keep the notebook to short notes; save durable facts with memory_save or curated knowledge with memory_update.`,
    );
  }
  return db.transaction().execute(async (trx) => {
    await lockAgent(trx, agentId);
    const existing = await trx
      .selectFrom('memory_notebook')
      .select('tag')
      .where('agent_id', '=', agentId)
      .where('key', '=', key)
      .executeTakeFirst();
    if (existing && existing.tag !== tag && tag === 'agent') {
      throw new MemoryLimitError(
        `notebook entry "${key}" is managed by the ${existing.tag} runtime; choose another key`,
      );
    }
    // clock_timestamp (µs, advances within a transaction) keeps "oldest first" exact for fast writers.
    const now = sql<Date>`clock_timestamp()`;
    await trx
      .insertInto('memory_notebook')
      .values({ agent_id: agentId, key, content: entry.content, tag, created_at: now, updated_at: now })
      .onConflict((oc) => oc.columns(['agent_id', 'key']).doUpdateSet({ content: entry.content, tag, updated_at: now }))
      .execute();
    const evicted: string[] = [];
    if (tag === 'agent') {
      const agentEntries = await trx
        .selectFrom('memory_notebook')
        .select('key')
        .where('agent_id', '=', agentId)
        .where('tag', '=', 'agent')
        .orderBy('updated_at', 'desc')
        .orderBy('created_at', 'desc')
        .execute();
      const excess = agentEntries
        .slice(NOTEBOOK_MAX_AGENT_ENTRIES)
        .map((r) => r.key)
        .filter((k) => k !== key);
      if (excess.length > 0) {
        await trx.deleteFrom('memory_notebook').where('agent_id', '=', agentId).where('key', 'in', excess).execute();
        evicted.push(...excess);
      }
    }
    return { created: !existing, evicted };
  });
}

/** Removes one agent entry, or every agent entry; runtime-managed entries stay. Returns the keys removed. */
export async function clearNotebook(db: Kysely<Database>, agentId: string, key?: string): Promise<string[]> {
  let q = db.deleteFrom('memory_notebook').where('agent_id', '=', agentId).where('tag', '=', 'agent');
  if (key !== undefined) q = q.where('key', '=', key.trim());
  const rows = await q.returning('key').execute();
  return rows.map((r) => r.key);
}

export async function listNotebook(db: Db, agentId: string): Promise<NotebookEntry[]> {
  const rows = await notebookQuery(db, agentId).execute();
  return rows.map((r) => ({ key: r.key, content: r.content, tag: r.tag, updatedAt: r.updated_at }));
}

/** `listNotebook`'s query, not run (the prompt loads it with the rest of its inputs in one statement). */
export function notebookQuery(db: Db, agentId: string) {
  return db
    .selectFrom('memory_notebook')
    .select(['key', 'content', 'tag', 'updated_at'])
    .where('agent_id', '=', agentId)
    .orderBy('updated_at', 'desc')
    .orderBy('key');
}

// ---- observations ------------------------------------------------------------------------------

/** A deterministic observation id from the call that wrote it: a retried write finds its own row. */
export function observationId(source: string, callId: string): string {
  return `obs_${createHash('sha256').update(`${source}\0${callId}`).digest('hex').slice(0, 20)}`;
}

/**
 * Appends an observation; when the buffer then holds more than 500, the oldest are trimmed in the
 * same transaction. Writing the same id again is a no-op.
 */
export async function saveObservation(
  db: Kysely<Database>,
  agentId: string,
  obs: { id?: string; type: ObservationType | string; tags?: string[]; content: string; source?: string },
): Promise<{ id: string; created: boolean; trimmed: number }> {
  const content = obs.content.trim();
  if (!content) throw new MemoryLimitError('an observation needs content');
  if (content.length > OBSERVATION_MAX_CHARS) {
    throw new MemoryLimitError(
      `the observation has ${content.length} characters; the limit is ${OBSERVATION_MAX_CHARS}. Save one fact per observation, or put a procedure in curated knowledge with memory_update.`,
    );
  }
  const id = obs.id ?? `obs_${randomUUID().replace(/-/g, '').slice(0, 20)}`;
  return db.transaction().execute(async (trx) => {
    await lockAgent(trx, agentId);
    const inserted = await trx
      .insertInto('memory_observations')
      .values({
        id,
        agent_id: agentId,
        type: obs.type,
        tags: normaliseTags(obs.tags),
        content,
        source: obs.source ?? null,
      })
      .onConflict((oc) => oc.column('id').doNothing())
      .returning('id')
      .executeTakeFirst();
    const trimmed = await trimObservations(trx, agentId);
    return { id, created: inserted !== undefined, trimmed };
  });
}

/** Deletes the oldest observations beyond the 500 cap; returns how many went. */
export async function trimObservations(trx: Db, agentId: string): Promise<number> {
  const result = await sql<{ id: string }>`
    delete from memory_observations where id in (
      select id from memory_observations where agent_id = ${agentId}
      order by seq desc offset ${OBSERVATIONS_MAX}
    ) returning id`.execute(trx);
  return result.rows.length;
}

export async function deleteObservations(db: Db, agentId: string, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .deleteFrom('memory_observations')
    .where('agent_id', '=', agentId)
    .where('id', 'in', ids)
    .returning('id')
    .execute();
  return rows.map((r) => r.id);
}

export async function countObservations(db: Db, agentId: string): Promise<number> {
  const row = await db
    .selectFrom('memory_observations')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('agent_id', '=', agentId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** The most recent observations, newest first. */
export async function recentObservations(db: Db, agentId: string, limit: number): Promise<Observation[]> {
  const rows = await db
    .selectFrom('memory_observations')
    .select(['id', 'type', 'tags', 'content', 'created_at'])
    .where('agent_id', '=', agentId)
    .orderBy('seq', 'desc')
    .limit(limit)
    .execute();
  return rows.map(toObservation);
}

function normaliseTags(tags: string[] | undefined): string[] {
  return [...new Set((tags ?? []).map((t) => t.trim()).filter(Boolean))];
}

export function toObservation(r: {
  id: string;
  type: string;
  tags: string[];
  content: string;
  created_at: Date;
}): Observation {
  return { id: r.id, type: r.type, tags: r.tags, content: r.content, createdAt: r.created_at };
}

// ---- daily logs --------------------------------------------------------------------------------

/** Writes today's log entry of a kind (one per day; a rerun keeps the first). Audit only, never injected. */
export async function writeDailyLog(
  db: Db,
  agentId: string,
  day: string,
  kind: string,
  content: string,
  sessionId?: string,
): Promise<boolean> {
  const row = await db
    .insertInto('memory_daily_logs')
    .values({ agent_id: agentId, day, kind, content, session_id: sessionId ?? null })
    .onConflict((oc) => oc.columns(['agent_id', 'day', 'kind']).doNothing())
    .returning('day')
    .executeTakeFirst();
  return row !== undefined;
}

/** The agent's local calendar day (YYYY-MM-DD) in its configured timezone (UTC when unset or invalid). */
export function localDay(at: Date, timezone?: string): string {
  try {
    return new Intl.DateTimeFormat('en-CA', {
      timeZone: timezone || 'UTC',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
    }).format(at);
  } catch {
    return at.toISOString().slice(0, 10);
  }
}
