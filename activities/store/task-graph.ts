/**
 * Subtasks, dependencies and the approval gate in PostgreSQL: creating a task with its place in the
 * graph (validated, idempotent by task id), adding dependencies without cycles, and the reads the task
 * workflow's start gates, the dependency signals and the cascade cancel need.
 */
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database, TaskRow } from '../../schema/database';
import {
  dependencyCycle,
  isDependencySatisfied,
  SUBTASK_HARD_CAP,
  TASK_MAX_DEPENDENCIES,
} from '../../workflows/rules/task-graph';
import { TERMINAL_STATES } from '../../workflows/rules/task-state';
import { addTaskEvent } from './tasks';
import { PLATFORM, type OrgScope } from './tenancy';
import { PRIORITY_RANK as PRIORITY_RANK_OF, type TaskPriority } from '../../workflows/rules/priority';

/**
 * Board order for `orderBy` on the tasks table, from the one rank table: urgent (or critical) first,
 * low last, and a value outside the scale with low. Built from constants only, so `sql.raw` is safe.
 */
export const PRIORITY_RANK = sql<number>`${sql.raw(priorityRankCase())}`;

function priorityRankCase(): string {
  const ranked = Object.entries(PRIORITY_RANK_OF).filter(([level]) => level !== 'low');
  return `case priority ${ranked.map(([level, rank]) => `when '${level}' then ${rank}`).join(' ')} else ${PRIORITY_RANK_OF.low} end`;
}

/** Known agents named in an "unknown agent" error, so the model (or a person) can pick a real one. */
const KNOWN_AGENTS_LISTED = 20;

/** Bad input to the task graph: the message says what is wrong and what to do instead. Nothing was written. */
export class TaskGraphError extends Error {
  readonly type = 'TaskGraphError';
  constructor(
    message: string,
    readonly code: 'unknown-agent' | 'unknown-task' | 'dependency-cycle' | 'too-many' | 'invalid-state' | 'forbidden',
  ) {
    super(message);
    this.name = 'TaskGraphError';
  }
}

export interface NewTaskRecord {
  id: string;
  agentId: string;
  title: string;
  description: string;
  priority: TaskPriority;
  createdBy: string;
  parentTaskId?: string;
  dependsOn?: string[];
  needsApproval?: boolean;
  /**
   * The organisation the assignee, the parent and the dependencies must be in: another organisation's
   * agent or task is reported exactly as an unknown one. `PLATFORM` (null) reaches every organisation;
   * so does an absent scope, which only the operator's client passes (agents' tools always pass theirs).
   */
  org?: OrgScope;
  /** The task whose cost budget it draws on (store/task-budget.ts); its spend counts there. */
  budgetParentId?: string;
  /** What it may spend, granted from its budget ancestors' remaining budget. */
  costBudgetUsd?: number;
}

/**
 * Validates and records a task with its parent and dependencies in one transaction. Idempotent by
 * `id`: recording the same task again changes nothing and returns `created: false`. A new task has no
 * dependants, so its dependencies cannot close a cycle.
 */
