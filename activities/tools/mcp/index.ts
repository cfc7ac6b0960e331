/**
 * The MCP tools of one step: the servers the agent has (its organisation's, its own config's, and
 * those of activated skills bound to it), their tools listed through the worker's session pool, and a
 * snapshot recorded in PostgreSQL the first time the step runs. A retried or resumed step, and every
 * tool call it made, read the snapshot instead of the servers, so the model is offered the same
 * definitions in the same order (the prompt cache stays warm) and a call dispatches to the tool the
 * model saw.
 *
 * Permissions win: an agent whose config does not grant `canCallExternalTools` is offered no MCP tool,
 * and a call to one is answered as an unknown tool.
 */
import type { Kysely } from 'kysely';
import type { AgentRow, Database } from '../../../schema/database';
import type { AgentConfig } from '../../store/agents';
import type { Activations } from '../../store/skills';
import { pickVisible, visibleScopes } from '../../store/skills';
import type { ToolSpec } from '../types';
import { permissionGranted, type Scenario } from '../registry';
import { McpServersSchema, type McpServerConfig, type McpServers } from './config';
import { errorText, mcpSessions } from './pool';
import { entriesFromListing, mcpToolSpec, type McpRefusal, type McpToolEntry } from './tool-spec';

/** The scenarios that may offer MCP tools: the ones that work on something (tasks, chat, sub-agents). */
const MCP_SCENARIOS: ReadonlySet<Scenario> = new Set(['task', 'chat', 'subagent']);
/** MCP tools one step offers at most: each definition costs prompt tokens on every step. */
export const MCP_TOOLS_PER_STEP_MAX = 128;

export interface McpStepContext {
  agent: AgentRow;
  config: AgentConfig;
  scenario: Scenario;
  sessionId: string;
  /** The step's key (its assistant message's key): the snapshot's key. */
  stepKey: string;
  activations: Activations;
  signal?: AbortSignal;
}

/** True when the agent may be offered MCP tools at all. */
export function mayCallExternalTools(config: Pick<AgentConfig, 'permissions'>): boolean {
  return permissionGranted(config, 'canCallExternalTools');
}

/**
 * `tools` with the step's MCP tools after them, in the recorded order. Servers that cannot be listed
 * are left out for this step (recorded as refused, with the reason); so is any tool whose definition
 * is unusable (invalid JSON Schema, a name the providers refuse).
 */
export async function withMcpTools(
  db: Kysely<Database>,
  tools: Map<string, ToolSpec>,
  step: McpStepContext,
): Promise<Map<string, ToolSpec>> {
  if (!MCP_SCENARIOS.has(step.scenario) || !mayCallExternalTools(step.config)) return tools;
  const servers = await mcpServersOf(db, step.agent, step.config, step.activations);
  const recorded = await loadSnapshot(db, step.sessionId, step.stepKey);
  if (!recorded && Object.keys(servers).length === 0) return tools;
  const entries = recorded ?? (await recordSnapshot(db, step, servers));
  const lookup = (server: string): McpServerConfig | undefined => servers[server];
  const out = new Map(tools);
  for (const entry of entries) if (!out.has(entry.name)) out.set(entry.name, mcpToolSpec(entry, lookup));
  return out;
}

/** The refusals recorded for a step (servers that did not answer, tools whose definitions were unusable). */
export async function loadRefusals(db: Kysely<Database>, sessionId: string, stepKey: string): Promise<McpRefusal[]> {
  const row = await db
    .selectFrom('mcp_tool_snapshots')
    .select('refused')
    .where('session_id', '=', sessionId)
    .where('step_key', '=', stepKey)
    .executeTakeFirst();
  return (row?.refused as McpRefusal[] | undefined) ?? [];
}

async function loadSnapshot(
  db: Kysely<Database>,
  sessionId: string,
  stepKey: string,
): Promise<McpToolEntry[] | undefined> {
  const row = await db
    .selectFrom('mcp_tool_snapshots')
    .select('tools')
    .where('session_id', '=', sessionId)
    .where('step_key', '=', stepKey)
    .executeTakeFirst();
  return row ? (row.tools as McpToolEntry[]) : undefined;
}

async function recordSnapshot(
  db: Kysely<Database>,
  step: McpStepContext,
  servers: McpServers,
): Promise<McpToolEntry[]> {
  const names = Object.keys(servers).sort();
  const listed = await Promise.all(
    names.map(async (server) => {
      try {
        const tools = await mcpSessions
          .session(server, servers[server]!, step.agent.workspace_dir)
          .listTools(step.signal);
        return entriesFromListing(server, tools);
      } catch (error) {
        if (step.signal?.aborted) throw error;
        return { entries: [], refused: [{ server, reason: errorText(error).slice(0, 1_000) }] };
      }
    }),
  );
  const entries = listed.flatMap((l) => l.entries).slice(0, MCP_TOOLS_PER_STEP_MAX);
  const refused = listed.flatMap((l) => l.refused);
  await db
    .insertInto('mcp_tool_snapshots')
    .values({
      session_id: step.sessionId,
      step_key: step.stepKey,
      tools: JSON.stringify(entries),
      refused: JSON.stringify(refused),
    })
    .onConflict((oc) => oc.columns(['session_id', 'step_key']).doNothing())
    .execute();
  // Another attempt of the step may have recorded first: its snapshot is the step's.
  return (await loadSnapshot(db, step.sessionId, step.stepKey)) ?? entries;
}

/**
 * The agent's servers by name: its organisation's, then its own config's (a name the agent declares
 * replaces the organisation's), then those of skills activated in this session and bound to the agent.
 */
export async function mcpServersOf(
  db: Kysely<Database>,
  agent: AgentRow,
  config: AgentConfig,
  activations: Activations,
): Promise<McpServers> {
  const servers: McpServers = {};
  if (config.org) {
    const org = await db
      .selectFrom('organisations')
      .select('mcp_servers')
      .where('name', '=', config.org)
      .executeTakeFirst();
    Object.assign(servers, parseStored(org?.mcp_servers));
  }
  Object.assign(servers, config.mcpServers ?? {});
  if (activations.skills.size > 0) {
    const bound = await db.selectFrom('skill_bindings').select('skill_name').where('agent_id', '=', agent.id).execute();
    const active = bound.map((b) => b.skill_name).filter((name) => activations.skills.has(name));
    if (active.length > 0) {
      const rows = await db
        .selectFrom('skills')
        .select(['scope', 'name', 'mcp_servers'])
        .where('name', 'in', active)
        .where('scope', 'in', visibleScopes(agent.id, config.org))
        .execute();
      for (const skill of pickVisible(rows, visibleScopes(agent.id, config.org)).sort((a, b) =>
        a.name.localeCompare(b.name),
      )) {
        for (const [name, server] of Object.entries(parseStored(skill.mcp_servers))) servers[name] ??= server;
      }
    }
  }
  return servers;
}

/** Stored configuration was validated when written; a row that no longer parses offers nothing rather than failing the step. */
function parseStored(value: unknown): McpServers {
  if (value === null || value === undefined) return {};
  const parsed = McpServersSchema.safeParse(value);
  return parsed.success ? parsed.data : {};
}
