import { sql, type Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
// Conversation summaries made by prepareMessages, kept per session and keyed by
// a hash of the messages they fold, so a later call over the same prefix reuses the summary instead
// of paying for another summariser call and changing the cached message prefix.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('session_summaries')
    .addColumn('session_id', 'text', (c) => c.notNull().references('sessions.id').onDelete('cascade'))
    // sha256 chained over the folded messages (see activities/context/summary-cache.ts).
    .addColumn('prefix_hash', 'text', (c) => c.notNull())
    // How many messages of the prepared conversation the summary folds.
    .addColumn('prefix_length', 'integer', (c) => c.notNull())
    // The whole summary message text, label included, so a reuse is byte-identical.
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('source', 'text', (c) => c.notNull().check(sql`source in ('llm', 'heuristic')`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('session_summaries_pk', ['session_id', 'prefix_hash'])
    .execute();
  await db.schema
    .createIndex('session_summaries_length_idx')
    .on('session_summaries')
    .columns(['session_id', 'prefix_length'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('session_summaries').ifExists().execute();
}
