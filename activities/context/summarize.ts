/**
 * Summaries of older conversation. The LLM call itself belongs to the
 * caller: it receives `buildSummarizerPrompt(messages)` and should run it with SUMMARIZER_SYSTEM_PROMPT,
 * SUMMARIZER_MAX_OUTPUT_TOKENS (1,024) and SUMMARIZER_TEMPERATURE (0.2), no tools. Without a summariser,
 * or when it fails, `buildHeuristicSummary` condenses the messages deterministically.
 */
import type { ChatMessage } from '../llm/types';
import {
  HEURISTIC_POINT_CHARS,
  HEURISTIC_PREVIOUS_SUMMARY_CHARS,
  SUMMARIZER_INPUT_CHARS,
  SUMMARIZER_MAX_OUTPUT_TOKENS,
  SUMMARIZER_MESSAGE_CHARS,
  SUMMARIZER_TEMPERATURE,
  SUMMARY_MESSAGE_PREFIX,
  SUMMARY_TARGET_CHARS,
} from './limits';
import { inline, neutralize, truncateChars } from './neutralize';
import { safeJson } from './tokens';

export { SUMMARIZER_MAX_OUTPUT_TOKENS, SUMMARIZER_TEMPERATURE };

/** Characters of a block read at all: only a message's opening can reach its 300-character line. */
const OPENING_CHARS = SUMMARIZER_MESSAGE_CHARS * 4;

/** One transcript line per message, each cut to 300 characters (a previous summary gets 1,500). */
function transcriptLine(message: ChatMessage): string {
  if (message.kind === 'summary' && message.role === 'user') {
    return `[previous summary] ${inline(textOf(message, SUMMARY_TARGET_CHARS * 2), SUMMARY_TARGET_CHARS)}`;
  }
  const parts: string[] = [];
  const opening = (text: string) => text.slice(0, OPENING_CHARS);
  for (const block of message.content) {
    if (block.type === 'text') parts.push(opening(block.text));
    else if (block.type === 'tool_use') parts.push(`→ ${block.name} ${opening(safeJson(block.input))}`);
    else parts.push(`${block.isError ? '[tool error] ' : '[tool result] '}${opening(block.content)}`);
  }
  const who = message.kind === 'injection' ? 'system note' : message.kind === 'task_prompt' ? 'task' : message.role;
  return `[${who}] ${inline(parts.join(' '), SUMMARIZER_MESSAGE_CHARS)}`;
}

/**
 * The summariser's user prompt: instructions plus a transcript of at most 8,000 characters. When the
 * messages do not fit, the most recent ones are kept (they matter most for continuing) and previous
 * summaries are always kept.
 */
export function buildSummarizerPrompt(messages: readonly ChatMessage[]): string {
  const lines = messages.map(transcriptLine);
  const kept: string[] = [];
  let used = 0;
  let omitted = 0;
  // Previous summaries first, then newest to oldest.
  const order = [...lines.keys()].sort((a, b) => {
    const sa = lines[a]?.startsWith('[previous summary]') ? 1 : 0;
    const sb = lines[b]?.startsWith('[previous summary]') ? 1 : 0;
    return sb - sa || b - a;
  });
  const take = new Set<number>();
  for (const index of order) {
    const line = lines[index] ?? '';
    if (used + line.length + 1 > SUMMARIZER_INPUT_CHARS) {
      omitted += 1;
      continue;
    }
    used += line.length + 1;
    take.add(index);
  }
  lines.forEach((line, index) => {
    if (take.has(index)) kept.push(line);
  });
  const note = omitted ? `(${omitted} older messages did not fit and are not shown)\n` : '';
  return [
    'Summarise the earlier part of this conversation for the agent that will continue it.',
    'Keep: the goal and what was asked, decisions and their reasons, facts learned, file paths, ids and names, errors met and how they were handled, and what remains to do.',
    `Write plain text in the conversation's language, under ${SUMMARY_TARGET_CHARS} characters.`,
    '',
    '<transcript>',
    `${note}${kept.join('\n')}`,
    '</transcript>',
  ].join('\n');
}

