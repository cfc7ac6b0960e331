/**
 * Cost budgets down the task tree. A task an agent creates while it works on a task is that task's
 * budget child (`tasks.budget_parent_id`): it is granted what its budget ancestors have left
 * (`tasks.cost_budget_usd`, its task workflow's `costBudgetUsd`), and what it spends counts against
 * every ancestor, because a task's spend is its own calls plus those of every budget descendant.
 * Without this, a task held at its budget created a subtask that started with no budget and spent
 * freely, uncounted.
 *
 * Where the limit lives: a task's running workflow knows its live limit (a human's raise included) and
 * answers the `budget` query; a granted child's grant is also stored, so a finished ancestor still
 * bounds what its descendants may be granted.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { TERMINAL_STATES } from '../../workflows/rules/task-state';

/** One task of a budget chain, nearest first. */
export interface BudgetAncestor {
  id: string;
  state: string;
  /** The grant stored at creation (null: none stored; a root's limit is only in its workflow). */
  grantedUsd: number | null;
}

/**
 * What a task has spent with its budget descendants: every recorded LLM call (sub-agents' included) of
 * the task and of each task below it along `budget_parent_id`. The spend a task's budget is checked against.
 *
 * ```sql
 * with recursive tree(id) as (select $1 union select t.id from tasks t join tree on t.budget_parent_id = tree.id)
 * select coalesce(sum(cost_usd), 0) from llm_calls where task_id in (select id from tree)
 * ```
 */
export async function budgetTreeCostUsd(db: Kysely<Database>, taskId: string): Promise<number> {
  const { rows } = await sql<{ cost: string | number }>`
    with recursive tree(id) as (
      select ${taskId}::text
      union
      select t.id from tasks t join tree on t.budget_parent_id = tree.id
    )
    select coalesce(sum(cost_usd), 0) as cost from llm_calls where task_id in (select id from tree)`.execute(db);
  return Number(rows[0]?.cost ?? 0);
}

/** `taskId` and its budget ancestors, nearest first (bounded: a chain never loops, ids are new on insert). */
export async function budgetChain(db: Kysely<Database>, taskId: string): Promise<BudgetAncestor[]> {
  const { rows } = await sql<{ id: string; state: string; granted: number | null; depth: number }>`
    with recursive chain(id, depth) as (
      select ${taskId}::text, 0
      union all
      select t.budget_parent_id, chain.depth + 1 from tasks t join chain on t.id = chain.id
      where t.budget_parent_id is not null and chain.depth < ${BUDGET_CHAIN_MAX_DEPTH}
    )
    select t.id, t.state, t.cost_budget_usd as granted, chain.depth
    from chain join tasks t on t.id = chain.id order by chain.depth`.execute(db);
  return rows.map((r) => ({ id: r.id, state: r.state, grantedUsd: r.granted === null ? null : Number(r.granted) }));
}

/** How deep a budget chain is followed: far beyond any real delegation, and a bound on the walk. */
export const BUDGET_CHAIN_MAX_DEPTH = 50;

/**
 * What the open budget children of `taskId` were granted and have not spent yet: money promised to a
 * running subtask, so a second one cannot be granted it too.
 */
async function reservedForChildrenUsd(db: Kysely<Database>, taskId: string): Promise<number> {
  const children = await db
    .selectFrom('tasks')
    .select(['id', 'cost_budget_usd'])
    .where('budget_parent_id', '=', taskId)
    .where('cost_budget_usd', 'is not', null)
    .where('state', 'not in', [...TERMINAL_STATES])
    .execute();
  let reserved = 0;
  for (const child of children)
    reserved += Math.max(0, Number(child.cost_budget_usd) - (await budgetTreeCostUsd(db, child.id)));
  return reserved;
}

/**
 * What a new budget child of `parentId` may spend: the least any task of the parent's budget chain has
 * left (its limit − what it and its descendants spent − what its other open children were granted and
 * have not spent); null when no task of the chain has a budget. `liveLimitUsd` asks a running task's
 * workflow for its limit (undefined: not running, use the stored grant).
 */
export async function grantableBudgetUsd(
  db: Kysely<Database>,
  parentId: string,
  liveLimitUsd: (taskId: string) => Promise<number | null | undefined>,
): Promise<number | null> {
  let grantable: number | null = null;
  for (const ancestor of await budgetChain(db, parentId)) {
    const running = !(TERMINAL_STATES as readonly string[]).includes(ancestor.state);
    const live = running ? await liveLimitUsd(ancestor.id) : undefined;
    const limit = live === undefined ? ancestor.grantedUsd : live;
    if (limit === null) continue;
    const left = limit - (await budgetTreeCostUsd(db, ancestor.id)) - (await reservedForChildrenUsd(db, ancestor.id));
    grantable = Math.min(grantable ?? Infinity, Math.max(0, left));
  }
  return grantable;
}
