/**
 * Stage 2 of prepareMessages: no message may exceed the per-message cap. An oversized
 * message loses the middle of its largest blocks: each keeps its head (65% of its share) and its tail
 * (25%), joined by a marker saying how much was cut. Tool inputs keep their JSON shape: long string
 * values inside them are shortened the same way.
 */
import type { ChatMessage, ContentBlock } from '../llm/types';
import { SHRINK_HEAD_FRACTION, SHRINK_TAIL_FRACTION } from './limits';
import { countBlockTokensRaw, countMessageTokensRaw, countTokensRaw, safeJson } from './tokens';

/** Smallest share a block is shrunk to; below this a head/tail excerpt says nothing. */
const MIN_BLOCK_TOKENS = 64;
const MAX_ATTEMPTS = 4;

/** Middle-cut of `text` to about `maxTokens` tokens (head 65% + tail 25% + marker). */
export function shrinkText(text: string, maxTokens: number, model?: string, knownTokens?: number): string {
  const tokens = knownTokens ?? countTokensRaw(text, model);
  if (tokens <= maxTokens) return text;
  let target = maxTokens;
  let result = text;
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const charsPerToken = text.length / Math.max(1, tokens);
    const head = Math.max(0, Math.floor(target * SHRINK_HEAD_FRACTION * charsPerToken));
    const tail = Math.max(0, Math.floor(target * SHRINK_TAIL_FRACTION * charsPerToken));
    result = middleCut(text, head, tail);
    const got = countTokensRaw(result, model);
    if (got <= maxTokens) return result;
    target = Math.floor(target * (maxTokens / got) * 0.9);
  }
  return result;
}

function middleCut(text: string, head: number, tail: number): string {
  if (head + tail >= text.length) return text;
  let headEnd = head;
  if (isHighSurrogate(text.charCodeAt(headEnd - 1))) headEnd -= 1;
  let tailStart = text.length - tail;
  if (isLowSurrogate(text.charCodeAt(tailStart))) tailStart += 1;
  const omitted = tailStart - headEnd;
  return `${text.slice(0, headEnd)}\n\n[… ${omitted.toLocaleString('en-US')} characters omitted to fit the context budget …]\n\n${text.slice(tailStart)}`;
}

const isHighSurrogate = (c: number) => c >= 0xd800 && c <= 0xdbff;
const isLowSurrogate = (c: number) => c >= 0xdc00 && c <= 0xdfff;

/** Shortens long strings inside a tool input until its JSON is about `maxTokens` tokens. */
function shrinkInput(input: unknown, maxTokens: number, model?: string): unknown {
  const json = safeJson(input);
  const tokens = countTokensRaw(json, model);
  if (tokens <= maxTokens) return input;
  let limit = Math.max(64, Math.floor((json.length * maxTokens) / tokens / 2));
  let shrunk = input;
  for (let attempt = 0; attempt < MAX_ATTEMPTS * 2; attempt++) {
    shrunk = mapStrings(input, (s) =>
      s.length > limit
        ? middleCut(s, Math.floor(limit * SHRINK_HEAD_FRACTION), Math.floor(limit * SHRINK_TAIL_FRACTION))
        : s,
    );
    if (countTokensRaw(safeJson(shrunk), model) <= maxTokens) return shrunk;
    limit = Math.floor(limit / 2);
    if (limit < 16) break;
  }
  // Structure itself is too big (thousands of keys): keep a preview string.
  return { _truncated: shrinkText(json, maxTokens, model) };
}

function mapStrings(value: unknown, fn: (s: string) => string): unknown {
  if (typeof value === 'string') return fn(value);
  if (Array.isArray(value)) return value.map((v) => mapStrings(v, fn));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = mapStrings(v, fn);
    return out;
  }
  return value;
}

/** `blockTokens` is the block's memoised count (for tool results it includes the block overhead). */
function shrinkBlock(block: ContentBlock, maxTokens: number, blockTokens: number, model?: string): ContentBlock {
  switch (block.type) {
    case 'text':
      return { ...block, text: shrinkText(block.text, maxTokens, model, blockTokens) };
    case 'tool_result':
      return { ...block, content: shrinkText(block.content, maxTokens, model, blockTokens) };
    case 'tool_use':
      return { ...block, input: shrinkInput(block.input, maxTokens, model) };
  }
}

/**
 * Returns `message` unchanged when within `capTokens` (raw count), otherwise a copy whose largest blocks
 * were middle-cut until it fits (or every block is down to its minimum share).
 */
export function capMessage(message: ChatMessage, capTokens: number, model?: string): ChatMessage {
  let current = message;
  for (let round = 0; round < message.content.length + 2; round++) {
    const total = countMessageTokensRaw(current, model);
    if (total <= capTokens) return current;
    const sizes = current.content.map((b) => countBlockTokensRaw(b, model));
    let largest = 0;
    sizes.forEach((size, index) => {
      if (size > (sizes[largest] ?? 0)) largest = index;
    });
    const size = sizes[largest] ?? 0;
    if (size <= MIN_BLOCK_TOKENS) return current;
    const target = Math.max(MIN_BLOCK_TOKENS, size - (total - capTokens));
    const block = current.content[largest] as ContentBlock;
    const shrunk = shrinkBlock(block, target, size, model);
    if (countBlockTokensRaw(shrunk, model) >= size) return current;
    current = { ...current, content: current.content.map((b, i) => (i === largest ? shrunk : b)) };
  }
  return current;
}
