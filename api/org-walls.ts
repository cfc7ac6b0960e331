/**
 * Organisations as walls, on the HTTP side: the lookups every route, the MCP endpoint, the streams and
 * the inbox go through, so another organisation's agent, task, approval, notification or eval answers
 * exactly as an id that never existed (the same 404, code and words). A principal reaches its own
 * organisation's objects; only a platform principal (`org` null) reaches every organisation's.
 *
 * Objects without a column of their own belong to an organisation through the agent or task they hang
 * off (tenancy.ts): approvals and notifications through `agent_id`, evals through the tasks they replay.
 */
import { sql, type Kysely } from 'kysely';
import {
  DEFAULT_ORG,
  findAgentInOrg,
  findTaskInOrg,
  orgOfConfig,
  PLATFORM,
  type OrgScope,
} from '../activities/store/tenancy';
import type { AgentRow, Database, TaskRow } from '../schema/database';
import { ApiError } from './errors';
import type { ApiPrincipal } from './tokens';

export { DEFAULT_ORG, PLATFORM, type OrgScope };

/** The 404 for an agent that does not exist or is another organisation's (the two are never told apart). */
export const agentNotFound = (agentId: string): ApiError =>
  new ApiError(404, 'agent_not_found', `no agent ${JSON.stringify(agentId)}`);
/** The 404 for a task that does not exist or is another organisation's. */
export const taskNotFound = (taskId: string): ApiError =>
  new ApiError(404, 'task_not_found', `no task ${JSON.stringify(taskId)}`);
/** The 404 for an approval request that does not exist or is another organisation's. */
export const approvalNotFound = (requestId: string): ApiError =>
  new ApiError(404, 'approval_not_found', `no approval request ${JSON.stringify(requestId)}`);
/** The 404 for an organisation that does not exist or is not the caller's. */
export const organisationNotFound = (org: string): ApiError =>
  new ApiError(404, 'organisation_not_found', `no organisation ${JSON.stringify(org)}`);
/** The answer to what only the platform operator may do (it concerns every organisation, so hides nothing). */
export const platformOnly = (what: string, principal: ApiPrincipal): ApiError =>
  new ApiError(
    403,
    'forbidden',
    `${what} concerns every organisation: it needs the platform token; "${principal.name}" acts for organisation "${principal.org}"`,
  );

/** Whether the principal spans organisations. */
export const isPlatform = (principal: ApiPrincipal): boolean => principal.org === PLATFORM;

/** The agent's row when the principal reaches it; else the 404 of an unknown agent. */
export async function agentInOrgOr404(
  db: Kysely<Database>,
  agentId: string,
  principal: ApiPrincipal,
): Promise<AgentRow> {
  const agent = await findAgentInOrg(db, agentId, principal.org);
  if (!agent) throw agentNotFound(agentId);
  return agent;
}

/** The task's row when the principal reaches it; undefined for none (another organisation's included). */
export async function taskInOrg(
  db: Kysely<Database>,
  taskId: string,
  principal: ApiPrincipal,
): Promise<TaskRow | undefined> {
  return findTaskInOrg(db, taskId, principal.org);
}

/** The organisation named by a principal acting on `org`: its own, or any for the platform; else 404. */
export function requireOwnOrganisation(principal: ApiPrincipal, org: string): void {
  if (principal.org !== PLATFORM && principal.org !== org) throw organisationNotFound(org);
}

/**
 * The organisation an agent upsert puts the agent in: the body's `config.org`, or the caller's own
 * (an organisation's token never names another: 400; the platform's without one: `DEFAULT_ORG`).
 */
export function upsertOrg(principal: ApiPrincipal, agentId: string, configOrg: string | undefined): string {
  const named = configOrg?.trim() ? orgOfConfig({ org: configOrg }) : undefined;
  if (principal.org === PLATFORM) return named ?? DEFAULT_ORG;
  if (named !== undefined && named !== principal.org)
    throw new ApiError(
      400,
      'invalid_request',
      `invalid agent ${JSON.stringify(agentId)}: config.org: this token acts for organisation ${JSON.stringify(principal.org)} and may not put an agent in ${JSON.stringify(named)}`,
    );
  return principal.org;
}

