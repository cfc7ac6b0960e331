import { sql, type Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
// A delivery may carry a client's idempotency key: a retry with the same key to the same agent finds the
// item the first attempt stored instead of storing a second one (and starting a second turn). The
// unique index is what makes two attempts racing each other end with one item. The text's hash lets a
// key reused for a different message be refused rather than answered with the old item.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('mailbox_items')
    .addColumn('idempotency_key', 'text')
    .addColumn('idempotency_text_sha256', 'text')
    .execute();
  await sql`CREATE UNIQUE INDEX mailbox_items_idempotency_key_uq ON mailbox_items (agent_id, idempotency_key) WHERE idempotency_key IS NOT NULL`.execute(
    db,
  );
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP INDEX IF EXISTS mailbox_items_idempotency_key_uq`.execute(db);
  await db.schema
    .alterTable('mailbox_items')
    .dropColumn('idempotency_key')
    .dropColumn('idempotency_text_sha256')
    .execute();
}
