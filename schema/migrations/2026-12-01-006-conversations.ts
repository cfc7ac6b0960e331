import { sql, type Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
// Conversations. Durable, resumable run streams: every text delta and run event an LLM step publishes, numbered per
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
    .addColumn('kind', 'text', (c) =>
      c.notNull().check(sql`kind in ('step-start', 'delta', 'rewind', 'step-end', 'event', 'end')`),
    )
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
  await db.schema
    .createIndex('stream_events_step_idx')
    .on('stream_events')
    .columns(['stream_id', 'step_key'])
    .execute();

  // The agent's mailbox: every item delivered to an agent, with its triage state. The agent
  // workflow holds the live queue; this table is what survives continue-as-new, what the `mailbox`
  // query is rebuilt from, and what the heartbeat's idle fingerprint hashes.
  await db.schema
    .createTable('mailbox_items')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('agent_id', 'text', (c) => c.notNull().references('agents.id').onDelete('cascade'))
    .addColumn('kind', 'text', (c) =>
      c.notNull().check(sql`kind in ('chat', 'message', 'comment', 'mention', 'notification', 'task')`),
    )
    .addColumn('from_type', 'text', (c) => c.notNull())
    .addColumn('from_id', 'text', (c) => c.notNull())
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('reply_to', 'text')
    // The conversation the item belongs to (its first item's id): agent replies are budgeted per thread.
    .addColumn('thread_id', 'text', (c) => c.notNull())
    .addColumn('task_id', 'text')
    // Seed priorities: 0 critical … 4 background.
    .addColumn('priority', 'integer', (c) => c.notNull())
    .addColumn('status', 'text', (c) =>
      c.notNull().check(sql`status in ('queued', 'processing', 'completed', 'merged', 'deferred', 'dropped')`),
    )
    .addColumn('decision', 'text', (c) => c.notNull())
    .addColumn('reason', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('merged_into', 'text')
    .addColumn('merged_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('run_id', 'text')
    .addColumn('result', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createIndex('mailbox_items_agent_status_idx')
    .on('mailbox_items')
    .columns(['agent_id', 'status'])
    .execute();
  await db.schema.createIndex('mailbox_items_thread_idx').on('mailbox_items').column('thread_id').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('mailbox_items').ifExists().execute();
  await db.schema.dropTable('stream_events').ifExists().execute();
  await db.schema.dropTable('stream_heads').ifExists().execute();
}
