/**
 * Prompt text that names tools is rendered from the tools offered in the call: a line that names a
 * tool the agent does not have is left out, so the prompt never promises a tool that would come back
 * as "unknown tool" and waste a turn. `test/unit/prompt-tool-names.test.ts` enforces it for every scenario.
 */
import type { PromptInputs } from './prompt-types';

/** A line of prompt text; with `needs`, it is rendered only when every tool it names is offered. */
export type PromptLine = string | { readonly needs: readonly string[]; readonly text: string };

/** A line that names `tools` (one name or several). */
export function withTools(tools: string | readonly string[], text: string): PromptLine {
  return { needs: typeof tools === 'string' ? [tools] : tools, text };
}

export function renderLines(lines: readonly PromptLine[], offered: ReadonlySet<string>): string[] {
  return lines.flatMap((line) =>
    typeof line === 'string' ? [line] : line.needs.every((t) => offered.has(t)) ? [line.text] : [],
  );
}

/** The names of the tools offered in this call (none when the caller passed no tools). */
export function offeredToolNames(inputs: Pick<PromptInputs, 'tools'>): ReadonlySet<string> {
  return new Set((inputs.tools ?? []).map((t) => t.name));
}

/** `text` when `tool` is offered, else ''. For a clause inside a line (an overflow hint, a footer). */
export function mention(offered: ReadonlySet<string>, tool: string, text: string): string {
  return offered.has(tool) ? text : '';
}
