/** Pieces shared by the two protocol renderers. */
import type { ScriptedToolUseBlock, ScriptedUsage } from './types';

/** Text deltas are cut to this many characters, so a client sees several deltas per block. */
export const TEXT_DELTA_CHARS = 12;

/** Tool-argument JSON is cut to this many characters, so clients must reassemble partial JSON. */
export const ARGUMENT_DELTA_CHARS = 10;

/** Usage reported when a script gives none: small non-zero numbers, so a missing mapping shows up as 0. */
export const DEFAULT_USAGE: Required<ScriptedUsage> = {
  inputTokens: 12,
  outputTokens: 8,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  cacheWrite1hTokens: 0,
};

/** Per-request facts a renderer needs besides the scripted response. */
export interface RenderContext {
  /** Echoed back as the answering model. */
  model: string;
  /** Unique per server: `nextId('msg_fake')` → `msg_fake_7`. */
  nextId(prefix: string): string;
}

/** Splits `text` into pieces of at most `size` characters; an empty string yields no pieces. */
export function splitIntoChunks(text: string, size: number): string[] {
  const chunks: string[] = [];
  for (let start = 0; start < text.length; start += size) chunks.push(text.slice(start, start + size));
  return chunks;
}

export function fullUsage(usage: ScriptedUsage | undefined): Required<ScriptedUsage> {
  return { ...DEFAULT_USAGE, ...usage };
}

/** The argument text the model "sent": raw text verbatim, else the JSON of `input` (`{}` when absent). */
export function argumentText(block: ScriptedToolUseBlock): string {
  return block.rawArguments ?? JSON.stringify(block.input ?? {});
}

export function sseFrame(data: unknown, event?: string): string {
  const payload = typeof data === 'string' ? data : JSON.stringify(data);
  return `${event === undefined ? '' : `event: ${event}\n`}data: ${payload}\n\n`;
}
