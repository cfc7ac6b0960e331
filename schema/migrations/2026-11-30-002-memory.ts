import { sql, type Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
// Memory: notebook, observations, curated knowledge, daily logs; plus the bookkeeping
// of the scheduled memory workflows (heartbeat idle state, consolidations, reflections) and the audit
// trail of identity-file self-edits.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('memory_notebook')
    .addColumn('agent_id', 'text', (c) => c.notNull().references('agents.id').onDelete('cascade'))
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('tag', 'text', (c) => c.notNull().check(sql`tag in ('agent', 'system', 'cpp')`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('memory_notebook_pk', ['agent_id', 'key'])
    .execute();

  await db.schema
    .createTable('memory_observations')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('seq', 'bigserial', (c) => c.notNull())
    .addColumn('agent_id', 'text', (c) => c.notNull().references('agents.id').onDelete('cascade'))
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('tags', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'::text[]`))
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('source', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('search', sql`tsvector`, (c) => c.generatedAlwaysAs(sql`to_tsvector('english', content)`).stored())
    .execute();
  await db.schema
    .createIndex('memory_observations_agent_idx')
    .on('memory_observations')
    .columns(['agent_id', 'seq'])
    .execute();
  await db.schema
    .createIndex('memory_observations_search_idx')
    .on('memory_observations')
    .using('gin')
    .column('search')
    .execute();

  await db.schema
    .createTable('memory_knowledge')
    .addColumn('agent_id', 'text', (c) => c.notNull().references('agents.id').onDelete('cascade'))
    .addColumn('title', 'text', (c) => c.notNull())
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('position', 'bigserial', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('search', sql`tsvector`, (c) =>
      c.generatedAlwaysAs(sql`to_tsvector('english', title || ' ' || content)`).stored(),
    )
    .addPrimaryKeyConstraint('memory_knowledge_pk', ['agent_id', 'title'])
    .execute();
  await db.schema
    .createIndex('memory_knowledge_search_idx')
    .on('memory_knowledge')
    .using('gin')
    .column('search')
    .execute();

  await db.schema
    .createTable('memory_daily_logs')
    .addColumn('agent_id', 'text', (c) => c.notNull().references('agents.id').onDelete('cascade'))
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('session_id', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('memory_daily_logs_pk', ['agent_id', 'day', 'kind'])
    .execute();

  await db.schema
    .createTable('memory_consolidations')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('agent_id', 'text', (c) => c.notNull().references('agents.id').onDelete('cascade'))
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('reason', 'text')
    .addColumn('entries_offered', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('removed', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('merged', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('promoted', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('offered_ids', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'::text[]`))
    .addColumn('plan', 'jsonb')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('finished_at', 'timestamptz')
    .addUniqueConstraint('memory_consolidations_session_uq', ['session_id'])
    .execute();
  await db.schema
    .createIndex('memory_consolidations_agent_day_idx')
    .on('memory_consolidations')
    .columns(['agent_id', 'day'])
    .execute();

  await db.schema
    .createTable('memory_reflections')
    .addColumn('task_id', 'text', (c) => c.primaryKey())
    .addColumn('agent_id', 'text', (c) => c.notNull().references('agents.id').onDelete('cascade'))
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('session_id', 'text')
    .addColumn('tool_iterations', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('finished_at', 'timestamptz')
    .execute();
  await db.schema
    .createIndex('memory_reflections_agent_day_idx')
    .on('memory_reflections')
    .columns(['agent_id', 'day'])
    .execute();

  await db.schema
    .createTable('heartbeat_runs')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('agent_id', 'text', (c) => c.notNull().references('agents.id').onDelete('cascade'))
    .addColumn('workflow_id', 'text', (c) => c.notNull())
    .addColumn('session_id', 'text')
    .addColumn('outcome', 'text', (c) => c.notNull())
    .addColumn('fingerprint', 'text', (c) => c.notNull())
    .addColumn('skipped_in_row', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('tool_iterations', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('summary', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('heartbeat_runs_workflow_uq', ['workflow_id'])
    .execute();
  await db.schema.createIndex('heartbeat_runs_agent_idx').on('heartbeat_runs').columns(['agent_id', 'id']).execute();

  await db.schema
    .createTable('agent_file_edits')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('agent_id', 'text', (c) => c.notNull().references('agents.id').onDelete('cascade'))
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('file', 'text', (c) => c.notNull())
    .addColumn('task_id', 'text')
    .addColumn('before_hash', 'text', (c) => c.notNull())
    .addColumn('after_hash', 'text', (c) => c.notNull())
    .addColumn('diff', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('agent_file_edits_run_file_uq', ['agent_id', 'run_id', 'file'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of [
    'agent_file_edits',
    'heartbeat_runs',
    'memory_reflections',
    'memory_consolidations',
    'memory_daily_logs',
    'memory_knowledge',
    'memory_observations',
    'memory_notebook',
  ]) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}
