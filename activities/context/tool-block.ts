/**
 * Stage 3a of prepareMessages: a tool block — an assistant message with tool calls
 * and the user message carrying their results — becomes one short assistant message. Tool names and
 * truncated arguments survive; error results keep 200 characters (they help the model self-correct),
 * research results 500, other results 100. Four templates rotate, chosen by a hash of the first call
 * id, so the same block always compacts to the same text (the cached prefix stays stable) while
 * neighbouring blocks read differently (the model does not learn to imitate one pattern).
 */
import type { ChatMessage, ToolResultBlock, ToolUseBlock } from '../llm/types';
import {
  RESEARCH_TOOL_NAMES,
  SUMMARIZER_MESSAGE_CHARS,
  TOOL_BLOCK_ARGS_CHARS,
  TOOL_BLOCK_ERROR_CHARS,
  TOOL_BLOCK_OTHER_RESULT_CHARS,
  TOOL_BLOCK_RESEARCH_RESULT_CHARS,
  TOOL_BLOCK_TEMPLATE_COUNT,
} from './limits';
import { inline } from './neutralize';
import { safeJson } from './tokens';

const RESEARCH_TOOLS = new Set(RESEARCH_TOOL_NAMES);

export function isResearchTool(name: string): boolean {
  return RESEARCH_TOOLS.has(name) || name.endsWith('_search');
}

/** How much of a result survives compaction. */
export function resultAllowance(toolName: string, result: ToolResultBlock | undefined): number {
  if (!result) return TOOL_BLOCK_ERROR_CHARS;
  if (result.isError) return TOOL_BLOCK_ERROR_CHARS;
  return isResearchTool(toolName) ? TOOL_BLOCK_RESEARCH_RESULT_CHARS : TOOL_BLOCK_OTHER_RESULT_CHARS;
}

type Line = { name: string; args: string; outcome: string; error: boolean };

const TEMPLATES: ReadonlyArray<{ header: string; line: (l: Line) => string }> = [
  {
    header: '[Earlier tool use, compacted]',
    line: (l) => `- ${l.name}(${l.args}) → ${l.error ? 'error: ' : ''}${l.outcome}`,
  },
  {
    header: '(Compacted record of earlier steps)',
    line: (l) => `* Called ${l.name} with ${l.args}; ${l.error ? 'it failed' : 'result'}: ${l.outcome}`,
  },
  {
    header: 'Summary of earlier tool calls:',
    line: (l) => `- tool ${l.name}, input ${l.args} — ${l.error ? 'failed' : 'returned'}: ${l.outcome}`,
  },
  { header: '[Condensed history]', line: (l) => `> ${l.name} ${l.args} ⇒ ${l.error ? '[error] ' : ''}${l.outcome}` },
];

/** FNV-1a of a string: a deterministic template choice without a crypto import. */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export function templateIndexFor(firstCallId: string): number {
  return hash(firstCallId) % TOOL_BLOCK_TEMPLATE_COUNT;
}

/**
 * Compacts `[assistant with tool calls, user with results]` into one assistant message (kind
 * `summary`). The assistant's own text keeps its first 300 characters, the summariser's per-message
 * allowance.
 */
export function summarizeToolBlock(assistant: ChatMessage, results: ChatMessage | undefined): ChatMessage {
  const calls = assistant.content.filter((b): b is ToolUseBlock => b.type === 'tool_use');
  const byId = new Map<string, ToolResultBlock>();
  for (const block of results?.content ?? []) if (block.type === 'tool_result') byId.set(block.toolUseId, block);
  const template = TEMPLATES[templateIndexFor(calls[0]?.id ?? '')] ?? TEMPLATES[0]!;

  const lines = calls.map((call) => {
    const result = byId.get(call.id);
    const allowance = resultAllowance(call.name, result);
    const outcome = result ? inline(result.content, allowance) || '(empty)' : 'no result recorded';
    return template.line({
      name: inline(call.name, 80),
      args: inline(safeJson(call.input), TOOL_BLOCK_ARGS_CHARS) || '{}',
      outcome,
      error: result?.isError === true || !result,
    });
  });
  const said = assistant.content
    .filter((b) => b.type === 'text')
    .map((b) => (b.type === 'text' ? b.text : ''))
    .join(' ');
  const intro = said.trim() ? `${inline(said, SUMMARIZER_MESSAGE_CHARS)}\n` : '';
  return {
    role: 'assistant',
    kind: 'summary',
    content: [{ type: 'text', text: `${intro}${template.header}\n${lines.join('\n')}` }],
  };
}

/** Leftover text of the results message (e.g. a comment merged after the results), if any. */
export function nonResultContent(results: ChatMessage | undefined): ChatMessage | undefined {
  const rest = results?.content.filter((b) => b.type !== 'tool_result') ?? [];
  return rest.length && results ? { ...results, content: rest } : undefined;
}
