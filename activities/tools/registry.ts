import { z } from 'zod';
import type { ToolDefinition } from '../llm/types';
import { fileRead, fileWrite } from './file-tools';
import { notifyUser, requestUserApproval } from './human-tools';
import { readToolOutput } from './output-tools';
import { shellExecute } from './shell-tool';
import { taskNote, taskSubmitReview } from './task-tools';
import { taskManagementTools } from './task-management-tools';
import { goalTools } from './goal-tools';
import type { ToolSpec } from './types';
import type { AgentConfig } from '../store/agents';
import { safeLine } from '../security/tool-text';
import { memoryAliases, memoryTools } from '../memory/tools';
import { editAgentFile } from '../memory/self-edit';
import { isHeartbeatTool } from '../../workflows/rules/heartbeat-rules';
import { agentSendMessage } from '../mailbox/tools';
import { subagentTools } from './subagent-tools';

export type Scenario = 'task' | 'chat' | 'heartbeat' | 'reflection' | 'consolidation' | 'subagent';

/** Every tool the worker knows, by name. Extended by other modules through `registerTools`. */
const ALL_TOOLS = new Map<string, ToolSpec>();
/** Which tools each scenario offers the model. */
const SCENARIO_TOOLS: Record<Scenario, Set<string>> = {
  task: new Set(),
  chat: new Set(),
  heartbeat: new Set(),
  reflection: new Set(),
  consolidation: new Set(),
  subagent: new Set(),
};

/** Every scenario the registry knows, for code and tests that must cover them all. */
export const SCENARIOS = Object.keys(SCENARIO_TOOLS) as Scenario[];

/** Every tool the worker knows, whatever the scenario. */
export function allRegisteredTools(): ReadonlyMap<string, ToolSpec> {
  return ALL_TOOLS;
}

export function registerTools(tools: ToolSpec[], scenarios: Scenario[]): void {
  for (const tool of tools) {
    ALL_TOOLS.set(tool.name, tool);
    for (const scenario of scenarios) SCENARIO_TOOLS[scenario].add(tool.name);
  }
}

registerTools([fileRead, fileWrite, readToolOutput], ['task', 'chat']);
registerTools([taskSubmitReview, taskNote, requestUserApproval, notifyUser, shellExecute], ['task']);

export function toolsForScenario(scenario: Scenario): Map<string, ToolSpec> {
  const out = new Map<string, ToolSpec>();
  for (const name of [...SCENARIO_TOOLS[scenario]].sort()) out.set(name, ALL_TOOLS.get(name)!);
  return out;
}

/** A permission flag of the agent config (seed D2). */
export type PermissionFlag = keyof NonNullable<AgentConfig['permissions']>;

/** Which permission flag each gated tool needs; a tool not listed here needs none. */
export const TOOL_PERMISSIONS: Readonly<Record<string, PermissionFlag>> = {
  shell_execute: 'shell',
  file_write: 'writeFiles',
  task_create: 'manageTasks',
  task_update: 'manageTasks',
  task_comment: 'manageTasks',
  notify_user: 'contactHumans',
  request_user_approval: 'contactHumans',
  agent_send_message: 'messageAgents',
  goal_create: 'manageGoals',
  goal_update: 'manageGoals',
};

/**
 * THE tool set of one agent in one scenario: the scenario's tools minus those whose permission flag the
 * agent's config withholds (a flag is granted unless `false`). The LLM step sends exactly these to the
 * model and builds the prompt from them; the ledger dispatches only these, so a call to a withheld tool
 * is answered "Unknown tool … Use only the tools you were given" and never runs.
 */
export function toolsForAgent(scenario: Scenario, config: Pick<AgentConfig, 'permissions'>): Map<string, ToolSpec> {
  const tools = toolsForScenario(scenario);
  for (const name of [...tools.keys()]) {
    const flag = TOOL_PERMISSIONS[name];
    if (flag && config.permissions?.[flag] === false) tools.delete(name);
  }
  return tools;
}

/** Every permission flag with its effective value (granted unless `false`), for the prompt's capability list. */
export function grantedPermissions(config: Pick<AgentConfig, 'permissions'>): Record<PermissionFlag, boolean> {
  const flags = [...new Set(Object.values(TOOL_PERMISSIONS))];
  return Object.fromEntries(flags.map((flag) => [flag, config.permissions?.[flag] !== false])) as Record<PermissionFlag, boolean>;
}

/** Tool definitions in a stable order (sorted by name), so the tool block is cache-stable. */
export function toolDefinitions(tools: ReadonlyMap<string, ToolSpec>): ToolDefinition[] {
  return [...tools.values()].map((tool) => {
    const { $schema: _ignored, ...inputSchema } = z.toJSONSchema(tool.schema) as Record<string, unknown>;
    return { name: tool.name, description: tool.description, inputSchema };
  });
}

/** A one-line description of a call for activity summaries, tolerant of invalid arguments. */
export function summarizeCall(tools: ReadonlyMap<string, ToolSpec>, name: string, input: unknown): string {
  const spec = tools.get(name);
  if (!spec?.summarize) return name;
  const parsed = spec.schema.safeParse(input);
  return parsed.success ? safeLine(spec.summarize(parsed.data)).slice(0, 120) : name;
}

// Memory (issue 5): seed D1's memory tools and legacy aliases, and seed D2's edit_agent_file. Heartbeats
// offer only what D1's heartbeat whitelist allows; reflections offer memory tools only.
registerTools([...memoryTools, ...memoryAliases], ['task', 'chat', 'reflection']);
registerTools([editAgentFile], ['task', 'chat']);
registerTools([...memoryTools, ...memoryAliases, editAgentFile].filter((t) => isHeartbeatTool(t.name)), ['heartbeat']);

// Task management and the humans' inbox (issue 12). Heartbeats get the ones D1's whitelist allows.
registerTools(taskManagementTools, ['task', 'chat']);
registerTools([...taskManagementTools, notifyUser, requestUserApproval].filter((t) => isHeartbeatTool(t.name)), ['heartbeat']);
// Goals (seed D1 F3): the heartbeat's goal loop.
registerTools(goalTools.filter((t) => isHeartbeatTool(t.name)), ['heartbeat']);
// Conversations (issue 11): agents message each other from chat.
registerTools([agentSendMessage], ['chat']);

// Sub-agents (issue 12): the task round spawns them (it runs them as child workflows); chat does not,
// since its run workflow cannot. A sub-agent works with files, the shell and memory reads under the same
// governance, and can neither spawn further sub-agents nor submit the task.
registerTools(subagentTools, ['task']);
/** Memory tools a sub-agent may use: reads only; what is worth keeping is the parent's call. */
const SUBAGENT_MEMORY_TOOLS = new Set(['memory_search']);
registerTools([fileRead, fileWrite, readToolOutput, shellExecute, ...memoryTools.filter((t) => SUBAGENT_MEMORY_TOOLS.has(t.name))], ['subagent']);
