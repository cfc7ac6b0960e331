import { createHash } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../schema/database';

/**
 * Tables that hold an agent's mailbox and goals, when those features are installed. Each is hashed
 * whole (rows of the agent, by `agent_id`) so any change wakes the heartbeat; a table that does not
 * exist contributes nothing.
 */
export const OPTIONAL_FINGERPRINT_TABLES = ['mailbox_items', 'goals'] as const;

/** Task states whose changes matter to a heartbeat (terminal tasks are history). */
const WATCHED_TASK_STATES_EXCLUDED = ['completed', 'cancelled', 'rejected', 'archived'];

/**
 * A digest of what a heartbeat looks at (tasks, mailbox, goals), plus pending approvals and
 * the agent's identity files: equal digests mean nothing changed since the last check-in.
 */
export async function heartbeatFingerprint(db: Kysely<Database>, agentId: string): Promise<string> {
  const hash = createHash('sha256');
  const agent = await db.selectFrom('agents').select('content_hash').where('id', '=', agentId).executeTakeFirst();
  hash.update(`identity:${agent?.content_hash ?? ''}\n`);
  const tasks = await db
    .selectFrom('tasks')
    .select(['id', 'state', 'round', 'updated_at'])
    .where('agent_id', '=', agentId)
    .where('state', 'not in', WATCHED_TASK_STATES_EXCLUDED)
    .orderBy('id')
    .execute();
  for (const t of tasks) hash.update(`task:${t.id}:${t.state}:${t.round}:${t.updated_at.toISOString()}\n`);
  const approvals = await db
    .selectFrom('approvals')
    .select('id')
    .where('agent_id', '=', agentId)
    .where('status', '=', 'pending')
    .orderBy('id')
    .execute();
  for (const a of approvals) hash.update(`approval:${a.id}\n`);
  for (const table of OPTIONAL_FINGERPRINT_TABLES)
    hash.update(`${table}:${await optionalTableDigest(db, table, agentId)}\n`);
  return hash.digest('hex').slice(0, 32);
}

async function optionalTableDigest(db: Kysely<Database>, table: string, agentId: string): Promise<string> {
  const exists = await sql<{ t: string | null }>`select to_regclass(${table})::text as t`.execute(db);
  if (!exists.rows[0]?.t) return 'absent';
  const hasAgentColumn = await sql<{ n: string }>`
    select count(*) as n from information_schema.columns where table_name = ${table} and column_name = 'agent_id'`.execute(
    db,
  );
  if (Number(hasAgentColumn.rows[0]?.n ?? 0) === 0) return 'no-agent-column';
  const digest = await sql<{ h: string | null }>`
    select md5(coalesce(string_agg(t::text, '|' order by t::text), '')) as h from ${sql.table(table)} t where t.agent_id = ${agentId}`.execute(
    db,
  );
  return digest.rows[0]?.h ?? '';
}
