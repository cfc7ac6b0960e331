import { sql, type Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
// Agents that manage work (issue 12): subtasks (a parent task), dependencies between tasks (a task
// stays blocked until they complete), the approval gate for tasks created by agents, and the humans'
// notification inbox (notify_user / request_user_approval outside a task) with a read state, and goals
// (the heartbeat's goal loop).
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('tasks')
    .addColumn('parent_task_id', 'text', (c) => c.references('tasks.id'))
    // Set for a task an agent created while its creator's config asks for a human's approval; cleared
    // once a human approved it.
    .addColumn('needs_approval', 'boolean', (c) => c.notNull().defaultTo(false))
    .execute();
  await db.schema.createIndex('tasks_parent_idx').on('tasks').column('parent_task_id').execute();

  await db.schema
    .createTable('task_dependencies')
    .addColumn('task_id', 'text', (c) => c.notNull().references('tasks.id').onDelete('cascade'))
    .addColumn('depends_on', 'text', (c) => c.notNull().references('tasks.id').onDelete('cascade'))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('task_dependencies_pk', ['task_id', 'depends_on'])
    .addCheckConstraint('task_dependencies_not_self', sql`task_id <> depends_on`)
    .execute();
  await db.schema
    .createIndex('task_dependencies_depends_on_idx')
    .on('task_dependencies')
    .column('depends_on')
    .execute();

  await db.schema
    .createTable('notifications')
    // Derived from the writing tool call, so a retried call stores nothing twice.
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('agent_id', 'text', (c) => c.notNull().references('agents.id').onDelete('cascade'))
    .addColumn('task_id', 'text', (c) => c.references('tasks.id').onDelete('set null'))
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind in ('notification', 'approval_request')`))
    .addColumn('title', 'text', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('priority', 'text', (c) =>
      c
        .notNull()
        .defaultTo('normal')
        .check(sql`priority in ('low', 'normal', 'high', 'urgent')`),
    )
    // approval_request: the choices offered, when any.
    .addColumn('options', 'jsonb')
    .addColumn('read_at', 'timestamptz')
    .addColumn('read_by', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createIndex('notifications_agent_idx')
    .on('notifications')
    .columns(['agent_id', 'created_at'])
    .execute();
  await db.schema
    .createIndex('notifications_unread_idx')
    .on('notifications')
    .column('created_at')
    .where(sql.ref('read_at'), 'is', null)
    .execute();

  await db.schema
    .createTable('goals')
    // Derived from the goal_create call, so a retried call creates nothing twice.
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('agent_id', 'text', (c) => c.notNull().references('agents.id').onDelete('cascade'))
    .addColumn('title', 'text', (c) => c.notNull())
    .addColumn('criteria', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) =>
      c
        .notNull()
        .defaultTo('active')
        .check(sql`status in ('active', 'paused', 'completed', 'max_iterations')`),
    )
    .addColumn('current_iteration', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('max_iterations', 'integer', (c) => c.notNull())
    // The heartbeat run that last advanced the goal: a retried record advances it once.
    .addColumn('last_checked_run', 'text')
    .addColumn('last_checked_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('completed_at', 'timestamptz')
    .execute();
  await db.schema.createIndex('goals_agent_idx').on('goals').columns(['agent_id', 'status']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('goals').ifExists().execute();
  await db.schema.dropTable('notifications').ifExists().execute();
  await db.schema.dropTable('task_dependencies').ifExists().execute();
  await db.schema.alterTable('tasks').dropColumn('needs_approval').dropColumn('parent_task_id').execute();
}
