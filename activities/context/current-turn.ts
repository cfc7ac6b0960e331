/**
 * What changes on every call goes after the conversation, not before it. Providers cache the prompt
 * as a prefix (tools → system → messages); a minute-level timestamp in the system prompt changed that
 * prefix whenever the minute turned, so the whole conversation missed the cache (2 of 13 calls at a
 * realistic 12 s per call). The time now travels as a short user message after the stored
 * conversation, which is never stored in the session, and the message cache breakpoint sits on the
 * last stored message just before it: everything up to there is byte-identical in the next call.
 *
 * This differs from the design (breakpoint on the message before the current turn): here the current
 * turn's tool results and harness injections are stored in the session and sent unchanged in later
 * calls, so they can be cached too; only the time cannot. Providers merge consecutive user messages
 * into one turn (Anthropic documents it; OpenAI accepts them as they are).
 */
import type { ChatMessage } from '../llm/types';
import type { PromptInputs } from './prompt-types';
import { formatMinuteTimestamp } from './quantize';

/** The minute-level time in the agent's zone, sent after the conversation. */
export function currentTimeText(inputs: Pick<PromptInputs, 'now' | 'timezone'>): string {
  return `[Current time: ${formatMinuteTimestamp(inputs.now, inputs.timezone ?? 'UTC')}]`;
}

/**
 * The stored conversation followed by a user message carrying `text`, and the index of the message
 * cache breakpoint: the last stored message (none when there is none). The input is not modified.
 */
export function withCurrentTurnTail(
  messages: readonly ChatMessage[],
  text: string,
): { messages: ChatMessage[]; messageCacheBreakpoint?: number } {
  const out: ChatMessage[] = [...messages, { role: 'user', content: [{ type: 'text', text }] }];
  return messages.length > 0 ? { messages: out, messageCacheBreakpoint: messages.length - 1 } : { messages: out };
}
