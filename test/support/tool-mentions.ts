/**
 * Finds tool-like names in prompt text, generically: every snake_case identifier (all tool names are
 * snake_case) that is not a tool offered in the call, not a parameter of an offered tool, not a task
 * state and not one of the few listed non-tool words. A newly invented tool name in a prompt fails.
 */
import { z } from 'zod';
import type { ToolSpec } from '../../activities/tools/types';
import { HEARTBEAT_MANAGER_TOOLS, HEARTBEAT_TOOL_WHITELIST } from '../../workflows/rules/heartbeat-rules';
import { TASK_STATES } from '../../workflows/rules/task-state';

const SNAKE_CASE = /\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b/g;

/**
 * Snake_case words in prompts that are not tools, each for a reason. Kept short on purpose: the test
 * checks that none of them is a tool name known anywhere.
 */
export const NON_TOOL_WORDS: ReadonlySet<string> = new Set([]);

/**
 * Prefixes of ids that prompts show as data (observation ids in the dream, offloaded outputs,
 * notifications). No tool name starts with one (the test checks).
 */
export const DATA_ID_PREFIXES: readonly string[] = ['obs_', 'out_', 'ntf_'];

/** Tool names known anywhere: registered tools and the design's whitelists (tools not built yet included). */
export function knownToolNames(registered: ReadonlyMap<string, ToolSpec>): Set<string> {
  return new Set([...registered.keys(), ...HEARTBEAT_TOOL_WHITELIST, ...HEARTBEAT_MANAGER_TOOLS]);
}

/** The parameter names of the given tools (a prompt may name `parent_task_id` when task_create is offered). */
export function parameterNames(tools: Iterable<ToolSpec>): Set<string> {
  const out = new Set<string>();
  for (const tool of tools) {
    const schema = z.toJSONSchema(tool.schema) as { properties?: Record<string, unknown> };
    for (const name of Object.keys(schema.properties ?? {})) out.add(name);
  }
  return out;
}

/** The snake_case names in `text` that are neither offered tools nor allowed non-tool words. */
export function unofferedToolNames(
  text: string,
  offered: ReadonlySet<string>,
  offeredParameters: ReadonlySet<string>,
): string[] {
  const found = new Set(text.match(SNAKE_CASE) ?? []);
  return [...found].filter(
    (word) =>
      !offered.has(word) &&
      !offeredParameters.has(word) &&
      !(TASK_STATES as readonly string[]).includes(word) &&
      !NON_TOOL_WORDS.has(word) &&
      !DATA_ID_PREFIXES.some((prefix) => word.startsWith(prefix)),
  );
}
