/**
 * `discover_tools`: finds skills and tools the agent does not have in view, and
 * activates them for the rest of the session (and, in a task, the task's later rounds):
 *
 * - a skill's whole body enters the prompt's Active Skills section (Tier 2, fenced as user-provided
 *   reference material, ≤ 4,000 tokens for all active skills);
 * - a tool the tool selector withholds in this scenario is offered from the next step on.
 *
 * Permissions always win: a tool the agent's permission flags withhold is listed as not
 * permitted and cannot be activated. Activations are rows in `skill_activations`, so a resumed or
 * retried step sees exactly what was activated before the crash.
 */
import { z } from 'zod';
import { relevanceKeywords, relevanceScore } from '../context/sections-dynamic';
import type { SkillSummary } from '../context/prompt-types';
import { agentConfig, findAgent, type AgentConfig } from '../store/agents';
import { loadActivations, recordActivation, visibleSkills } from '../store/skills';
import { defineTool, type ToolSpec } from './types';

/** Matches listed per kind: enough to choose from, short enough to read. */
export const DISCOVER_RESULTS_MAX = 10;
/** Names one call may activate: each active skill costs prompt tokens on every later step. */
export const DISCOVER_ACTIVATE_MAX = 5;
/** One description line in the result. */
const DISCOVER_DESCRIPTION_CHARS = 200;

export const DISCOVER_TOOLS = 'discover_tools';

/** What the registry tells discover_tools: the tools withheld in a scenario, and whether the agent may use one. */
export interface DiscoverLookup {
  /** Tools the scenario does not offer until activated (the tool selector's discoverable group). */
  withheld(scenario: string): ReadonlyMap<string, ToolSpec>;
  /** False when a permission flag of the agent withholds the tool. */
  permitted(name: string, config: Pick<AgentConfig, 'permissions'>): boolean;
}

const args = z
  .object({
    query: z.string().trim().min(1).max(500).describe('What you need, in a few words (words of 3+ letters count)'),
    activate: z
      .array(z.string().min(1).max(100))
      .max(DISCOVER_ACTIVATE_MAX)
      .optional()
      .describe('Names of skills or tools from the results to activate for the rest of this session'),
  })
  .strict();

function searchable(item: SkillSummary): SkillSummary {
  // "csv-import" should match the query "csv import": the name's parts count as words too.
  return { ...item, name: `${item.name} ${item.name.replace(/[-_]+/g, ' ')}` };
}

function line(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > DISCOVER_DESCRIPTION_CHARS ? `${flat.slice(0, DISCOVER_DESCRIPTION_CHARS - 1)}…` : flat;
}

export function createDiscoverTools(lookup: DiscoverLookup): ToolSpec {
  return defineTool({
    name: DISCOVER_TOOLS,
    description:
      "Find skills (reusable instructions) and extra tools by keywords, and activate them: an activated skill's full instructions appear in your prompt, an activated tool is offered from your next step. Call with a query to search; add `activate` with names from the results (or query an exact name) to activate.",
    schema: args,
    // Activation is an idempotent insert: a retry finds the same rows.
    sideEffecting: false,
    summarize: (a) => `discover_tools: ${a.query}${a.activate?.length ? ` (activate ${a.activate.join(', ')})` : ''}`,
    run: async (input, ctx) => {
      const agent = await findAgent(ctx.db, ctx.agentId);
      const config: AgentConfig = agent ? agentConfig(agent) : {};
      const [session, skills, active] = await Promise.all([
        ctx.db.selectFrom('sessions').select('kind').where('id', '=', ctx.sessionId).executeTakeFirst(),
        visibleSkills(ctx.db, ctx.agentId, config.org),
        loadActivations(ctx.db, ctx.sessionId, ctx.taskId),
      ]);
      const withheld = lookup.withheld(session?.kind ?? 'task');
      const keywords = relevanceKeywords(input.query);
      const wanted = new Set(input.activate ?? []);
      const exact = input.query.trim().toLowerCase();
      if (skills.some((s) => s.name === exact) || withheld.has(exact)) wanted.add(exact);
      if (keywords.size === 0 && wanted.size === 0) {
        return {
          content:
            'Give a query with at least one word of 3 or more letters (e.g. "csv import"), or an exact skill or tool name.',
          isError: true,
        };
      }

      const rank = <T extends SkillSummary>(items: T[]): T[] =>
        items
          .map((item, index) => ({ item, index, score: relevanceScore(searchable(item), keywords) }))
          .filter((x) => x.score > 0)
          .sort((a, b) => b.score - a.score || a.index - b.index)
          .slice(0, DISCOVER_RESULTS_MAX)
          .map((x) => x.item);
      const skillHits = rank(skills.map((s) => ({ ...s })));
      const toolHits = rank(
        [...withheld.values()].map((t) => ({ name: t.name, description: t.description, category: 'tool' })),
      );

      const activated: string[] = [];
      const problems: string[] = [];
      for (const name of wanted) {
        const skill = skills.find((s) => s.name === name);
        const tool = withheld.get(name);
        if (skill) {
          await recordActivation(ctx.db, {
            sessionId: ctx.sessionId,
            agentId: ctx.agentId,
            ...(ctx.taskId ? { taskId: ctx.taskId } : {}),
            kind: 'skill',
            name,
          });
          activated.push(`skill ${name} (its full instructions are in your prompt from your next step)`);
        } else if (tool) {
          if (!lookup.permitted(name, config)) {
            problems.push(`${name}: your permissions do not allow this tool`);
            continue;
          }
          await recordActivation(ctx.db, {
            sessionId: ctx.sessionId,
            agentId: ctx.agentId,
            ...(ctx.taskId ? { taskId: ctx.taskId } : {}),
            kind: 'tool',
            name,
          });
          activated.push(`tool ${name} (offered from your next step)`);
        } else {
          problems.push(`${name}: no skill or activatable tool has this name`);
        }
      }

      const parts: string[] = [];
      if (skillHits.length) {
        parts.push(
          `Skills:\n${skillHits
            .map((s) => {
              const state =
                s.bound || active.skills.has(s.name)
                  ? active.skills.has(s.name)
                    ? ' (active)'
                    : ' (bound: summary in your prompt)'
                  : '';
              return `- **${s.name}**${s.category ? ` [${s.category}]` : ''}: ${line(s.description)}${state}`;
            })
            .join('\n')}`,
        );
      }
      if (toolHits.length) {
        parts.push(
          `Tools you can activate:\n${toolHits
            .map(
              (t) =>
                `- ${t.name}: ${line(t.description)}${active.tools.has(t.name) ? ' (active)' : lookup.permitted(t.name, config) ? '' : ' (not permitted)'}`,
            )
            .join('\n')}`,
        );
      }
      if (!parts.length) parts.push(`No skill or tool matches "${line(input.query)}". Try other words.`);
      if (activated.length) parts.push(`Activated: ${activated.join('; ')}.`);
      if (problems.length) parts.push(`Not activated: ${problems.join('; ')}.`);
      return { content: parts.join('\n\n'), ...(problems.length && !activated.length ? { isError: true } : {}) };
    },
  });
}
