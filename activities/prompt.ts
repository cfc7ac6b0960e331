import type { Kysely } from 'kysely';
import type { AgentRow, Database, TaskRow } from '../schema/database';
import {
  buildSummarizerPrompt,
  buildSystemPrompt,
  countToolTokens,
  prepareMessages,
  SUMMARIZER_MAX_OUTPUT_TOKENS,
  SUMMARIZER_SYSTEM_PROMPT,
  SUMMARIZER_TEMPERATURE,
  type PromptInputs,
  type PromptTask,
  type PromptWarning,
} from './context';
import { lookupModel } from './llm/catalog';
import type { ChatMessage, SystemSegment, ToolDefinition } from './llm/types';
import type { ChatRouter } from './llm-step';
import { agentConfig } from './store/agents';
import type { Scenario } from './tools/registry';

/** Task-board rows fetched for the prompt; the context engine caps what it shows (15 own). */
const TASK_BOARD_FETCH = 15;
/** Recent activity events fetched (seed D2: the last 20). */
const RECENT_ACTIVITY_FETCH = 20;
/** Recent runs fetched (seed D2: the last 5). */
const RECENT_RUNS_FETCH = 5;

export interface AssembledContext {
  system: SystemSegment[];
  messages: ChatMessage[];
  messageCacheBreakpoint?: number;
  maxTokens: number;
  /** The model the prompt was budgeted for (the first candidate of the agent's route). */
  model: string;
  systemTokens: number;
  warnings: PromptWarning[];
  stages: string[];
}

/** Loads what the prompt shows about the agent's world (tasks, activity, runs) from PostgreSQL. */
export async function loadPromptInputs(
  db: Kysely<Database>,
  agent: AgentRow,
  scenario: Scenario,
  task: TaskRow | undefined,
  tools: ToolDefinition[],
  now: Date,
  model: string,
  extra: Partial<PromptInputs> = {},
): Promise<PromptInputs> {
  const config = agentConfig(agent);
  const [own, events, runs] = await Promise.all([
    db
      .selectFrom('tasks')
      .select(['id', 'title', 'priority', 'state', 'description'])
      .where('agent_id', '=', agent.id)
      .where('state', 'in', ['pending', 'in_progress', 'blocked', 'review'])
      .orderBy('updated_at', 'desc')
      .limit(TASK_BOARD_FETCH)
      .execute(),
    db
      .selectFrom('task_events')
      .innerJoin('tasks', 'tasks.id', 'task_events.task_id')
      .select(['task_events.type', 'task_events.created_at', 'tasks.title'])
      .where('tasks.agent_id', '=', agent.id)
      .where('task_events.type', 'in', ['task-created', 'state-changed', 'review-submitted', 'approval-decided', 'note-added'])
      .orderBy('task_events.id', 'desc')
      .limit(RECENT_ACTIVITY_FETCH)
      .execute(),
    db
      .selectFrom('tasks')
      .select(['title', 'state', 'result_summary', 'updated_at'])
      .where('agent_id', '=', agent.id)
      .where('state', 'in', ['completed', 'failed', 'cancelled', 'review'])
      .orderBy('updated_at', 'desc')
      .limit(RECENT_RUNS_FETCH)
      .execute(),
  ]);
  return {
    scenario,
    agent: {
      id: agent.id,
      name: agent.name,
      role: agent.description || undefined,
      files: { soul: agent.soul_md, agents: agent.agents_md, heartbeat: agent.heartbeat_md, tools: agent.tools_md },
      permissions: { canEditOwnFiles: config.canEditOwnFiles === true },
    },
    model,
    now,
    timezone: config.timezone,
    workspace: { root: agent.workspace_dir },
    tasks: {
      mine: own.map(
        (t): PromptTask => ({ id: t.id, title: t.title, priority: toPriority(t.priority), status: t.id === task?.id ? `${t.state} (current)` : t.state, description: t.description }),
      ),
    },
    recentActivity: events.reverse().map((e) => ({ at: e.created_at, type: e.type, detail: e.title })),
    recentRuns: runs.reverse().map((r) => ({ at: r.updated_at, kind: 'task', status: r.state, summary: `${r.title}${r.result_summary ? `: ${r.result_summary}` : ''}` })),
    tools,
    ...extra,
  };
}

/**
 * Builds what one LLM call sends: the three-tier system prompt (seed D1 B1–B4 with seed D2's budgets)
 * and the session's messages prepared by the compression pipeline (seed D1 C1–C11), with the cheap
 * tier as the summariser.
 */
export async function assembleContext(
  router: ChatRouter,
  inputs: PromptInputs,
  messages: ChatMessage[],
  tools: ToolDefinition[],
): Promise<AssembledContext> {
  const model = inputs.model ?? 'unknown';
  const info = lookupModel(model);
  const prompt = buildSystemPrompt(inputs);
  const prepared = await prepareMessages(messages, {
    contextWindow: info.contextWindow,
    modelMaxOutput: info.maxOutput,
    systemTokens: prompt.tokenEstimate,
    toolTokens: countToolTokens(tools, model),
    model,
    summarize: async (text) => {
      const result = await router.chat(
        {
          system: [{ text: SUMMARIZER_SYSTEM_PROMPT, cacheBreakpoint: false }],
          messages: [{ role: 'user', content: [{ type: 'text', text }] }],
          tools: [],
          maxTokens: SUMMARIZER_MAX_OUTPUT_TOKENS,
          temperature: SUMMARIZER_TEMPERATURE,
        },
        { tier: 'cheap' },
      );
      return result.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('\n');
    },
  });
  return {
    system: prompt.segments,
    messages: prepared.messages,
    messageCacheBreakpoint: prepared.messageCacheBreakpoint,
    maxTokens: prepared.maxOutputTokens,
    model,
    systemTokens: prompt.tokenEstimate,
    warnings: prompt.warnings,
    stages: prepared.stats.stagesApplied,
  };
}

export { buildSummarizerPrompt };

function toPriority(p: string): PromptTask['priority'] {
  return (['critical', 'urgent', 'high', 'medium', 'low'] as const).find((x) => x === p) ?? 'medium';
}
