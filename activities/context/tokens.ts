/**
 * Token counting with tiktoken.
 *
 * - The encoding follows the model: `o200k_base` for gpt-4o / 4.1 / 4.5 / 5 / o-series / gpt-oss,
 *   `cl100k_base` for everything else. For Claude and open models it is an estimate; `calibrate()`
 *   learns a per-model ratio from the provider's reported input tokens.
 * - Text is encoded with `encode_ordinary`, which treats special-token strings such as `<|endoftext|>`
 *   as plain text (`encode` throws on them by default, and tool output can contain anything).
 * - tiktoken's BPE is quadratic in the length of one pre-token, so a megabyte of a single letter takes
 *   minutes; runs longer than TOKENIZER_MAX_RUN_CHARS are counted in slices (an error of ≤ 1 token per slice).
 * - If tiktoken cannot be loaded, counts fall back to chars / 3.5.
 * - Counts of content blocks and tool definitions are memoised per object (a WeakMap), so blocks must be
 *   treated as immutable once counted: build a new block instead of editing one.
 *
 * Encoders are created lazily, cached per encoding and released with `freeEncoders()`.
 */
import { get_encoding, type Tiktoken, type TiktokenEncoding } from 'tiktoken';
import type { ChatMessage, ContentBlock, ToolDefinition } from '../llm/types';
import { IMAGE_TOKENS_ESTIMATE } from '../llm/request-images';
import {
  CALIBRATION_MIN_SAMPLE_TOKENS,
  CALIBRATION_RATIO_MAX,
  CALIBRATION_RATIO_MIN,
  CALIBRATION_SMOOTHING,
  FALLBACK_CHARS_PER_TOKEN,
  MESSAGE_OVERHEAD_TOKENS,
  TOKENIZER_MAX_RUN_CHARS,
  TOOL_BLOCK_OVERHEAD_TOKENS,
  TOOL_DEFINITION_OVERHEAD_TOKENS,
} from './limits';

export type EncodingName = Extract<TiktokenEncoding, 'o200k_base' | 'cl100k_base'>;

const O200K_MODEL = /^(gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|chatgpt-4o|o\d)(\b|[-.:_])/;

/** The tiktoken encoding used for `model` (provider prefixes such as `openai/` are ignored). */
export function encodingForModel(model?: string): EncodingName {
  if (!model) return 'cl100k_base';
  const name = model.toLowerCase().split('/').pop() ?? '';
  return O200K_MODEL.test(name) ? 'o200k_base' : 'cl100k_base';
}

// ─── Encoders ────────────────────────────────────────────────────────────────────────────────────────

const encoders = new Map<EncodingName, Tiktoken>();
let tiktokenUnavailable = false;

function encoderFor(encoding: EncodingName): Tiktoken | undefined {
  if (tiktokenUnavailable) return undefined;
  let encoder = encoders.get(encoding);
  if (!encoder) {
    try {
      encoder = get_encoding(encoding);
    } catch {
      tiktokenUnavailable = true;
      return undefined;
    }
    encoders.set(encoding, encoder);
  }
  return encoder;
}

/** Releases the WASM encoders (they are re-created on next use). Call on worker shutdown. */
export function freeEncoders(): void {
  for (const encoder of encoders.values()) encoder.free();
  encoders.clear();
  blockCounts.clear();
}

/** Test hook: simulate a worker where tiktoken failed to load (counts fall back to chars / 3.5). */
export function setTiktokenDisabledForTesting(disabled: boolean): void {
  tiktokenUnavailable = disabled;
  blockCounts.clear();
}

/** Fallback estimate when tiktoken is unavailable. */
export function heuristicTokenCount(text: string): number {
  return Math.ceil(text.length / FALLBACK_CHARS_PER_TOKEN);
}

// A run of one pre-tokenizer class (letters, punctuation, whitespace) that BPE would see as one piece.
const LONG_RUN = new RegExp(
  `[\\p{L}\\p{M}]{${TOKENIZER_MAX_RUN_CHARS},}|[^\\s\\p{L}\\p{M}\\p{N}]{${TOKENIZER_MAX_RUN_CHARS},}|\\s{${TOKENIZER_MAX_RUN_CHARS},}`,
  'gu',
);

