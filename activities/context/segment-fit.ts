/**
 * A system-prompt section before it is rendered, and how it shrinks to a token budget (
 * "truncated tail-first, newest preserved, oldest cut"). Lists drop whole items from their old end
 * first and say how many were left out; a single text keeps its head and loses its tail.
 */
import { attribute } from './neutralize';
import type { PromptSegmentName, PromptWarning } from './prompt-types';

export type TokenCounter = (text: string) => number;

export interface SegmentDraft {
  name: PromptSegmentName;
  tier: 1 | 2 | 3;
  /** Always kept (title lines). */
  heading: string;
  /** Units of content; budgets drop whole items before cutting text. */
  items: string[];
  /** Which end loses items first: 'start' for chronological lists (oldest first), 'end' otherwise. */
  dropFrom: 'start' | 'end';
  /** Joins items; '\n' for list lines, '\n\n' for paragraphs. */
  separator: string;
  /** Always kept, after the items (overflow hints, granted permissions). */
  footer?: string;
  /** Items are wrapped in one `<untrusted source="…">` fence (items must already be neutralised). */
  fenceSource?: string;
  /** Per-segment budget. */
  maxTokens?: number;
  /** Character cap of the items, head kept (the design's caps are in characters). */
  maxChars?: number;
  /** Tier 3 only: lower shrinks first when the whole message is over target; undefined = never shrunk. */
  shrinkOrder?: number;
}

const TRUNCATION_MARKER = '\n[… truncated to fit the prompt budget]';

export function renderDraft(draft: SegmentDraft): string {
  let body = draft.items.join(draft.separator);
  if (draft.fenceSource !== undefined && draft.items.length > 0) {
    body = `<untrusted source=${attribute(draft.fenceSource)}>\n${body}\n</untrusted>`;
  }
  return [draft.heading, body, draft.footer ?? ''].filter((part) => part.length > 0).join('\n');
}

function omissionNote(count: number, dropFrom: 'start' | 'end'): string {
  return `[… ${count} ${dropFrom === 'start' ? 'older' : 'further'} ${count === 1 ? 'entry' : 'entries'} omitted to fit the prompt budget]`;
}

function withItems(draft: SegmentDraft, kept: string[], omitted: number): SegmentDraft {
  if (omitted === 0) return { ...draft, items: kept };
  const note = omissionNote(omitted, draft.dropFrom);
  return { ...draft, items: draft.dropFrom === 'start' ? [note, ...kept] : [...kept, note] };
}

function keepItems(draft: SegmentDraft, count: number): SegmentDraft {
  const n = draft.items.length;
  const kept = draft.dropFrom === 'start' ? draft.items.slice(n - count) : draft.items.slice(0, count);
  return withItems(draft, kept, n - count);
}

/**
 * Shrinks `draft` so that it renders within `maxTokens`. Returns the draft unchanged when it fits, or
 * `undefined` when not even its heading fits (the caller drops the section).
 */
export function fitDraft(draft: SegmentDraft, maxTokens: number, count: TokenCounter): SegmentDraft | undefined {
  if (count(renderDraft(draft)) <= maxTokens) return draft;
  if (count(renderDraft({ ...draft, items: [] })) > maxTokens) return undefined;
  const n = draft.items.length;
  if (n > 1) {
    // Largest number of items (from the preserved end) that fits; token counts grow with k.
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      if (count(renderDraft(keepItems(draft, mid))) <= maxTokens) lo = mid;
      else hi = mid - 1;
    }
    if (lo >= 1) return keepItems(draft, lo);
  }
  if (n === 0) return draft;
  // One item left: keep its head.
  const survivor = keepItems(draft, 1);
  const index = draft.dropFrom === 'start' ? survivor.items.length - 1 : 0;
  const text = survivor.items[index] ?? '';
  const withText = (value: string) => ({
    ...survivor,
    items: survivor.items.map((item, i) => (i === index ? value : item)),
  });
  let room = maxTokens - count(renderDraft(withText('')));
  // Tokens at the joins are not quite additive: retry with a little less room.
  for (let attempt = 0; attempt < 4 && room > 0; attempt++) {
    const result = withText(truncateTextHead(text, room, count));
    const tokens = count(renderDraft(result));
    if (tokens <= maxTokens) return result;
    room -= tokens - maxTokens;
  }
  return { ...draft, items: [] };
}

/** Keeps the head of `text` within `maxTokens` (marker included); '' when nothing useful fits. */
export function truncateTextHead(text: string, maxTokens: number, count: TokenCounter): string {
  const total = count(text);
  if (total <= maxTokens) return text;
  const room = maxTokens - count(TRUNCATION_MARKER);
  if (room <= 0) return '';
  let chars = Math.floor((text.length * room) / total);
  for (let attempt = 0; attempt < 12 && chars > 0; attempt++) {
    const candidate = cutAt(text, chars) + TRUNCATION_MARKER;
    const tokens = count(candidate);
    if (tokens <= maxTokens) return candidate;
    chars = Math.floor(chars * Math.min(0.95, maxTokens / tokens));
  }
  return '';
}

/** Prefix of `text` of at most `chars` UTF-16 units, preferring a line or word boundary near the end. */
function cutAt(text: string, chars: number): string {
  let end = Math.min(text.length, chars);
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end -= 1;
  const slice = text.slice(0, end);
  const boundary = Math.max(slice.lastIndexOf('\n'), slice.lastIndexOf(' '));
  return boundary > end * 0.8 ? slice.slice(0, boundary) : slice;
}

/** Applies the draft's own character and token budgets; pushes one warning when it had to cut. */
export function applyBudget(
  draft: SegmentDraft,
  count: TokenCounter,
  warnings: PromptWarning[],
): SegmentDraft | undefined {
  let fitted: SegmentDraft | undefined = draft;
  if (draft.maxChars !== undefined) {
    const joined = draft.items.join(draft.separator);
    if (joined.length > draft.maxChars) {
      fitted = { ...draft, items: [cutAt(joined, draft.maxChars - TRUNCATION_MARKER.length) + TRUNCATION_MARKER] };
    }
  }
  if (fitted && draft.maxTokens !== undefined) fitted = fitDraft(fitted, draft.maxTokens, count);
  if (fitted === draft) return draft;
  const original = count(renderDraft(draft));
  warnings.push({ segment: draft.name, originalTokens: original, keptTokens: fitted ? count(renderDraft(fitted)) : 0 });
  return fitted;
}
