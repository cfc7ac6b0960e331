/**
 * Organisations as walls: the one place that says which organisation an agent, a task or a principal
 * belongs to, and the lookups that treat another organisation's object exactly as an id that never
 * existed (so a caller cannot even learn that it exists).
 *
 * An organisation is a name. An agent's is its config's `org` (`DEFAULT_ORG` without one, so a
 * deployment that never names organisations is one organisation); a task's is its assignee's (stamped
 * by the database on insert); a token's and an inbox session's is the one they were created for.
 * `PLATFORM` (null) is the platform operator's: the only principal that spans organisations.
 */
import type { Kysely } from 'kysely';
import type { AgentRow, Database, TaskRow } from '../../schema/database';

/** The organisation of every agent, token and person created without one. */
export const DEFAULT_ORG = 'default';
/** The platform operator's organisation scope: spans every organisation. */
export const PLATFORM = null;

/** What a principal may reach: one organisation's name, or `PLATFORM` (null) for all of them. */
export type OrgScope = string | null;

/** Whether a principal of `scope` may see an object of organisation `org`. */
export function orgAllows(scope: OrgScope, org: string): boolean {
  return scope === PLATFORM || scope === org;
}

/** The agent's row when it exists and `scope` reaches its organisation; undefined otherwise. */
export async function findAgentInOrg(
  db: Kysely<Database>,
  agentId: string,
  scope: OrgScope,
): Promise<AgentRow | undefined> {
  let query = db.selectFrom('agents').selectAll().where('id', '=', agentId);
  if (scope !== PLATFORM) query = query.where('org', '=', scope);
  return query.executeTakeFirst();
}

/** The task's row when it exists and `scope` reaches its organisation; undefined otherwise. */
export async function findTaskInOrg(
  db: Kysely<Database>,
  taskId: string,
  scope: OrgScope,
): Promise<TaskRow | undefined> {
  let query = db.selectFrom('tasks').selectAll().where('id', '=', taskId);
  if (scope !== PLATFORM) query = query.where('org', '=', scope);
  return query.executeTakeFirst();
}

/** The organisation of an agent; undefined for an unknown agent. */
export async function orgOfAgent(db: Kysely<Database>, agentId: string): Promise<string | undefined> {
  const row = await db.selectFrom('agents').select('org').where('id', '=', agentId).executeTakeFirst();
  return row?.org;
}

/** The organisation an agent config names (`DEFAULT_ORG` without one), as the database computes it. */
export function orgOfConfig(config: { org?: string | undefined } | undefined): string {
  return config?.org?.trim() || DEFAULT_ORG;
}
