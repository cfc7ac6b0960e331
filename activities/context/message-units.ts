/**
 * How a conversation is structured for compression: where the task prompt and the current turn start,
 * and which messages travel together (a tool call and its results are one unit, never separated by a
 * cut or a drop).
 */
import type { ChatMessage } from '../llm/types';
import { TASK_PROMPT_MARKERS } from './limits';

/** A tool call and its results, or a single message. */
type Unit = ChatMessage[];

/** The first `task_prompt` message, else an untagged first user message with a marker; −1 if none. */
export function findTaskPrompt(messages: readonly ChatMessage[]): number {
  const tagged = messages.findIndex((m) => m.kind === 'task_prompt');
  if (tagged >= 0) return tagged;
  const first = messages.findIndex((m) => m.role === 'user');
  const candidate = messages[first];
  if (!candidate || (candidate.kind !== undefined && candidate.kind !== 'normal')) return -1;
  const text = candidate.content.map((b) => (b.type === 'text' ? b.text : '')).join('\n');
  return TASK_PROMPT_MARKERS.some((marker) => text.includes(marker)) ? first : -1;
}

export const isResultMessage = (m: ChatMessage | undefined) =>
  m?.role === 'user' && m.content.some((b) => b.type === 'tool_result');
export const isToolCall = (m: ChatMessage | undefined) =>
  m?.role === 'assistant' && m.content.some((b) => b.type === 'tool_use');

/** Moves a cut index back so it never separates a tool call from its results. */
export function blockStart(messages: readonly ChatMessage[], cut: number): number {
  let index = cut;
  while (index > 0 && isResultMessage(messages[index])) index -= 1;
  return index;
}

/** Start of the current turn: the last user message that is new input rather than tool results. */
export function currentTurnStart(messages: readonly ChatMessage[]): number {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m?.role === 'user' && !isResultMessage(m)) return i;
  }
  return 0;
}

export function lastToolBlockStart(messages: readonly ChatMessage[]): number {
  for (let i = messages.length - 1; i >= 0; i--) if (isToolCall(messages[i])) return i;
  return 0;
}

/** Tool blocks travel together: an assistant tool call and its results are one unit. */
function toUnits(messages: readonly ChatMessage[]): Unit[] {
  const units: Unit[] = [];
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i] as ChatMessage;
    if (isToolCall(message) && isResultMessage(messages[i + 1])) {
      units.push([message, messages[i + 1] as ChatMessage]);
      i += 1;
    } else {
      units.push([message]);
    }
  }
  return units;
}

/**
 * Drops the oldest units until the rest fits `budget`: non-summary units first, then summaries; the
 * last unit (the current input) is never dropped.
 */
export function trimOldest(
  messages: readonly ChatMessage[],
  budget: number,
  tokensOf: (m: ChatMessage) => number,
): ChatMessage[] {
  const units = toUnits(messages);
  const sizes = units.map((u) => u.reduce((acc, m) => acc + tokensOf(m), 0));
  let total = sizes.reduce((a, b) => a + b, 0);
  const dropped = new Set<number>();
  const isSummary = (u: Unit) => u.length === 1 && u[0]?.kind === 'summary' && u[0].role === 'user';
  for (const pass of [false, true]) {
    for (let i = 0; i < units.length - 1 && total > budget; i++) {
      if (dropped.has(i) || isSummary(units[i] as Unit) !== pass) continue;
      dropped.add(i);
      total -= sizes[i] ?? 0;
    }
  }
  return units.filter((_, i) => !dropped.has(i)).flat();
}

/** The message before the trailing run of user messages (the current turn), if any. */
export function cacheBreakpoint(messages: readonly ChatMessage[]): number | undefined {
  let i = messages.length - 1;
  if (i < 0 || messages[i]?.role !== 'user') return undefined;
  while (i >= 0 && messages[i]?.role === 'user') i -= 1;
  return i >= 0 ? i : undefined;
}
