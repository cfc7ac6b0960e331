import { sql, type Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
// The HTTP API (issue 13): bearer tokens stored as hashes, and a per-task event sequence so a stream
// reader can resume from "the last event I saw" with no gap and no duplicate.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('api_tokens')
    .addColumn('id', 'text', (c) => c.primaryKey())
    // Unique: approvals record who decided by this name.
    .addColumn('name', 'text', (c) => c.notNull().unique())
    .addColumn('scope', 'text', (c) => c.notNull().check(sql`scope in ('operator', 'service', 'read')`))
    // sha256 of the secret (the secret is 256 random bits, so a slow hash adds nothing).
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('last_used_at', 'timestamptz')
    .addColumn('revoked_at', 'timestamptz')
    .execute();

  // task_events.id is a bigserial: ids are taken when a row is inserted, not when it commits, so a
  // reader that saw id 12 can later find id 11 appear (two writers), and ON CONFLICT DO NOTHING burns
  // ids. `seq` is dense per task and follows commit order: each insert takes a per-task transaction
  // lock, so a second writer for the same task waits until the first commits and then numbers after it.
  await db.schema.alterTable('task_events').addColumn('seq', 'bigint').execute();
  await sql`
    update task_events e set seq = n.seq
    from (select id, row_number() over (partition by task_id order by id) as seq from task_events) n
    where e.id = n.id`.execute(db);
  await sql`
    create function task_events_assign_seq() returns trigger language plpgsql as $$
    begin
      perform pg_advisory_xact_lock(hashtext('task_events_seq'), hashtext(new.task_id));
      select coalesce(max(seq), 0) + 1 into new.seq from task_events where task_id = new.task_id;
      return new;
    end $$`.execute(db);
  await sql`create trigger task_events_seq before insert on task_events for each row execute function task_events_assign_seq()`.execute(
    db,
  );
  await db.schema
    .createIndex('task_events_task_seq_uq')
    .on('task_events')
    .columns(['task_id', 'seq'])
    .unique()
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger if exists task_events_seq on task_events`.execute(db);
  await sql`drop function if exists task_events_assign_seq()`.execute(db);
  await db.schema.dropIndex('task_events_task_seq_uq').ifExists().execute();
  await db.schema.alterTable('task_events').dropColumn('seq').execute();
  await db.schema.dropTable('api_tokens').ifExists().execute();
}
