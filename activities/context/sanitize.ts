/**
 * `sanitizeMessageSequence`: makes any stored conversation a valid provider request.
 * Run before and after compression; it is also what makes a session resumed after a crash valid
 * (a tool call whose result was never stored, a result stored twice, a half-written turn).
 *
 * Rules, in order:
 * 1. Empty and whitespace-only text blocks, and messages left empty, are dropped.
 * 2. Leading assistant messages (and result-only user messages answering them) are dropped: a
 *    request starts with a user message.
 * 3. Every assistant `tool_use` is followed by one user message holding all its results, in call
 *    order. Results are collected from the user messages up to the next assistant message; a missing
 *    one becomes an error result (INTERRUPTED_TOOL_RESULT_TEXT); a duplicate keeps the first. Other
 *    content of those user messages follows in its own message.
 * 4. A `tool_result` that does not answer the directly preceding assistant's call is an orphan: dropped.
 * 5. Consecutive user messages are merged when both are `normal` (untagged); `injection`, `summary` and
 *    `task_prompt` messages stay separate. Consecutive assistant messages are merged when the first has
 *    no tool call (compaction leaves such runs).
 *
 * Pure: returns new arrays and messages; input messages are never mutated.
 */
import type { ChatMessage, ContentBlock, ToolResultBlock } from '../llm/types';
import { INTERRUPTED_TOOL_RESULT_TEXT } from './limits';

export interface SanitizeStats {
  synthesizedResults: number;
  droppedOrphanResults: number;
  droppedDuplicateResults: number;
  droppedEmptyMessages: number;
  droppedLeadingAssistant: number;
  mergedMessages: number;
}

export function emptySanitizeStats(): SanitizeStats {
  return {
    synthesizedResults: 0,
    droppedOrphanResults: 0,
    droppedDuplicateResults: 0,
    droppedEmptyMessages: 0,
    droppedLeadingAssistant: 0,
    mergedMessages: 0,
  };
}

export function addSanitizeStats(into: SanitizeStats, from: SanitizeStats): void {
  for (const key of Object.keys(into) as Array<keyof SanitizeStats>) into[key] += from[key];
}

const isNormal = (m: ChatMessage) => m.kind === undefined || m.kind === 'normal';
const hasToolUse = (m: ChatMessage) => m.content.some((b) => b.type === 'tool_use');

export function sanitizeMessageSequence(input: readonly ChatMessage[]): {
  messages: ChatMessage[];
  stats: SanitizeStats;
} {
  const stats = emptySanitizeStats();

  // 1. Empty blocks and messages.
  let messages: ChatMessage[] = [];
  for (const message of input) {
    const content = message.content.filter((b) => b.type !== 'text' || b.text.trim().length > 0);
    if (content.length === 0) {
      stats.droppedEmptyMessages += 1;
      continue;
    }
    messages.push(content.length === message.content.length ? message : { ...message, content });
  }

  // 2. Leading assistant messages, and the results that answered them.
  let first = 0;
  for (; first < messages.length; first++) {
    const m = messages[first] as ChatMessage;
    if (m.role === 'assistant') stats.droppedLeadingAssistant += 1;
    else if (m.content.every((b) => b.type === 'tool_result')) stats.droppedOrphanResults += m.content.length;
    else break;
  }
  messages = messages.slice(first);

  // 3 + 4. Pair tool calls with their results; drop orphans.
  const paired: ChatMessage[] = [];
  let i = 0;
  while (i < messages.length) {
    const message = messages[i] as ChatMessage;
    i += 1;
    if (message.role === 'user') {
      const kept = dropResults(message, stats);
      if (kept) paired.push(kept);
      else stats.droppedEmptyMessages += 1;
      continue;
    }
    paired.push(message);
    const calls = message.content.filter((b) => b.type === 'tool_use');
    if (calls.length === 0) continue;

    const found = new Map<string, ToolResultBlock>();
    const leftovers: ChatMessage[] = [];
    while (i < messages.length && messages[i]?.role === 'user') {
      const user = messages[i] as ChatMessage;
      i += 1;
      const rest: ContentBlock[] = [];
      for (const block of user.content) {
        if (block.type !== 'tool_result') {
          rest.push(block);
        } else if (!calls.some((c) => c.id === block.toolUseId)) {
          stats.droppedOrphanResults += 1;
        } else if (found.has(block.toolUseId)) {
          stats.droppedDuplicateResults += 1;
        } else {
          found.set(block.toolUseId, block);
        }
      }
      if (rest.length) leftovers.push(rest.length === user.content.length ? user : { ...user, content: rest });
    }
    const results: ToolResultBlock[] = calls.map((call) => {
      const result = found.get(call.id);
      if (result) return result;
      stats.synthesizedResults += 1;
      return { type: 'tool_result', toolUseId: call.id, content: INTERRUPTED_TOOL_RESULT_TEXT, isError: true };
    });
    paired.push({ role: 'user', content: results });
    paired.push(...leftovers);
  }

  // 5. Merge neighbours.
  const merged: ChatMessage[] = [];
  for (const message of paired) {
    const previous = merged[merged.length - 1];
    const mergeUsers = previous?.role === 'user' && message.role === 'user' && isNormal(previous) && isNormal(message);
    const mergeAssistants = previous?.role === 'assistant' && message.role === 'assistant' && !hasToolUse(previous);
    if (previous && (mergeUsers || mergeAssistants)) {
      merged[merged.length - 1] = {
        role: previous.role,
        content: orderedContent(previous.content, message.content),
        ...(mergeAssistants && previous.kind === message.kind && previous.kind !== undefined
          ? { kind: previous.kind }
          : {}),
      };
      stats.mergedMessages += 1;
    } else {
      merged.push(message);
    }
  }
  return { messages: merged, stats };
}

/** A user message without tool results (they are orphans here); undefined if nothing remains. */
function dropResults(message: ChatMessage, stats: SanitizeStats): ChatMessage | undefined {
  const content = message.content.filter((b) => b.type !== 'tool_result');
  stats.droppedOrphanResults += message.content.length - content.length;
  if (content.length === message.content.length) return message;
  return content.length ? { ...message, content } : undefined;
}

/** Merged content with tool results first (Anthropic requires them before text in a user turn). */
function orderedContent(a: readonly ContentBlock[], b: readonly ContentBlock[]): ContentBlock[] {
  const all = [...a, ...b];
  const results = all.filter((x) => x.type === 'tool_result');
  return results.length === 0 ? all : [...results, ...all.filter((x) => x.type !== 'tool_result')];
}
