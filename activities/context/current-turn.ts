/**
 * What changes on every call goes after the conversation, not before it. Providers cache the prompt
 * as a prefix (tools → system → messages); a minute-level timestamp in the system prompt changed that
 * prefix whenever the minute turned, so the whole conversation missed the cache (2 of 13 calls at a
 * realistic 12 s per call). The time now travels as a short text block at the end of the current turn,
 * which lies after the message cache breakpoint (`cacheBreakpoint`: the last assistant message) and is
 * never stored in the session.
 */
import type { ChatMessage } from '../llm/types';
import type { PromptInputs } from './prompt-types';
import { formatMinuteTimestamp } from './quantize';

/** D1 B8: the minute-level time in the agent's zone, as the current turn's last block. */
export function currentTimeText(inputs: Pick<PromptInputs, 'now' | 'timezone'>): string {
  return `[Current time: ${formatMinuteTimestamp(inputs.now, inputs.timezone ?? 'UTC')}]`;
}

/**
 * The messages with `text` appended to the current turn: as the last block of the trailing user
 * message, or as a user message of its own after an assistant message. The input is not modified.
 */
export function appendToCurrentTurn(messages: readonly ChatMessage[], text: string): ChatMessage[] {
  const last = messages.at(-1);
  if (last?.role === 'user') return [...messages.slice(0, -1), { ...last, content: [...last.content, { type: 'text', text }] }];
  return [...messages, { role: 'user', content: [{ type: 'text', text }] }];
}