/** The approval request's task and status when the principal reaches it (through its agent); else 404. */
export async function approvalInOrgOr404(
  db: Kysely<Database>,
  requestId: string,
  principal: ApiPrincipal,
): Promise<{ task_id: string | null; status: string; agent_id: string }> {
  let query = db
    .selectFrom('approvals')
    .innerJoin('agents', 'agents.id', 'approvals.agent_id')
    .select(['approvals.task_id', 'approvals.status', 'approvals.agent_id'])
    .where('approvals.id', '=', requestId);
  if (principal.org !== PLATFORM) query = query.where('agents.org', '=', principal.org);
  const row = await query.executeTakeFirst();
  if (!row) throw approvalNotFound(requestId);
  return row;
}

/** Of `agentIds`, those the principal reaches. */
export async function agentsInOrg(
  db: Kysely<Database>,
  agentIds: readonly string[],
  principal: ApiPrincipal,
): Promise<Set<string>> {
  const unique = [...new Set(agentIds)];
  if (unique.length === 0) return new Set();
  let query = db.selectFrom('agents').select('id').where('id', 'in', unique);
  if (principal.org !== PLATFORM) query = query.where('org', '=', principal.org);
  return new Set((await query.execute()).map((r) => r.id));
}

/**
 * Whether the principal reaches an eval: every task it replays (named in its selection, or run since)
 * is of the principal's organisation, and it replays at least one. An eval over a Temporal query that
 * has not run a task yet belongs to no organisation: only the platform sees it.
 */
export async function evalVisibleTo(db: Kysely<Database>, evalId: string, principal: ApiPrincipal): Promise<boolean> {
  const row = await db.selectFrom('evals').select(['id', 'selection']).where('id', '=', evalId).executeTakeFirst();
  if (!row) return false;
  if (principal.org === PLATFORM) return true;
  const orgs = await evalOrgs(db, [row]);
  const own = orgs.get(evalId);
  return own !== undefined && own.size === 1 && own.has(principal.org);
}

/** Of `evalIds`, those the principal reaches (see `evalVisibleTo`). */
export async function evalsVisibleTo(
  db: Kysely<Database>,
  evalIds: readonly string[],
  principal: ApiPrincipal,
): Promise<Set<string>> {
  if (evalIds.length === 0) return new Set();
  if (principal.org === PLATFORM) return new Set(evalIds);
  const rows = await db
    .selectFrom('evals')
    .select(['id', 'selection'])
    .where('id', 'in', [...evalIds])
    .execute();
  const orgs = await evalOrgs(db, rows);
  return new Set(
    rows.filter((r) => orgs.get(r.id)?.size === 1 && orgs.get(r.id)!.has(principal.org!)).map((r) => r.id),
  );
}

/** Each eval's organisations: those of the tasks in its selection and of the tasks it has run. */
async function evalOrgs(
  db: Kysely<Database>,
  rows: ReadonlyArray<{ id: string; selection: Record<string, unknown> }>,
): Promise<Map<string, Set<string>>> {
  const result = new Map<string, Set<string>>(rows.map((r) => [r.id, new Set<string>()]));
  const named = rows.flatMap((r) => {
    const ids = Array.isArray(r.selection.taskIds) ? (r.selection.taskIds as unknown[]) : [];
    return ids.filter((id): id is string => typeof id === 'string').map((taskId) => ({ evalId: r.id, taskId }));
  });
  const ran = await db
    .selectFrom('eval_runs')
    .select(['eval_id as evalId', 'source_task_id as taskId'])
    .where(
      'eval_id',
      'in',
      rows.map((r) => r.id),
    )
    .execute();
  const pairs = [...named, ...ran];
  const taskIds = [...new Set(pairs.map((p) => p.taskId))];
  const taskOrgs = new Map<string, string>();
  if (taskIds.length) {
    for (const t of await db.selectFrom('tasks').select(['id', 'org']).where('id', 'in', taskIds).execute())
      taskOrgs.set(t.id, t.org);
  }
  for (const { evalId, taskId } of pairs) {
    // A named task that is gone counts as no organisation's: the eval is then the platform's alone.
    result.get(evalId)!.add(taskOrgs.get(taskId) ?? '\u0000gone');
  }
  return result;
}

/** A SQL condition: the row's `agent_id` column names an agent of the principal's organisation. */
export function agentOfOrgCondition(principal: ApiPrincipal, agentIdColumn: string) {
  return sql<boolean>`exists (select 1 from agents where agents.id = ${sql.ref(agentIdColumn)} and agents.org = ${principal.org})`;
}
