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
import { groupTools } from '../mailbox/group-tools';
import type { ConversationScenario } from '../../workflows/rules/conversation';
import { createDiscoverTools } from './discover-tools';
import { subagentTools } from './subagent-tools';
import { webTools } from './web/tools';

/** The scenarios of runs that offer tools: task rounds, sub-agents, background runs, and the conversation scenarios. */
export type Scenario = 'task' | 'heartbeat' | 'reflection' | 'consolidation' | 'subagent' | ConversationScenario;

/** Every tool the worker knows, by name. Extended by other modules through `registerTools`. */
const ALL_TOOLS = new Map<string, ToolSpec>();
/** Which tools each scenario offers the model. */
const SCENARIO_TOOLS: Record<Scenario, Set<string>> = {
  task: new Set(),
  chat: new Set(),
  heartbeat: new Set(),
  reflection: new Set(),
  consolidation: new Set(),
  a2a: new Set(),
  comment_response: new Set(),
  group_chat: new Set(),
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
  for (const name of [...SCENARIO_TOOLS[scenario]].sort()) {
    const spec = ALL_TOOLS.get(name)!;
    if (spec.offered?.() !== false) out.set(name, spec);
  }
  return out;
}

/** A permission flag of the agent config. */
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
  agent_send_group_message: 'messageAgents',
  agent_list_group_chats: 'messageAgents',
  agent_create_group_chat: 'messageAgents',
  agent_list_colleagues: 'messageAgents',
  goal_create: 'manageGoals',
  goal_update: 'manageGoals',
  web_fetch: 'canCallExternalTools',
  web_search: 'canCallExternalTools',
};

/**
 * THE tool set of one agent in one scenario: the scenario's tools minus those whose permission flag the
 * agent's config withholds (a flag is granted unless `false`). The LLM step sends exactly these to the
 * model and builds the prompt from them; the ledger dispatches only these, so a call to a withheld tool
 * is answered "Unknown tool … Use only the tools you were given" and never runs.
 */
export function toolsForAgent(
  scenario: Scenario,
  config: Pick<AgentConfig, 'permissions'>,
  activated: ReadonlySet<string> = NO_ACTIVATIONS,
): Map<string, ToolSpec> {
  const tools = toolsForScenario(scenario);
  // The tool selector: withheld tools join once discover_tools activated them.
  for (const name of [...activated].sort()) {
    const spec = DISCOVERABLE_TOOLS[scenario].has(name) ? ALL_TOOLS.get(name) : undefined;
    if (spec && !tools.has(name)) tools.set(name, spec);
  }
  for (const name of [...tools.keys()]) {
    const flag = TOOL_PERMISSIONS[name];
    if (flag && !permissionGranted(config, flag)) tools.delete(name);
  }
  return tools;
}

const NO_ACTIVATIONS: ReadonlySet<string> = new Set();

/**
 * The tool selector's discoverable group ("activated via discover_tools"): tools a scenario
 * does not offer until the agent activates them with discover_tools. Permissions still apply.
 */
const DISCOVERABLE_TOOLS = Object.fromEntries(SCENARIOS.map((scenario) => [scenario, new Set<string>()])) as Record<
  Scenario,
  Set<string>
>;

export function registerDiscoverableTools(tools: ToolSpec[], scenarios: Scenario[]): void {
  for (const tool of tools) {
    ALL_TOOLS.set(tool.name, tool);
    for (const scenario of scenarios)
      if (!SCENARIO_TOOLS[scenario].has(tool.name)) DISCOVERABLE_TOOLS[scenario].add(tool.name);
  }
}

/** The tools a scenario withholds until discover_tools activates them. */
export function discoverableTools(scenario: Scenario): Map<string, ToolSpec> {
  return new Map([...DISCOVERABLE_TOOLS[scenario]].sort().map((name) => [name, ALL_TOOLS.get(name)!]));
}

/**
 * Flags withheld unless set to `true`: tools that reach outside the runtime (the web, MCP servers) are
 * something an operator grants on purpose. Every other flag is granted unless set to `false`.
 */
const WITHHELD_UNLESS_GRANTED: ReadonlySet<PermissionFlag> = new Set(['canCallExternalTools']);

/** Whether the agent has `flag` (see WITHHELD_UNLESS_GRANTED for the defaults). */
export function permissionGranted(config: Pick<AgentConfig, 'permissions'>, flag: PermissionFlag): boolean {
  const value = config.permissions?.[flag];
  return WITHHELD_UNLESS_GRANTED.has(flag) ? value === true : value !== false;
}

