import { sql, type Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
// Approvals under a policy (issue 23): the audit trail of every request (who was asked, reminded,
// each decision, escalations, delegations, expiry), the policy a request was opened with and its wait
// state as the workflow last recorded it (for the inbox's "what it waits for" line and personal queues),
// and an organisation's own policies.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('approval_events')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('request_id', 'text', (c) => c.notNull())
    .addColumn('task_id', 'text')
    .addColumn('kind', 'text', (c) =>
      c
        .notNull()
        .check(
          sql`kind in ('asked', 'reminded', 'escalated', 'approved', 'rejected', 'delegated', 'extended', 'expired', 'timed_out')`,
        ),
    )
    // Who acted (an approver, a delegating person); null for what the workflow did by the clock.
    .addColumn('actor', 'text')
    // Who was asked, reminded or escalated to; the delegate of a delegation.
    .addColumn('targets', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('comment', 'text')
    // One row per workflow event: a retried activity finds its own row.
    .addColumn('event_key', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('approval_events_request').on('approval_events').columns(['request_id', 'id']).execute();
  await db.schema.alterTable('approvals').addColumn('policy', 'jsonb').addColumn('wait_state', 'jsonb').execute();
  await db.schema.alterTable('organisations').addColumn('approvals', 'jsonb').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('organisations').dropColumn('approvals').execute();
  await db.schema.alterTable('approvals').dropColumn('policy').dropColumn('wait_state').execute();
  await db.schema.dropTable('approval_events').execute();
}
