/**
 * Goal tools (heartbeat): an agent sets itself a goal with completion criteria; each
 * heartbeat check-in shows its active goals and advances them one iteration; the agent marks a goal
 * completed when its criteria are met, pauses or resumes it, or raises its iteration limit. A goal
 * that runs out of iterations stops (`max_iterations`) until its limit is raised.
 */
import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import { z } from 'zod';
import type { Database, GoalRow } from '../../schema/database';
import { defineTool } from './types';

/** Iterations (heartbeat check-ins) a goal gets unless its creator says otherwise. */
export const GOAL_DEFAULT_MAX_ITERATIONS = 10;
/** Upper bound of a goal's iterations: at 30-minute heartbeats, 200 check-ins is about four days. */
export const GOAL_MAX_ITERATIONS_LIMIT = 200;
/** Active goals one agent may have: each is shown in every heartbeat prompt. */
export const GOALS_ACTIVE_MAX = 10;

export const goalId = (sessionId: string, toolCallId: string): string =>
  `goal_${createHash('sha256').update(`${sessionId}\0${toolCallId}`).digest('hex').slice(0, 16)}`;

function goalLine(g: GoalRow): string {
  return `- ${g.id}: ${g.title} (${g.status} · iteration ${g.current_iteration}/${g.max_iterations}) — done when: ${g.criteria}`;
}