export async function recordNewTask(
  db: Kysely<Database>,
  task: NewTaskRecord,
): Promise<{ created: boolean; row: TaskRow }> {
  return db.transaction().execute(async (trx) => {
    const existing = await trx.selectFrom('tasks').selectAll().where('id', '=', task.id).executeTakeFirst();
    if (existing) return { created: false, row: existing };
    await requireAgent(trx, task.agentId, task.org ?? PLATFORM);
    if (task.parentTaskId) {
      await requireTasks(trx, [task.parentTaskId], 'parent task', task.org ?? PLATFORM);
      const siblings = await trx
        .selectFrom('tasks')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('parent_task_id', '=', task.parentTaskId)
        .executeTakeFirstOrThrow();
      if (Number(siblings.n) >= SUBTASK_HARD_CAP) {
        throw new TaskGraphError(
          `task ${task.parentTaskId} already has ${siblings.n} subtasks (limit ${SUBTASK_HARD_CAP}); group the work into fewer, larger subtasks`,
          'too-many',
        );
      }
    }
    const dependsOn = [...new Set(task.dependsOn ?? [])];
    if (dependsOn.length > TASK_MAX_DEPENDENCIES) {
      throw new TaskGraphError(
        `a task may depend on at most ${TASK_MAX_DEPENDENCIES} tasks, got ${dependsOn.length}`,
        'too-many',
      );
    }
    await requireTasks(trx, dependsOn, 'dependency', task.org ?? PLATFORM);
    const row = await trx
      .insertInto('tasks')
      .values({
        id: task.id,
        agent_id: task.agentId,
        title: task.title,
        description: task.description,
        state: 'pending',
        priority: task.priority,
        created_by: task.createdBy,
        parent_task_id: task.parentTaskId ?? null,
        needs_approval: task.needsApproval === true,
        budget_parent_id: task.budgetParentId ?? null,
        cost_budget_usd: task.costBudgetUsd ?? null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    if (dependsOn.length)
      await trx
        .insertInto('task_dependencies')
        .values(dependsOn.map((d) => ({ task_id: task.id, depends_on: d })))
        .execute();
    await addTaskEvent(
      trx,
      task.id,
      'task-created',
      {
        title: task.title,
        agentId: task.agentId,
        createdBy: task.createdBy,
        ...(task.parentTaskId ? { parentTaskId: task.parentTaskId } : {}),
        ...(dependsOn.length ? { dependsOn } : {}),
        ...(task.needsApproval ? { needsApproval: true } : {}),
        ...(task.budgetParentId ? { budgetParentId: task.budgetParentId } : {}),
        ...(task.costBudgetUsd !== undefined ? { costBudgetUsd: task.costBudgetUsd } : {}),
      },
      'created',
    );
    return { created: true, row };
  });
}

/**
 * Checks, without writing, what `recordNewTask` will check of a new task's place: its assignee, parent
 * and dependencies exist inside `org`. Throws the same TaskGraphError, so a caller can refuse before
 * it does anything else (recordNewTask checks again inside its transaction).
 */
export async function checkNewTaskPlace(
  db: Kysely<Database>,
  task: Pick<NewTaskRecord, 'agentId' | 'parentTaskId' | 'dependsOn'> & { org: OrgScope },
): Promise<void> {
  await requireAgent(db, task.agentId, task.org);
  if (task.parentTaskId) await requireTasks(db, [task.parentTaskId], 'parent task', task.org);
  await requireTasks(db, [...new Set(task.dependsOn ?? [])], 'dependency', task.org);
}

/**
 * Adds dependencies to a task that has not started (pending or blocked): they gate its start only.
 * Refuses a dependency that would close a cycle, naming the cycle.
 */
export async function addDependencies(
  db: Kysely<Database>,
  taskId: string,
  dependsOn: string[],
  org: OrgScope,
): Promise<string[]> {
  const wanted = [...new Set(dependsOn)];
  return db.transaction().execute(async (trx) => {
    const [task] = await requireTasks(trx, [taskId], 'task', org);
    if (!['pending', 'blocked'].includes(task!.state)) {
      throw new TaskGraphError(
        `task ${taskId} is ${task!.state}: dependencies only gate a task that has not started (pending or blocked)`,
        'invalid-state',
      );
    }
    await requireTasks(trx, wanted, 'dependency', org);
    const current = await trx
      .selectFrom('task_dependencies')
      .select('depends_on')
      .where('task_id', '=', taskId)
      .execute();
    const added = wanted.filter((d) => !current.some((c) => c.depends_on === d));
    if (current.length + added.length > TASK_MAX_DEPENDENCIES) {
      throw new TaskGraphError(
        `a task may depend on at most ${TASK_MAX_DEPENDENCIES} tasks; ${taskId} has ${current.length}`,
        'too-many',
      );
    }
    if (!added.length) return [];
    const cycle = dependencyCycle(await edgesReachableFrom(trx, added), taskId, added);
    if (cycle) {
      throw new TaskGraphError(
        `dependency cycle: ${cycle.join(' → ')}. Each of these tasks would wait for itself forever; nothing was changed`,
        'dependency-cycle',
      );
    }
    await trx
      .insertInto('task_dependencies')
      .values(added.map((d) => ({ task_id: taskId, depends_on: d })))
      .execute();
    await addTaskEvent(trx, taskId, 'dependencies-added', { dependsOn: added });
    return added;
  });
}

/** Every dependency edge reachable from `roots` (a recursive walk in PostgreSQL, not the whole table). */
async function edgesReachableFrom(trx: Transaction<Database>, roots: string[]): Promise<Map<string, string[]>> {
  const rows = await sql<{ task_id: string; depends_on: string }>`
    with recursive reach(id) as (
      select unnest(${sql.val(roots)}::text[])
      union
      select d.depends_on from task_dependencies d join reach r on d.task_id = r.id
    )
    select d.task_id, d.depends_on from task_dependencies d join reach r on d.task_id = r.id`.execute(trx);
  const edges = new Map<string, string[]>();
  for (const r of rows.rows) edges.set(r.task_id, [...(edges.get(r.task_id) ?? []), r.depends_on]);
  return edges;
}

export interface StartGates {
  /** A human must approve the task before it starts. */
  awaitApproval: boolean;
  /** Dependencies not yet completed (with their state: a failed one needs a human). */
  blockedBy: Array<{ id: string; title: string; state: string }>;
}

export async function startGates(db: Kysely<Database>, taskId: string): Promise<StartGates> {
  const task = await db.selectFrom('tasks').select('needs_approval').where('id', '=', taskId).executeTakeFirst();
  const deps = await db
    .selectFrom('task_dependencies')
    .innerJoin('tasks', 'tasks.id', 'task_dependencies.depends_on')
    .select(['tasks.id', 'tasks.title', 'tasks.state'])
    .where('task_dependencies.task_id', '=', taskId)
    .orderBy('task_dependencies.created_at')
    .execute();
  return {
    awaitApproval: task?.needs_approval === true,
    blockedBy: deps.filter((d) => !isDependencySatisfied(d.state)),
  };
}

/** Tasks waiting (pending or blocked) on `taskId`: told when it reaches a final state. */
export async function waitingDependants(db: Kysely<Database>, taskId: string): Promise<string[]> {
  const rows = await db
    .selectFrom('task_dependencies')
    .innerJoin('tasks', 'tasks.id', 'task_dependencies.task_id')
    .select('tasks.id')
    .where('task_dependencies.depends_on', '=', taskId)
    .where('tasks.state', 'in', ['pending', 'blocked'])
    .execute();
  return rows.map((r) => r.id);
}

/** What cancelling `taskId` cancels too: its unfinished subtasks and the tasks still waiting on it. */
export async function cascadeTargets(db: Kysely<Database>, taskId: string): Promise<string[]> {
  const subtasks = await db
    .selectFrom('tasks')
    .select('id')
    .where('parent_task_id', '=', taskId)
    .where('state', 'not in', [...TERMINAL_STATES])
    .execute();
  return [...new Set([...subtasks.map((s) => s.id), ...(await waitingDependants(db, taskId))])];
}

/** The agent, inside `org`; otherwise an "unknown agent" error naming the organisation's agents only. */
async function requireAgent(trx: Kysely<Database>, agentId: string, org: OrgScope): Promise<void> {
  let agent = trx.selectFrom('agents').select('id').where('id', '=', agentId);
  let known = trx.selectFrom('agents').select('id');
  if (org !== PLATFORM) {
    agent = agent.where('org', '=', org);
    known = known.where('org', '=', org);
  }
  if (await agent.executeTakeFirst()) return;
  const listed = await known.orderBy('id').limit(KNOWN_AGENTS_LISTED).execute();
  throw new TaskGraphError(
    `unknown agent ${JSON.stringify(agentId)}: no task was created. Known agents: ${listed.map((a) => a.id).join(', ') || 'none'}`,
    'unknown-agent',
  );
}

/** The tasks, inside `org`; a missing one (or another organisation's) is an "unknown" error, nothing written. */
async function requireTasks(trx: Kysely<Database>, ids: string[], what: string, org: OrgScope): Promise<TaskRow[]> {
  if (!ids.length) return [];
  let query = trx.selectFrom('tasks').selectAll().where('id', 'in', ids);
  if (org !== PLATFORM) query = query.where('org', '=', org);
  const rows = await query.execute();
  const missing = ids.filter((id) => !rows.some((r) => r.id === id));
  if (missing.length)
    throw new TaskGraphError(
      `unknown ${what} ${missing.map((m) => JSON.stringify(m)).join(', ')}: nothing was changed`,
      'unknown-task',
    );
  return ids.map((id) => rows.find((r) => r.id === id)!);
}
