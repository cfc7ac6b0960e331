import { sql, type Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
// Skills and the organisation an agent works in (issue 12):
// skill folders (SKILL.md) loaded like agent folders, bound per agent, activated per session/task with
// discover_tools; the organisation folder's CONTEXT.md, ANNOUNCEMENTS.md and users/*.md; and system
// announcements with an expiry.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('skills')
    // Whose skill it is: 'agent:<id>' (an agent folder's skills/: only that agent sees them),
    // 'org:<name>' (an organisation folder's skills/: that organisation's agents) or 'shared' (everyone).
    // A name is unique per scope; where several visible scopes hold it, the most specific one wins.
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('category', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('description', 'text', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    // Set for an agent's own skills, so that deleting the agent deletes them.
    .addColumn('owner_agent_id', 'text', (c) => c.references('agents.id').onDelete('cascade'))
    .addColumn('content_hash', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('skills_pk', ['scope', 'name'])
    .execute();
  // Bound skills by name, resolved among the skills the agent sees when the prompt is built (and
  // checked when the agent is upserted).
  await db.schema
    .createTable('skill_bindings')
    .addColumn('agent_id', 'text', (c) => c.notNull().references('agents.id').onDelete('cascade'))
    .addColumn('skill_name', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('skill_bindings_pk', ['agent_id', 'skill_name'])
    .execute();
  // What discover_tools activated: a skill (full body in the prompt) or a withheld tool (offered).
  // Keyed by session, and by task so that a later round of the same task keeps them.
  await db.schema
    .createTable('skill_activations')
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind in ('skill', 'tool')`))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('agent_id', 'text', (c) => c.notNull().references('agents.id').onDelete('cascade'))
    .addColumn('task_id', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('skill_activations_pk', ['session_id', 'kind', 'name'])
    .execute();
  await db.schema.createIndex('skill_activations_task_idx').on('skill_activations').column('task_id').execute();
  // Colleagues are the agents of the same organisation (`config.org`), looked up on every LLM step.
  await sql`create index agents_org_idx on agents ((config->>'org'))`.execute(db);
  await db.schema
    .createTable('organisations')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('context_md', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('announcements_md', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createTable('user_profiles')
    .addColumn('org', 'text', (c) => c.notNull().references('organisations.name').onDelete('cascade'))
    .addColumn('handle', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('profile_md', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('user_profiles_pk', ['org', 'handle'])
    .execute();
  await db.schema
    .createTable('announcements')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    // Null: every agent; else the agents of that organisation.
    .addColumn('org', 'text')
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('expires_at', 'timestamptz')
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('announcements').ifExists().execute();
  await db.schema.dropTable('user_profiles').ifExists().execute();
  await db.schema.dropTable('organisations').ifExists().execute();
  await db.schema.dropIndex('agents_org_idx').ifExists().execute();
  await db.schema.dropTable('skill_activations').ifExists().execute();
  await db.schema.dropTable('skill_bindings').ifExists().execute();
  await db.schema.dropTable('skills').ifExists().execute();
}
