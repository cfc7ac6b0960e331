import { sql, type Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
// Forks of recorded tasks and evals over them (issue 25).
export async function up(db: Kysely<any>): Promise<void> {
  // The task a fork was made from: set once, before the fork's workflow starts, never changed.
  await db.schema.alterTable('tasks').addColumn('fork_of', 'text').execute();
  await db.schema
    .createTable('task_forks')
    .addColumn('task_id', 'text', (c) => c.primaryKey().references('tasks.id').onDelete('cascade'))
    .addColumn('source_task_id', 'text', (c) => c.notNull())
    .addColumn('source_session_id', 'text', (c) => c.notNull())
    .addColumn('at_step', 'integer', (c) => c.notNull())
    // ForkOverrides (model, identity files, tool result, instructions) as given.
    .addColumn('overrides', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    // Tools with outside effects the operator allowed by name.
    .addColumn('allow_tools', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('workspace_dir', 'text', (c) => c.notNull())
    // How the workspace was made, in words (a git commit as of the step, or the approximation taken).
    .addColumn('workspace_note', 'text', (c) => c.notNull())
    // Tool calls of the copied steps, and the source calls that never finished (interrupted).
    .addColumn('copied_tool_calls', 'integer', (c) => c.notNull())
    .addColumn('incomplete_calls', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('task_forks_source').on('task_forks').column('source_task_id').execute();
  // The fork's report, call by call: replayed (the source's recorded result), executed (in the fork's
  // own workspace) or refused (an outside effect not allowed).
  await db.schema
    .createTable('fork_tool_calls')
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('tool_call_id', 'text', (c) => c.notNull())
    .addColumn('fork_task_id', 'text', (c) => c.notNull())
    .addColumn('position', 'integer', (c) => c.notNull())
    .addColumn('tool', 'text', (c) => c.notNull())
    .addColumn('outcome', 'text', (c) => c.notNull().check(sql`outcome in ('replayed', 'executed', 'refused')`))
    .addColumn('source_tool_call_id', 'text')
    .addColumn('note', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('fork_tool_calls_pk', ['session_id', 'tool_call_id'])
    .execute();
  await db.schema
    .createIndex('fork_tool_calls_task')
    .on('fork_tool_calls')
    .columns(['fork_task_id', 'position'])
    .execute();
  await db.schema
    .createTable('evals')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('workflow_id', 'text', (c) => c.notNull())
    // The ids, or the list query and the ids it matched when the eval started.
    .addColumn('selection', 'jsonb', (c) => c.notNull())
    .addColumn('candidates', 'jsonb', (c) => c.notNull())
    .addColumn('budget_usd', 'numeric')
    .addColumn('state', 'text', (c) => c.notNull().check(sql`state in ('running', 'completed', 'failed')`))
    .addColumn('spent_usd', 'numeric', (c) => c.notNull().defaultTo(0))
    // Totals per candidate, written when the eval ends.
    .addColumn('totals', 'jsonb')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('finished_at', 'timestamptz')
    .execute();
  await db.schema
    .createTable('eval_runs')
    .addColumn('eval_id', 'text', (c) => c.notNull().references('evals.id').onDelete('cascade'))
    .addColumn('source_task_id', 'text', (c) => c.notNull())
    .addColumn('candidate', 'text', (c) => c.notNull())
    .addColumn('fork_task_id', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull().check(sql`state in ('running', 'graded', 'skipped', 'failed')`))
    // The graders' outputs and the figures they compared (fork and original).
    .addColumn('result', 'jsonb')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('eval_runs_pk', ['eval_id', 'source_task_id', 'candidate'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('eval_runs').execute();
  await db.schema.dropTable('evals').execute();
  await db.schema.dropTable('fork_tool_calls').execute();
  await db.schema.dropTable('task_forks').execute();
  await db.schema.alterTable('tasks').dropColumn('fork_of').execute();
}
