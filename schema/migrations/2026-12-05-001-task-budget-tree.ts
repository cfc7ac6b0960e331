import { sql, type Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
// A task's cost budget could be escaped through a subtask: a task held at its budget created a task
// with task_create, which started with no budget and spent uncounted. A task an agent creates while
// working on a task is now that task's budget child:
// - `budget_parent_id`: the task whose budget it draws on (the creating task, else its parent task);
//   its spend counts against that task and every ancestor along these links;
// - `cost_budget_usd`: what it was granted when it was created, the ancestors' remaining budget at
//   that moment, so a later sibling cannot be granted the same money twice. Null: no budget.
// The link is not `parent_task_id`: that one is the graph (cancel cascades, the subtask list), and an
// agent may put a task under any task of its organisation; the budget follows who spends.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('tasks')
    .addColumn('budget_parent_id', 'text', (c) => c.references('tasks.id').onDelete('set null'))
    .addColumn('cost_budget_usd', 'double precision')
    .execute();
  await sql`create index tasks_budget_parent_idx on tasks (budget_parent_id) where budget_parent_id is not null`.execute(
    db,
  );
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists tasks_budget_parent_idx`.execute(db);
  await db.schema.alterTable('tasks').dropColumn('cost_budget_usd').dropColumn('budget_parent_id').execute();
}
