import { sql, type Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
// Every step's prompt shows the agent's recent activity (its tasks' latest lifecycle events) and its
// recent runs. Read through a join, the activity query walked task_events backwards from the newest
// event of any agent until it had 20 of this agent's: 168 ms per step once other agents had written
// 500,000 events. Each event now carries its task's agent (set by the insert trigger; a task never
// changes agent), and two partial indexes hold exactly the rows those two reads want, newest first.
// The type and state lists are literals in the indexes and in the queries (activities/step/prompt.ts),
// so that a prepared statement's generic plan can still prove it may use them.
const ACTIVITY_TYPES = `('task-created', 'state-changed', 'review-submitted', 'approval-decided', 'note-added')`;
const CLOSED_STATES = `('completed', 'failed', 'cancelled', 'review')`;

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('task_events').addColumn('agent_id', 'text').execute();
  await sql`update task_events e set agent_id = t.agent_id from tasks t where t.id = e.task_id`.execute(db);
  // The function the seq trigger runs (migration 004), now also stamping the agent.
  await sql`
    create or replace function task_events_assign_seq() returns trigger language plpgsql as $$
    begin
      perform pg_advisory_xact_lock(hashtext('task_events_seq'), hashtext(new.task_id));
      select coalesce(max(seq), 0) + 1 into new.seq from task_events where task_id = new.task_id;
      if new.agent_id is null then
        select agent_id into new.agent_id from tasks where id = new.task_id;
      end if;
      return new;
    end $$`.execute(db);
  await sql`create index task_events_agent_activity_idx on task_events (agent_id, id desc) where type in ${sql.raw(ACTIVITY_TYPES)}`.execute(
    db,
  );
  await sql`create index tasks_agent_recent_runs_idx on tasks (agent_id, updated_at desc) where state in ${sql.raw(CLOSED_STATES)}`.execute(
    db,
  );
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists tasks_agent_recent_runs_idx`.execute(db);
  await sql`drop index if exists task_events_agent_activity_idx`.execute(db);
  await sql`
    create or replace function task_events_assign_seq() returns trigger language plpgsql as $$
    begin
      perform pg_advisory_xact_lock(hashtext('task_events_seq'), hashtext(new.task_id));
      select coalesce(max(seq), 0) + 1 into new.seq from task_events where task_id = new.task_id;
      return new;
    end $$`.execute(db);
  await db.schema.alterTable('task_events').dropColumn('agent_id').execute();
}