async function activeGoalCount(db: Kysely<Database>, agentId: string): Promise<number> {
  const row = await db
    .selectFrom('goals')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('agent_id', '=', agentId)
    .where('status', '=', 'active')
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export const goalCreate = defineTool({
  name: 'goal_create',
  description:
    'Set yourself a goal with completion criteria. Each heartbeat check-in shows it and counts one iteration until you mark it completed.',
  schema: z
    .object({
      title: z.string().min(1).max(200),
      criteria: z.string().min(1).max(2_000).describe('How you will know the goal is met'),
      max_iterations: z
        .number()
        .int()
        .min(1)
        .max(GOAL_MAX_ITERATIONS_LIMIT)
        .optional()
        .describe(`Check-ins before it stops (default ${GOAL_DEFAULT_MAX_ITERATIONS})`),
    })
    .strict(),
  // Keyed by the call: a retry finds the goal it created.
  sideEffecting: false,
  summarize: (a) => `goal_create: ${a.title}`,
  run: async (args, ctx) => {
    const id = goalId(ctx.sessionId, ctx.toolCallId);
    const existing = await ctx.db.selectFrom('goals').selectAll().where('id', '=', id).executeTakeFirst();
    if (existing) return { content: `Goal created:\n${goalLine(existing)}` };
    if ((await activeGoalCount(ctx.db, ctx.agentId)) >= GOALS_ACTIVE_MAX) {
      return {
        content: `You already have ${GOALS_ACTIVE_MAX} active goals; complete or pause one first (goal_status lists them).`,
        isError: true,
      };
    }
    const row = await ctx.db
      .insertInto('goals')
      .values({
        id,
        agent_id: ctx.agentId,
        title: args.title,
        criteria: args.criteria,
        status: 'active',
        max_iterations: args.max_iterations ?? GOAL_DEFAULT_MAX_ITERATIONS,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return { content: `Goal created:\n${goalLine(row)}` };
  },
});

/** Moves a goal may make through goal_update. */
const GOAL_MOVES: Readonly<Record<GoalRow['status'], readonly GoalRow['status'][]>> = {
  active: ['paused', 'completed'],
  paused: ['active', 'completed'],
  max_iterations: ['active', 'completed'],
  completed: [],
};

export const goalUpdate = defineTool({
  name: 'goal_update',
  description:
    'Mark a goal completed (its criteria are met), pause or resume it, change its criteria, or raise its iteration limit.',
  schema: z
    .object({
      goal_id: z.string().min(1).max(100),
      status: z.enum(['active', 'paused', 'completed']).optional(),
      criteria: z.string().min(1).max(2_000).optional(),
      max_iterations: z.number().int().min(1).max(GOAL_MAX_ITERATIONS_LIMIT).optional(),
    })
    .strict(),
  sideEffecting: false,
  summarize: (a) => `goal_update ${a.goal_id}${a.status ? ` → ${a.status}` : ''}`,
  run: async (args, ctx) => {
    const goal = await ctx.db
      .selectFrom('goals')
      .selectAll()
      .where('id', '=', args.goal_id)
      .where('agent_id', '=', ctx.agentId)
      .executeTakeFirst();
    if (!goal)
      return { content: `You have no goal ${JSON.stringify(args.goal_id)}; goal_status lists yours.`, isError: true };
    const maxIterations = args.max_iterations ?? goal.max_iterations;
    let status = args.status ?? goal.status;
    // Raising the limit of a goal that ran out of iterations resumes it (raise max / reset).
    if (goal.status === 'max_iterations' && !args.status && maxIterations > goal.current_iteration) status = 'active';
    if (status !== goal.status && !GOAL_MOVES[goal.status].includes(status)) {
      return {
        content: `Goal ${goal.id} is ${goal.status}; it can become ${GOAL_MOVES[goal.status].join(' or ') || 'nothing else (it is finished)'}.`,
        isError: true,
      };
    }
    if (status === 'active' && maxIterations <= goal.current_iteration) {
      return {
        content: `Goal ${goal.id} has used ${goal.current_iteration} iterations: raise max_iterations above that to resume it.`,
        isError: true,
      };
    }
    const row = await ctx.db
      .updateTable('goals')
      .set({
        status,
        max_iterations: maxIterations,
        ...(args.criteria ? { criteria: args.criteria } : {}),
        updated_at: new Date(),
        ...(status === 'completed' ? { completed_at: new Date() } : {}),
      })
      .where('id', '=', goal.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    return { content: `Goal updated:\n${goalLine(row)}` };
  },
});

export const goalStatus = defineTool({
  name: 'goal_status',
  description:
    'List your goals (active and paused; with include_closed also completed and exhausted ones) with their progress.',
  schema: z.object({ include_closed: z.boolean().optional() }).strict(),
  sideEffecting: false,
  summarize: () => 'goal_status',
  run: async (args, ctx) => {
    let query = ctx.db.selectFrom('goals').selectAll().where('agent_id', '=', ctx.agentId);
    if (!args.include_closed) query = query.where('status', 'in', ['active', 'paused']);
    const rows = await query.orderBy('created_at').execute();
    return { content: rows.length ? rows.map(goalLine).join('\n') : 'No goals.' };
  },
});

export const goalTools = [goalCreate, goalUpdate, goalStatus];

/**
 * After a heartbeat check-in: every active goal advances one iteration (once per run, whatever the
 * retries), and a goal that used its last iteration stops as `max_iterations`.
 */
export async function advanceGoals(db: Kysely<Database>, agentId: string, runId: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx
      .updateTable('goals')
      .set((eb) => ({
        current_iteration: eb('current_iteration', '+', 1),
        last_checked_run: runId,
        last_checked_at: new Date(),
        updated_at: new Date(),
      }))
      .where('agent_id', '=', agentId)
      .where('status', '=', 'active')
      .where((eb) => eb.or([eb('last_checked_run', 'is', null), eb('last_checked_run', '!=', runId)]))
      .execute();
    await trx
      .updateTable('goals')
      .set({ status: 'max_iterations', updated_at: new Date() })
      .where('agent_id', '=', agentId)
      .where('status', '=', 'active')
      .whereRef('current_iteration', '>=', 'max_iterations')
      .execute();
  });
}

/** The active goals a heartbeat prompt shows. */
export async function activeGoals(db: Kysely<Database>, agentId: string): Promise<GoalRow[]> {
  return db
    .selectFrom('goals')
    .selectAll()
    .where('agent_id', '=', agentId)
    .where('status', '=', 'active')
    .orderBy('created_at')
    .limit(GOALS_ACTIVE_MAX)
    .execute();
}