/** Every permission flag with its effective value, for the prompt's capability list. */
export function grantedPermissions(config: Pick<AgentConfig, 'permissions'>): Record<PermissionFlag, boolean> {
  const flags = [...new Set(Object.values(TOOL_PERMISSIONS))];
  return Object.fromEntries(flags.map((flag) => [flag, permissionGranted(config, flag)])) as Record<
    PermissionFlag,
    boolean
  >;
}

/** Tool definitions in a stable order (sorted by name), so the tool block is cache-stable. */
export function toolDefinitions(tools: ReadonlyMap<string, ToolSpec>): ToolDefinition[] {
  return [...tools.values()].map((tool) => {
    const { $schema: _ignored, ...inputSchema } =
      tool.inputJsonSchema ?? (z.toJSONSchema(tool.schema) as Record<string, unknown>);
    return { name: tool.name, description: tool.description, inputSchema };
  });
}

/** A one-line description of a call for activity summaries, tolerant of invalid arguments. */
export function summarizeCall(
  tools: ReadonlyMap<string, ToolSpec>,
  name: string,
  input: unknown,
  secrets?: readonly string[],
): string {
  const spec = tools.get(name);
  if (!spec?.summarize) return name;
  const parsed = spec.schema.safeParse(input);
  return parsed.success ? safeLine(spec.summarize(parsed.data), secrets).slice(0, 120) : name;
}

// Memory (issue 5): the memory tools and their legacy aliases, and edit_agent_file. Heartbeats
// offer only what the heartbeat whitelist allows; reflections offer memory tools only.
registerTools([...memoryTools, ...memoryAliases], ['task', 'chat', 'reflection']);
registerTools([editAgentFile], ['task', 'chat']);
registerTools(
  [...memoryTools, ...memoryAliases, editAgentFile].filter((t) => isHeartbeatTool(t.name)),
  ['heartbeat'],
);

// Task management and the humans' inbox (issue 12). Heartbeats get the ones their whitelist allows.
registerTools(taskManagementTools, ['task', 'chat']);
registerTools(
  [...taskManagementTools, notifyUser, requestUserApproval].filter((t) => isHeartbeatTool(t.name)),
  ['heartbeat'],
);
// Goals: the heartbeat's goal loop.
registerTools(
  goalTools.filter((t) => isHeartbeatTool(t.name)),
  ['heartbeat'],
);
// Conversations (issue 11): agents message each other from chat, and from task rounds (
// task execution reaches agents with agent_send_message); an answer about a task joins its running round.
registerTools([agentSendMessage], ['chat', 'task']);
// The heartbeat reaches colleagues too (the heartbeat whitelist has it): fire-and-forget, the answer arrives
// in the agent's mailbox and is answered in an a2a run, which suits a check-in that does not wait.
registerTools(
  [agentSendMessage].filter((t) => isHeartbeatTool(t.name)),
  ['heartbeat'],
);
// Conversation scenarios: answering an agent, a comment thread or a group is
// coordination, so these runs read and plan but do not write files or edit the agent's own files
// (sustained work becomes a task); notify_user escalates to a human, as the scenario sections say.
const CONVERSING: Scenario[] = ['a2a', 'comment_response', 'group_chat'];
registerTools(
  [fileRead, readToolOutput, ...memoryTools, ...memoryAliases, ...taskManagementTools, agentSendMessage, notifyUser],
  CONVERSING,
);
// The agent-to-agent group tools, wherever an agent converses.
registerTools(groupTools, ['chat', ...CONVERSING]);
// Skills and tool discovery (issue 12): discover_tools in task and chat; goal tools
// (heartbeat tools) are withheld there until discover_tools activates them.
registerTools(
  [
    createDiscoverTools({
      withheld: (scenario) => (scenario in DISCOVERABLE_TOOLS ? discoverableTools(scenario as Scenario) : new Map()),
      permitted: (name, config) => !TOOL_PERMISSIONS[name] || permissionGranted(config, TOOL_PERMISSIONS[name]),
    }),
  ],
  ['task', 'chat'],
);
registerDiscoverableTools(goalTools, ['task', 'chat']);

// Sub-agents (issue 12): the task round spawns them (it runs them as child workflows); chat does not,
// since its run workflow cannot. A sub-agent works with files, the shell and memory reads under the same
// governance, and can neither spawn further sub-agents nor submit the task.
registerTools(subagentTools, ['task']);
/** Memory tools a sub-agent may use: reads only; what is worth keeping is the parent's call. */
const SUBAGENT_MEMORY_TOOLS = new Set(['memory_search']);
registerTools(
  [fileRead, fileWrite, readToolOutput, shellExecute, ...memoryTools.filter((t) => SUBAGENT_MEMORY_TOOLS.has(t.name))],
  ['subagent'],
);

// The web (issue 22): fetching and searching where an agent researches: task rounds, chat and sub-agents.
registerTools(webTools, ['task', 'chat', 'subagent']);
