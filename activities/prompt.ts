import type { AgentRow, TaskRow } from '../schema/database';
import type { SystemSegment } from './llm/types';
import type { Scenario } from './tools/registry';

/**
 * Builds the system prompt for one LLM step. Interim: a three-tier layout (stable identity, semi-stable
 * scenario, dynamic timestamp) until the context engine's full assembly is wired in.
 */
export function systemPromptFor(agent: AgentRow, scenario: Scenario, _task: TaskRow | undefined, now: Date): SystemSegment[] {
  const tier1 = [
    `# Identity — ${agent.name} (agent id ${agent.id})`,
    agent.soul_md.trim(),
    '# Role and operating instructions',
    agent.agents_md.trim(),
    '# Tools',
    agent.tools_md.trim(),
  ].filter(Boolean).join('\n\n');
  const tier2 = `# Scenario: ${scenario}\nWork inside your workspace. Use tools one at a time and read their results before continuing.`;
  const tier3 = `Current time: ${now.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
  return [
    { text: tier1, cacheBreakpoint: true },
    { text: tier2, cacheBreakpoint: true },
    { text: tier3, cacheBreakpoint: false },
  ];
}
