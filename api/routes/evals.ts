/** `/v1/tasks/:taskId/fork`, `/v1/tasks/:taskId/fork-report` and `/v1/evals`: forks of recorded tasks and evals over them (issue 25). */
import { z } from 'zod';
import { ForkOverridesSchema, EvalCandidateSchema } from '../../activities/fork/spec';
import { EvalError, ForkClient, ForkError } from '../../client/forks';
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { ApiError } from '../errors';
import { evalsVisibleTo, evalVisibleTo, isPlatform, taskInOrg, taskNotFound } from '../org-walls';
import type { ApiPrincipal } from '../tokens';
import type { ApiContext } from '../route-kit';
import * as S from '../schemas';

export const ForkBody = z
  .object({
    at: z.number().int().min(0).describe('steps of the source round kept (0: from the task prompt)'),
    round: z.number().int().min(1).optional(),
    overrides: ForkOverridesSchema.optional(),
    allowTools: z.array(z.string()).max(100).optional(),
    taskId: z.string().optional().describe("the fork's task id (default <source>.fork-<random>)"),
    costBudgetUsd: z.number().positive().optional(),
  })
  .strict();

const EvalBody = z
  .object({
    taskIds: z.array(z.string()).min(1).max(500).optional(),
    query: z.string().min(1).max(2_000).optional().describe('a Temporal list query over task workflows'),
    candidates: z.array(EvalCandidateSchema).min(1).max(20),
    budgetUsd: z.number().positive().optional(),
    concurrency: z.number().int().min(1).max(20).optional(),
    judge: z
      .object({ rubric: z.string().min(1).max(50_000), provider: z.string().optional(), model: z.string().optional() })
      .strict()
      .optional(),
  })
  .strict();

/** Loose on purpose: these bodies are the client library's types (client/forks.ts), documented in docs/fork-and-eval.md. */
const ReportObject = z.record(z.string(), z.unknown());
const ForkStartedResponse = z.object({
  taskId: z.string(),
  workflowId: z.string(),
  sourceTaskId: z.string(),
  atStep: z.number(),
  steps: z.number(),
  copiedToolCalls: z.number(),
  workspaceDir: z.string(),
  workspaceNote: z.string(),
  incompleteCalls: z.array(ReportObject),
});
const EvalStartedResponse = z.object({ evalId: z.string(), workflowId: z.string() });

const EvalIdParams = z.object({ evalId: z.string().regex(/^[A-Za-z0-9._-]{1,100}$/) }).strict();

/** A refused fork or eval is the caller's mistake: 404 for an unknown task or eval, else 400, with the reason. */
export function refused(error: unknown): never {
  if (error instanceof ForkError || error instanceof EvalError) {
    const unknown = /^unknown (task|eval)/.test(error.message);
    throw new ApiError(
      unknown ? 404 : 400,
      error instanceof ForkError
        ? unknown
          ? 'task_not_found'
          : 'invalid_fork'
        : unknown
          ? 'eval_not_found'
          : 'invalid_eval',
      error.message,
    );
  }
  throw error;
}

