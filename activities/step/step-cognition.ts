import type { Kysely } from 'kysely';
import type { AgentRow, Database, TaskRow } from '../../schema/database';
import type { ChatResult, ChatRouter, ToolUseBlock } from '../llm/types';
import type { PromptInputs } from '../context';
import type { AgentConfig } from '../store/agents';
import { loadDepthSignals, prepareCognitiveContext, type CognitiveOutcome, type CognitiveRun } from './cognitive';
import type { LlmStepInput } from './types';

/** Ours: tool calls listed in the meta-cognitive evaluation's view of the response. */
const EVALUATION_TOOL_CALLS_MAX = 10;

/** Characters of a call's arguments in that view: enough to tell what it does. */
const EVALUATION_ARGUMENTS_PREVIEW_CHARS = 200;

/** Runs the cognitive preparation pipeline for the first step of a task attempt (never throws but on cancel). */
export async function prepareCognition(
  db: Kysely<Database>,
  router: ChatRouter,
  step: {
    input: LlmStepInput;
    key: string;
    agent: AgentRow;
    task: TaskRow;
    config: AgentConfig;
    inputs: PromptInputs;
    signal: AbortSignal | undefined;
  },
): Promise<{ run: CognitiveRun; outcome: CognitiveOutcome }> {
  const { input, key, agent, task, config, inputs, signal } = step;
  const run: CognitiveRun = {
    agentId: agent.id,
    taskId: task.id,
    sessionId: input.sessionId,
    stepKey: key,
    scenario: input.scenario,
    situation: {
      agent: { name: agent.name, role: agent.description || undefined, soul: agent.soul_md, agents: agent.agents_md },
      stimulus: { kind: 'task', title: task.title, text: task.description },
      recentActivity: (inputs.recentActivity ?? []).map((e) => `${e.type}: ${e.detail}`),
      knowledgeTitles: (inputs.knowledge ?? []).map((k) => k.heading),
    },
    ...(config.cognitive?.maxDepth !== undefined ? { maxDepth: config.cognitive.maxDepth } : {}),
    ...(config.cognitive?.timeoutMs !== undefined ? { timeoutMs: config.cognitive.timeoutMs } : {}),
    ...(signal ? { signal } : {}),
  };
  let signals = { hasFailedTasks: false, hasBlockers: false };
  try {
    signals = await loadDepthSignals(db, agent.id, task.id, new Date());
  } catch {
    // Depth signals only upgrade the depth; without them the scenario's base depth applies.
  }
  return { run, outcome: await prepareCognitiveContext({ db, router }, run, signals) };
}

/** The main response as the meta-cognitive evaluation sees it: its text and the tools it called. */
export function responseDigest(content: ChatResult['content']): string {
  const text = content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('\n');
  const calls = content
    .filter((b): b is ToolUseBlock => b.type === 'tool_use')
    .slice(0, EVALUATION_TOOL_CALLS_MAX)
    .map((b) => `→ ${b.name} ${JSON.stringify(b.input ?? {}).slice(0, EVALUATION_ARGUMENTS_PREVIEW_CHARS)}`);
  return [text, ...calls].filter(Boolean).join('\n');
}