function encodedLength(encoder: Tiktoken, text: string): number {
  if (text.length < TOKENIZER_MAX_RUN_CHARS) return encoder.encode_ordinary(text).length;
  let total = 0;
  let last = 0;
  for (const match of text.matchAll(LONG_RUN)) {
    const start = match.index;
    if (start > last) total += encoder.encode_ordinary(text.slice(last, start)).length;
    const run = match[0];
    let i = 0;
    while (i < run.length) {
      let end = Math.min(run.length, i + TOKENIZER_MAX_RUN_CHARS);
      // Never split a surrogate pair.
      if (end < run.length && isHighSurrogate(run.charCodeAt(end - 1))) end += 1;
      total += encoder.encode_ordinary(run.slice(i, end)).length;
      i = end;
    }
    last = start + run.length;
  }
  if (last < text.length) total += encoder.encode_ordinary(text.slice(last)).length;
  return total;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

/** Exact tiktoken count of `text` for the model's encoding, without calibration. Never throws. */
export function countTokensRaw(text: string, model?: string): number {
  if (text.length === 0) return 0;
  const encoder = encoderFor(encodingForModel(model));
  if (!encoder) return heuristicTokenCount(text);
  try {
    return encodedLength(encoder, text);
  } catch {
    return heuristicTokenCount(text);
  }
}

// ─── Calibration ─────────────────────────────────────────────────────────────────────────────────────

const calibration = new Map<string, number>();

/**
 * Records what the provider reported for a request we estimated, e.g. Anthropic's
 * `input_tokens + cache_read + cache_write` against `systemTokens + toolTokens + stats.tokensAfter`.
 * `estimated` is the (calibrated) estimate this module produced for that request. The per-model ratio
 * moves towards reported/raw by CALIBRATION_SMOOTHING, stays within [0.5, 2], and ignores samples under
 * CALIBRATION_MIN_SAMPLE_TOKENS. Returns the new ratio.
 */
export function calibrate(model: string, estimated: number, reported: number): number {
  const current = calibrationRatio(model);
  if (!(estimated >= CALIBRATION_MIN_SAMPLE_TOKENS) || !(reported > 0)) return current;
  const observed = clamp(current * (reported / estimated), CALIBRATION_RATIO_MIN, CALIBRATION_RATIO_MAX);
  const next = clamp(
    current + CALIBRATION_SMOOTHING * (observed - current),
    CALIBRATION_RATIO_MIN,
    CALIBRATION_RATIO_MAX,
  );
  calibration.set(model, next);
  return next;
}

/** The ratio later estimates for `model` are multiplied by (1 when never calibrated). */
export function calibrationRatio(model?: string): number {
  return (model !== undefined ? calibration.get(model) : undefined) ?? 1;
}

export function resetCalibration(): void {
  calibration.clear();
}

function applyCalibration(raw: number, model?: string): number {
  const ratio = calibrationRatio(model);
  return ratio === 1 ? raw : Math.ceil(raw * ratio);
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}

// ─── Messages and tools ──────────────────────────────────────────────────────────────────────────────

/** Calibrated estimate of `text` for `model`. */
export function countTokens(text: string, model?: string): number {
  return applyCalibration(countTokensRaw(text, model), model);
}

const blockCounts = new Map<EncodingName | 'heuristic', WeakMap<object, number>>();

function memoised(key: object, model: string | undefined, compute: () => number): number {
  const encoding = tiktokenUnavailable ? 'heuristic' : encodingForModel(model);
  let cache = blockCounts.get(encoding);
  if (!cache) {
    cache = new WeakMap();
    blockCounts.set(encoding, cache);
  }
  const hit = cache.get(key);
  if (hit !== undefined) return hit;
  const value = compute();
  cache.set(key, value);
  return value;
}

/** Raw (uncalibrated) tokens of one content block, memoised per block object. */
export function countBlockTokensRaw(block: ContentBlock, model?: string): number {
  return memoised(block, model, () => {
    switch (block.type) {
      case 'text':
        return countTokensRaw(block.text, model);
      case 'tool_use':
        return (
          TOOL_BLOCK_OVERHEAD_TOKENS + countTokensRaw(block.name, model) + countTokensRaw(safeJson(block.input), model)
        );
      case 'tool_result':
        return (
          TOOL_BLOCK_OVERHEAD_TOKENS +
          countTokensRaw(block.content, model) +
          (block.images?.length ?? 0) * IMAGE_TOKENS_ESTIMATE
        );
    }
  });
}

/** Raw tokens of one message (blocks + per-message overhead). */
export function countMessageTokensRaw(message: ChatMessage, model?: string): number {
  let total = MESSAGE_OVERHEAD_TOKENS;
  for (const block of message.content) total += countBlockTokensRaw(block, model);
  return total;
}

/** Calibrated estimate of one message. */
export function countSingleMessageTokens(message: ChatMessage, model?: string): number {
  return applyCalibration(countMessageTokensRaw(message, model), model);
}

/** Calibrated estimate of a message list as sent to the provider. */
export function countMessageTokens(messages: readonly ChatMessage[], model?: string): number {
  let raw = 0;
  for (const message of messages) raw += countMessageTokensRaw(message, model);
  return applyCalibration(raw, model);
}

/** Calibrated estimate of the tool definitions sent with a request. */
export function countToolTokens(tools: readonly ToolDefinition[], model?: string): number {
  let raw = 0;
  for (const tool of tools) {
    raw += memoised(
      tool,
      model,
      () =>
        TOOL_DEFINITION_OVERHEAD_TOKENS +
        countTokensRaw(tool.name, model) +
        countTokensRaw(tool.description, model) +
        countTokensRaw(safeJson(tool.inputSchema), model),
    );
  }
  return applyCalibration(raw, model);
}

/** JSON text of a tool input; never throws (cycles and BigInts become a placeholder). */
export function safeJson(value: unknown): string {
  if (value === undefined) return '';
  try {
    return JSON.stringify(value) ?? '';
  } catch {
    return '"[unserialisable input]"';
  }
}