function textOf(message: ChatMessage, limit = OPENING_CHARS): string {
  return message.content
    .map((b) => (b.type === 'text' ? b.text.slice(0, limit) : ''))
    .join(' ')
    .trim();
}

function firstSentence(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  const match = /^(.{20,}?[.!?])(\s|$)/u.exec(flat);
  return match?.[1] ?? flat;
}

/**
 * The latest request, the tools used (with error counts) and the first sentence of each
 * assistant message, newest kept first, within 1,500 characters. Deterministic.
 */
export function buildHeuristicSummary(messages: readonly ChatMessage[]): string {
  const toolUses = new Map<string, { calls: number; errors: number }>();
  const callNames = new Map<string, string>();
  const previous: string[] = [];
  const points: string[] = [];
  let lastRequest = '';
  for (const message of messages) {
    if (message.kind === 'summary' && message.role === 'user') {
      previous.push(
        textOf(message, SUMMARY_TARGET_CHARS * 2).replace(/^\[Conversation history summary[^\]]*\]\s*/, ''),
      );
      continue;
    }
    for (const block of message.content) {
      if (block.type === 'tool_use') {
        callNames.set(block.id, block.name);
        const entry = toolUses.get(block.name) ?? { calls: 0, errors: 0 };
        entry.calls += 1;
        toolUses.set(block.name, entry);
      } else if (block.type === 'tool_result' && block.isError) {
        const name = callNames.get(block.toolUseId);
        const entry = name ? toolUses.get(name) : undefined;
        if (entry) entry.errors += 1;
      }
    }
    const text = textOf(message);
    if (!text) continue;
    if (message.role === 'user' && message.kind !== 'injection') lastRequest = text;
    if (message.role === 'assistant') points.push(firstSentence(text));
  }

  const sections: string[] = [];
  if (previous.length) sections.push(`Earlier: ${truncateChars(previous.join(' '), HEURISTIC_PREVIOUS_SUMMARY_CHARS)}`);
  if (lastRequest)
    sections.push(`Latest request: ${truncateChars(firstSentence(lastRequest), SUMMARIZER_MESSAGE_CHARS)}`);
  if (toolUses.size) {
    const tools = [...toolUses.entries()].map(
      ([name, u]) => `${name} ×${u.calls}${u.errors ? ` (${u.errors} failed)` : ''}`,
    );
    sections.push(`Tools used: ${tools.join(', ')}`);
  }
  const head = neutralize(sections.join('\n'));
  let room = SUMMARY_TARGET_CHARS - head.length - 20;
  const kept: string[] = [];
  for (let i = points.length - 1; i >= 0 && room > 0; i--) {
    const point = `- ${neutralize(truncateChars(points[i] ?? '', HEURISTIC_POINT_CHARS))}`;
    if (point.length + 1 > room) break;
    kept.unshift(point);
    room -= point.length + 1;
  }
  const body = kept.length ? `${head}\nKey points:\n${kept.join('\n')}` : head;
  return truncateChars(body, SUMMARY_TARGET_CHARS);
}

const COVERED = /^\[Conversation history summary — (\d+) earlier messages/;

/** How many original messages `message` stands for (a summary covers many). */
export function coveredCount(message: ChatMessage): number {
  if (message.kind !== 'summary' || message.role !== 'user') return 1;
  const first = message.content[0];
  const match = first?.type === 'text' ? COVERED.exec(first.text) : null;
  return match ? Number(match[1]) : 1;
}

/** The summary as a user message that sanitisation never merges. */
export function summaryMessage(summary: string, summarizedCount: number, source: 'llm' | 'heuristic'): ChatMessage {
  const label = source === 'llm' ? '' : ', condensed automatically';
  return {
    role: 'user',
    kind: 'summary',
    content: [
      {
        type: 'text',
        text: `${SUMMARY_MESSAGE_PREFIX} — ${summarizedCount} earlier messages${label}]\n${summary.trim()}`,
      },
    ],
  };
}
