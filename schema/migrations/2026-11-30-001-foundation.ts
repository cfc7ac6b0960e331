import { sql, type Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('agents')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('soul_md', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('agents_md', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('heartbeat_md', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('tools_md', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('content_hash', 'text', (c) => c.notNull())
    .addColumn('config', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('workspace_dir', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('tasks')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('agent_id', 'text', (c) => c.notNull().references('agents.id'))
    .addColumn('title', 'text', (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('round', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('priority', 'text', (c) => c.notNull().defaultTo('medium'))
    .addColumn('created_by', 'text')
    .addColumn('result_summary', 'text')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('completed_at', 'timestamptz')
    .execute();
  await db.schema.createIndex('tasks_agent_state_idx').on('tasks').columns(['agent_id', 'state']).execute();

  await db.schema
    .createTable('task_events')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('task_id', 'text', (c) => c.notNull().references('tasks.id'))
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('data', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('idem_key', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('task_events_idem_key_uq', ['task_id', 'idem_key'])
    .execute();
  await db.schema.createIndex('task_events_task_idx').on('task_events').columns(['task_id', 'id']).execute();

  await db.schema
    .createTable('sessions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('agent_id', 'text', (c) => c.notNull().references('agents.id'))
    .addColumn('task_id', 'text', (c) => c.references('tasks.id'))
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('messages')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('session_id', 'text', (c) => c.notNull().references('sessions.id'))
    .addColumn('idem_key', 'text', (c) => c.notNull())
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull().defaultTo('normal'))
    .addColumn('content', 'jsonb', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('messages_session_idem_uq', ['session_id', 'idem_key'])
    .execute();
  await db.schema.createIndex('messages_session_idx').on('messages').columns(['session_id', 'id']).execute();

  await db.schema
    .createTable('tool_calls')
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('tool_call_id', 'text', (c) => c.notNull())
    .addColumn('task_id', 'text')
    .addColumn('agent_id', 'text', (c) => c.notNull())
    .addColumn('tool', 'text', (c) => c.notNull())
    .addColumn('args', 'jsonb', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('side_effecting', 'boolean', (c) => c.notNull())
    .addColumn('result', 'text')
    .addColumn('is_error', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('executions', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('started_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('completed_at', 'timestamptz')
    .addPrimaryKeyConstraint('tool_calls_pk', ['session_id', 'tool_call_id'])
    .execute();

  await db.schema
    .createTable('tool_outputs')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('tool_call_id', 'text', (c) => c.notNull())
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('chars', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('approvals')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('task_id', 'text')
    .addColumn('agent_id', 'text', (c) => c.notNull())
    .addColumn('workflow_id', 'text', (c) => c.notNull())
    .addColumn('tool', 'text', (c) => c.notNull())
    .addColumn('args', 'jsonb', (c) => c.notNull())
    .addColumn('summary', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('requested_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('decided_at', 'timestamptz')
    .addColumn('decided_by', 'text')
    .addColumn('comment', 'text')
    .execute();
  await db.schema.createIndex('approvals_task_idx').on('approvals').columns(['task_id', 'status']).execute();

  await db.schema
    .createTable('llm_calls')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('agent_id', 'text', (c) => c.notNull())
    .addColumn('task_id', 'text')
    .addColumn('session_id', 'text')
    .addColumn('idem_key', 'text')
    .addColumn('provider', 'text', (c) => c.notNull())
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('input_tokens', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('output_tokens', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('cache_read_tokens', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('cache_write_tokens', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('cost_usd', 'numeric(14, 6)', (c) => c.notNull().defaultTo(0))
    .addColumn('duration_ms', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('stop_reason', 'text')
    .addColumn('error', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('llm_calls_session_idem_uq', ['session_id', 'idem_key'])
    .execute();
  await db.schema.createIndex('llm_calls_agent_idx').on('llm_calls').columns(['agent_id', 'created_at']).execute();
  await db.schema.createIndex('llm_calls_task_idx').on('llm_calls').columns(['task_id']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of [
    'llm_calls',
    'approvals',
    'tool_outputs',
    'tool_calls',
    'messages',
    'sessions',
    'task_events',
    'tasks',
    'agents',
  ]) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}