export function registerEvalRoutes({ route, client, db, withTimeout, requireTask }: ApiContext): ForkClient {
  const forks = new ForkClient(client.temporal, db, { taskQueue: client.taskQueue });
  route({
    method: 'POST',
    url: '/v1/tasks/:taskId/fork',
    scope: 'operator',
    summary:
      'Fork a recorded task at a step (a new task from a copy of its round up to the step, with overrides); linked by the ForkOf search attribute',
    params: S.TaskIdParams,
    body: ForkBody,
    response: ForkStartedResponse,
    status: 201,
    handler: async ({ params, body, principal }) => {
      await requireTask(params.taskId, principal);
      return withTimeout('starting the fork', () =>
        forks.forkTask(params.taskId, { ...body, createdBy: principal.name }),
      ).catch(refused);
    },
  });
  route({
    method: 'GET',
    url: '/v1/tasks/:taskId/fork-report',
    scope: 'read',
    summary: "A fork's tool calls one by one: replayed, executed in its own workspace, or refused",
    params: S.TaskIdParams,
    response: ReportObject,
    handler: async ({ params, principal }) => {
      await requireTask(params.taskId, principal);
      return forks.forkReport(params.taskId).catch(refused);
    },
  });
  route({
    method: 'POST',
    url: '/v1/evals',
    scope: 'operator',
    summary:
      'Start an eval: recorded tasks (ids or a list query) forked at step 0 under each candidate, graded against the originals',
    body: EvalBody,
    response: EvalStartedResponse,
    status: 201,
    handler: async ({ body, principal }) => {
      const selection = await selectionInOrg(body, principal);
      return withTimeout('starting the eval', () =>
        forks.startEval({
          selection,
          candidates: body.candidates,
          ...(body.budgetUsd !== undefined ? { budgetUsd: body.budgetUsd } : {}),
          ...(body.concurrency !== undefined ? { concurrency: body.concurrency } : {}),
          ...(body.judge ? { judge: body.judge } : {}),
        }),
      ).catch(refused);
    },
  });
  route({
    method: 'GET',
    url: '/v1/evals',
    scope: 'read',
    summary: 'Recent evals',
    response: z.object({ evals: z.array(ReportObject) }),
    handler: async ({ principal }) => ({ evals: await evalsOf(forks, db, principal) }),
  });
  route({
    method: 'GET',
    url: '/v1/evals/:evalId',
    scope: 'read',
    summary: "An eval's table (per task and candidate) and totals per candidate, as stored",
    params: EvalIdParams,
    response: ReportObject,
    handler: async ({ params, principal }) => {
      return evalTableFor(forks, db, params.evalId, principal).catch(refused);
    },
  });
  /**
   * What an eval of this caller replays: the tasks it names must be its organisation's (another's is
   * unknown: 404); a Temporal list query is resolved here, inside the organisation, to the task ids it
   * matches, so the eval workflow never lists another organisation's runs. The platform's is as given.
   */
  const selectionInOrg = async (
    body: z.infer<typeof EvalBody>,
    principal: ApiPrincipal,
  ): Promise<{ taskIds: string[] } | { query: string }> => {
    if (body.taskIds) {
      if (!isPlatform(principal))
        for (const taskId of body.taskIds) if (!(await taskInOrg(db, taskId, principal))) throw taskNotFound(taskId);
      return { taskIds: body.taskIds };
    }
    const query = body.query ?? '';
    if (isPlatform(principal) || !query.trim()) return { query };
    const taskIds: string[] = [];
    await withTimeout('the eval selection query', async () => {
      for await (const wf of client.temporal.workflow.list({
        query: `WorkflowType = 'taskWorkflow' AND OrgId = '${principal.org}' AND (${query})`,
      })) {
        const taskId = wf.workflowId.startsWith('task-') ? wf.workflowId.slice('task-'.length) : wf.workflowId;
        // The query is the caller's text: the row's organisation is what decides.
        const task = await taskInOrg(db, taskId, principal);
        if (task && task.fork_of === null && !taskIds.includes(taskId)) taskIds.push(taskId);
        if (taskIds.length >= EVAL_TASKS_MAX) break;
      }
    }).catch((error: unknown) => {
      if (error instanceof ApiError) throw error;
      throw new ApiError(
        400,
        'invalid_eval',
        `the list query ${JSON.stringify(query)} was refused by Temporal: ${(error as Error).message}`,
      );
    });
    if (taskIds.length === 0)
      throw new ApiError(
        400,
        'invalid_eval',
        `the selection ${JSON.stringify(query)} matches no recorded task (forks are left out)`,
      );
    return { taskIds };
  };
  return forks;
}

/** An eval's task ids are at most this many (the body's own limit on `taskIds`). */
const EVAL_TASKS_MAX = 500;
/** Recent evals listed, as the CLI lists them. */
const EVALS_LISTED = 50;

const evalNotFound = (evalId: string): ApiError =>
  new ApiError(404, 'eval_not_found', `unknown eval ${JSON.stringify(evalId)}`);

/** The recent evals the principal reaches (see org-walls.ts `evalVisibleTo`). */
export async function evalsOf(forks: ForkClient, db: Kysely<Database>, principal: ApiPrincipal) {
  if (isPlatform(principal)) return forks.listEvals(EVALS_LISTED);
  // Looks further back, so another organisation's busy week does not hide this one's evals.
  const recent = await forks.listEvals(EVALS_LISTED * 20);
  const visible = await evalsVisibleTo(
    db,
    recent.map((e) => e.evalId),
    principal,
  );
  return recent.filter((e) => visible.has(e.evalId)).slice(0, EVALS_LISTED);
}

/** The eval's table when the principal reaches it; else the 404 of an unknown eval. */
export async function evalTableFor(forks: ForkClient, db: Kysely<Database>, evalId: string, principal: ApiPrincipal) {
  if (!(await evalVisibleTo(db, evalId, principal))) throw evalNotFound(evalId);
  return forks.evalTable(evalId);
}
