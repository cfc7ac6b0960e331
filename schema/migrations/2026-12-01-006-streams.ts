import { sql, type Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
// Durable, resumable run streams: every text delta and run event an LLM step publishes, numbered per
// stream, with the activity attempt (and provider fallback part) that produced it, so a client can
// resume from any sequence number and drop a retried call's superseded output.
export async function up(db: Kysely<any>): Promise<void> {
  // One row per stream: the last sequence number handed out. Reserving numbers here (a row lock)
  // keeps them gap-free and ordered even when a stale attempt still writes beside its retry.
  await db.schema
    .createTable('stream_heads')
    .addColumn('stream_id', 'text', (c) => c.primaryKey())
    .addColumn('last_seq', 'integer', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createTable('stream_events')
    .addColumn('stream_id', 'text', (c) => c.notNull())
    // 1-based, gap-free per stream; integer is plenty (20 flushes/s for three years).
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind in ('step-start', 'delta', 'rewind', 'step-end', 'event', 'end')`))
    // The LLM step (`{sessionId}/{messageKey}`) a step-start/delta/rewind/step-end belongs to.
    .addColumn('step_key', 'text')
    // Temporal activity attempt (1-based) and provider-fallback part (0-based) that produced the row.
    .addColumn('attempt', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('part', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('text', 'text')
    .addColumn('data', 'jsonb')
    .addColumn('agent_id', 'text')
    .addColumn('task_id', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('stream_events_pk', ['stream_id', 'seq'])
    .execute();
  await db.schema.createIndex('stream_events_created_idx').on('stream_events').column('created_at').execute();
  await db.schema.createIndex('stream_events_step_idx').on('stream_events').columns(['stream_id', 'step_key']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('stream_events').ifExists().execute();
  await db.schema.dropTable('stream_heads').ifExists().execute();
}
