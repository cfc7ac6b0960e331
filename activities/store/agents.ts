import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { AgentRow, Database } from '../../schema/database';
import { identityIsSelfEdited } from './agent-seed';

/** The identity files that define an agent (ARCHITECTURE §1; seed D2 agent files). */
export const IDENTITY_FILES = {
  soul_md: 'SOUL.md',
  agents_md: 'AGENTS.md',
  heartbeat_md: 'HEARTBEAT.md',
  tools_md: 'TOOLS.md',
} as const;
export type IdentityColumn = keyof typeof IDENTITY_FILES;

export interface AgentConfig {
  /** Provider name from the worker's provider list (e.g. `anthropic`), or absent for the default. */
  provider?: string;
  model?: string;
  tier?: 'cheap' | 'standard' | 'premium';
  /** IANA timezone for timestamps in prompts. */
  timezone?: string;
  /** Lets the agent edit its own identity files (seed D2). */
  canEditOwnFiles?: boolean;
  /** Spending cap in USD for this agent (seed D2 budget guard); absent = no cap. */
  budgetUsd?: number;
  allowBudgetOverage?: boolean;
  /** The period the budget covers (default a calendar month, UTC). */
  budgetPeriod?: 'hour' | 'day' | 'week' | 'month' | 'lifetime';
  protectedBranches?: string[];
  /**
   * Cognitive preparation (seed D1 tier 1): cheap appraisal / reflection calls before the first main
   * call of each task attempt, written to the notebook. Off unless `enabled`. `maxDepth` caps the
   * selected depth (0–3, default 3); `timeoutMs` overrides the 15 s budget.
   */
  cognitive?: { enabled?: boolean; maxDepth?: 0 | 1 | 2 | 3; timeoutMs?: number };
}

export interface AgentDefinition {
  id: string;
  name: string;
  description?: string;
  files: { soul: string; agents: string; heartbeat: string; tools: string };
  config?: AgentConfig;
  workspaceDir: string;
}

export const AGENT_ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;

export function identityContentHash(files: AgentDefinition['files']): string {
  const hash = createHash('sha256');
  for (const part of [files.soul, files.agents, files.heartbeat, files.tools]) {
    hash.update(String(Buffer.byteLength(part))).update('\0').update(part);
  }
  return hash.digest('hex');
}

/**
 * Creates or updates an agent. Identity files the agent changed itself (`edit_agent_file`) survive a
 * re-upsert unless `force` (see agent-seed.ts); compare the returned content hash with the
 * definition's to tell which files are current.
 */
export async function upsertAgent(db: Kysely<Database>, agent: AgentDefinition, options: { force?: boolean } = {}): Promise<AgentRow> {
  if (!AGENT_ID_PATTERN.test(agent.id)) {
    throw new Error(`invalid agent id ${JSON.stringify(agent.id)}: use 1-63 lowercase letters, digits, '-' or '_'`);
  }
  const row = {
    id: agent.id,
    name: agent.name,
    description: agent.description ?? '',
    soul_md: agent.files.soul,
    agents_md: agent.files.agents,
    heartbeat_md: agent.files.heartbeat,
    tools_md: agent.files.tools,
    content_hash: identityContentHash(agent.files),
    config: JSON.stringify(agent.config ?? {}),
    workspace_dir: agent.workspaceDir,
  };
  return db.transaction().execute(async (trx) => {
    await trx.selectFrom('agents').select('id').where('id', '=', agent.id).forUpdate().executeTakeFirst();
    // Issue 12: keep self-edits across re-upserts.
    const keepIdentity = !options.force && (await identityIsSelfEdited(trx, agent.id));
    const { soul_md: _s, agents_md: _a, heartbeat_md: _h, tools_md: _t, content_hash: _c, ...rest } = row;
    return trx
      .insertInto('agents')
      .values(row)
      .onConflict((oc) => oc.column('id').doUpdateSet({ ...(keepIdentity ? rest : row), updated_at: new Date() }))
      .returningAll()
      .executeTakeFirstOrThrow();
  });
}

export async function findAgent(db: Kysely<Database>, agentId: string): Promise<AgentRow | undefined> {
  return db.selectFrom('agents').selectAll().where('id', '=', agentId).executeTakeFirst();
}

export function agentConfig(row: AgentRow): AgentConfig {
  return (row.config ?? {}) as AgentConfig;
}
