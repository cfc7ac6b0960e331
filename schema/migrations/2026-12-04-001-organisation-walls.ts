import { sql, type Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
// Organisations become walls: every principal and every row belongs to one organisation.
// - An agent's organisation is its config's `org` ('default' without one), kept as a generated
//   column so it can never disagree with the config it comes from.
// - A task's organisation is its assignee's, stamped by a trigger on insert (no write path can forget
//   it) and moved with the agent should an operator move the agent. Rows that hang off a task or an
//   agent (events, sessions, ledger, usage, mailbox, memory, approvals, streams) belong to it through
//   that key: one source of truth, no second column that could drift.
// - A token and an inbox session carry the organisation they act for; null is the platform
//   operator's, the only principal that spans organisations. Existing operator tokens become platform
//   tokens (they were the operator's own); every other existing token and session acts for 'default',
//   the organisation of every agent created without one, so a deployment without organisations works
//   on unchanged after the upgrade.
const DEFAULT_ORG = 'default';

export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table agents add column org text generated always as (coalesce(nullif(btrim(config->>'org'), ''), ${sql.lit(DEFAULT_ORG)})) stored`.execute(
    db,
  );
  await db.schema.createIndex('agents_org_id_idx').on('agents').columns(['org', 'id']).execute();

  await db.schema
    .alterTable('tasks')
    .addColumn('org', 'text', (c) => c.notNull().defaultTo(DEFAULT_ORG))
    .execute();
  await sql`update tasks t set org = a.org from agents a where a.id = t.agent_id and t.org <> a.org`.execute(db);
  await sql`
    create function tasks_stamp_org() returns trigger language plpgsql as $$
    begin
      select org into new.org from agents where id = new.agent_id;
      if new.org is null then new.org := ${sql.lit(DEFAULT_ORG)}; end if;
      return new;
    end $$`.execute(db);
  await sql`create trigger tasks_stamp_org before insert or update of agent_id on tasks
    for each row execute function tasks_stamp_org()`.execute(db);
  await sql`
    create function agents_move_tasks_org() returns trigger language plpgsql as $$
    begin
      update tasks set org = new.org where agent_id = new.id and org <> new.org;
      return null;
    end $$`.execute(db);
  await sql`create trigger agents_move_tasks_org after update of config on agents
    for each row when (old.org is distinct from new.org) execute function agents_move_tasks_org()`.execute(db);
  await db.schema.createIndex('tasks_org_idx').on('tasks').columns(['org', 'state']).execute();

  await db.schema.alterTable('api_tokens').addColumn('org', 'text').execute();
  await sql`update api_tokens set org = ${DEFAULT_ORG} where scope <> 'operator'`.execute(db);
  await db.schema.alterTable('inbox_sessions').addColumn('org', 'text').execute();
  await sql`update inbox_sessions set org = ${DEFAULT_ORG} where scope <> 'operator'`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('inbox_sessions').dropColumn('org').execute();
  await db.schema.alterTable('api_tokens').dropColumn('org').execute();
  await sql`drop trigger if exists agents_move_tasks_org on agents`.execute(db);
  await sql`drop function if exists agents_move_tasks_org()`.execute(db);
  await sql`drop trigger if exists tasks_stamp_org on tasks`.execute(db);
  await sql`drop function if exists tasks_stamp_org()`.execute(db);
  await db.schema.alterTable('tasks').dropColumn('org').execute();
  await db.schema.alterTable('agents').dropColumn('org').execute();
}
