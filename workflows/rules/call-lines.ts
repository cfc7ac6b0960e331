/**
 * Each LLM call and tool call of a round as text a person reads in the Temporal UI: a step's summary
 * names the calls of the step before it (the workflow knows them only once that step is done, and a
 * summary is fixed when its activity is scheduled), and the round's current details show the newest
 * calls as a table. Pure; the round workflow applies it.
 *
 * The text comes from a model and from tools (a path, a command, a fetched page). The Temporal UI
 * renders a workflow's details as Markdown, images included (an image is fetched by the operator's
 * browser when the page opens), and the SDK calls a summary "single-line Temporal markdown", although
 * UI 2.54 shows an activity's as plain text. So the details escape every character that could link,
 * fetch or break the table (`escapeMarkdown`), and a summary has its links, images and HTML broken by a
 * space and otherwise reads as written (`defuseMarkdown`). Secrets were already cut out on the activity
 * side: a call's summary by `summarizeCall`, a result's preview by `safeToolText`.
 */
import type { UsageTotals } from '../usage';
import { formatTokens } from './format';

/**
 * A summary's size as the server counts it (its JSON text in UTF-8) is kept under this. Temporal's
 * `limit.userMetadataSummarySize` is 400 bytes for the whole payload (about 30 of them are its
 * encoding); the 1.32 dev server does not enforce it, but a cluster may, and a command it refuses
 * fails the workflow task again and again.
 */
export const SUMMARY_MAX_BYTES = 360;
/** Characters of a tool result's preview the details table shows after its outcome. */
export const DETAILS_PREVIEW_CHARS = 60;
/** Characters of a failed call's preview a summary shows (what went wrong, in short). */
export const SUMMARY_ERROR_PREVIEW_CHARS = 40;
/** Rows of the round's current details: the newest calls. */
export const DETAILS_RECENT_CALLS = 8;

export interface CallLine {
  kind: 'llm' | 'tool';
  /** The LLM turn the call belongs to (a tool call: the turn whose reply asked for it). */
  turn: number;
  /** What was called: `llm <model>`, or the tool with its main argument (one line). */
  call: string;
  /** How it went: tokens, cost and stop reason; or `ok`/`error` with the ledger's state. */
  outcome: string;
  /** A tool result's opening words (one line). */
  preview?: string;
  isError?: boolean;
}

/** What a finished LLM call reports (the fused step's result). */
export interface LlmCallFacts {
  model: string;
  usage: UsageTotals;
  stopReason: string;
  /** The reply was found stored (an activity retry): nothing was sent to the provider. */
  replayed: boolean;
}

/** What a finished tool call reports (the ledger's outcome, previews only). */
export interface ToolCallFacts {
  isError: boolean;
  preview: string;
  replayed?: boolean;
  interrupted?: boolean;
  redactions?: number;
}

export function llmCallLine(turn: number, facts: LlmCallFacts): CallLine {
  const { usage } = facts;
  const promptTokens = usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens;
  const cache = [
    usage.cacheReadTokens > 0 ? `${formatTokens(usage.cacheReadTokens)} cached` : '',
    usage.cacheWriteTokens > 0 ? `${formatTokens(usage.cacheWriteTokens)} to cache` : '',
  ].filter(Boolean);
  const tokens = `${formatTokens(promptTokens)} in${cache.length > 0 ? ` (${cache.join(', ')})` : ''} / ${formatTokens(usage.outputTokens)} out`;
  const parts = [
    tokens,
    formatUsd(usage.costUsd),
    facts.stopReason,
    ...(facts.replayed ? ['stored, not sent again'] : []),
  ];
  return { kind: 'llm', turn, call: `llm ${oneLine(facts.model)}`, outcome: parts.join(' · ') };
}

export function toolCallLine(turn: number, summary: string, facts: ToolCallFacts): CallLine {
  const ledger = facts.interrupted
    ? 'interrupted: outcome unknown, not run again'
    : facts.replayed
      ? 'recorded before, not run again'
      : 'ran once';
  const redacted = facts.redactions ? [`${facts.redactions} secret value(s) redacted`] : [];
  // A redacted result opens with a line saying so (`safeToolText`); the outcome counts them instead.
  const text = facts.redactions ? facts.preview.slice(facts.preview.indexOf('\n') + 1) : facts.preview;
  return {
    kind: 'tool',
    turn,
    call: oneLine(summary),
    outcome: [facts.isError ? 'error' : 'ok', ledger, ...redacted].join(' · '),
    preview: oneLine(text),
    isError: facts.isError,
  };
}

/**
 * The calls of one turn on one line, within `maxBytes`: the LLM call whole, then each tool call while
 * it fits (the last one cut to fit), then how many more there were.
 * `turn 3: llm m → 1.6k in (1.5k cached) / 40 out · $0.0021 · tool_use ▸ file_write a.md (5 chars) → ok · ran once`
 */
export function callsText(lines: readonly CallLine[], maxBytes = SUMMARY_MAX_BYTES): string {
  if (lines.length === 0) return '';
  const parts = lines.map((l) => {
    const error = l.isError && l.preview ? ` (${l.preview.slice(0, SUMMARY_ERROR_PREVIEW_CHARS)})` : '';
    return defuseMarkdown(`${l.call} → ${l.outcome}${error}`);
  });
  const turns = [...new Set(lines.map((l) => l.turn))];
  /** Bytes a piece adds inside the summary's JSON string (no quotes of its own). */
  const inner = (piece: string): number => summaryBytes(piece) - 2;
  let text = `turn ${turns.join(', ')}: ${parts[0]}`;
  for (let i = 1; i < parts.length; i++) {
    const after = parts.length - 1 - i;
    const reserve = after > 0 ? inner(` ▸ +${after} more`) : 0;
    const room = maxBytes - summaryBytes(text) - inner(' ▸ ') - reserve;
    if (inner(parts[i]!) <= room) {
      text += ` ▸ ${parts[i]}`;
      continue;
    }
    // It does not fit: cut it when a useful part of it fits, then say how many calls are left out.
    let left = after + 1;
    if (room >= 24) {
      text += ` ▸ ${clampSummary(parts[i]!, room + 2)}`;
      left = after;
    }
    return clampSummary(left > 0 ? `${text} ▸ +${left} more` : text, maxBytes);
  }
  return clampSummary(text, maxBytes);
}

/** A step's summary with the calls of the step before it: `<label> ◂ <calls>`, within SUMMARY_MAX_BYTES. */
export function stepSummary(label: string, previous: readonly CallLine[]): string {
  if (previous.length === 0) return clampSummary(label, SUMMARY_MAX_BYTES);
  const head = `${label} ◂ `;
  return `${head}${callsText(previous, SUMMARY_MAX_BYTES - (summaryBytes(head) - 2))}`;
}

export interface RoundDetails {
  round: number;
  attempt: number;
  iteration: number;
  phase: string;
  usage: UsageTotals;
  /** Extra words after the phase (`blocked`). */
  note?: string;
  /** The newest calls, oldest first. */
  recent: readonly CallLine[];
  /** Where the task's run viewer is (a path on the API, or a full URL). */
  runViewer: string;
}

/**
 * The round's current details, as Markdown: its progress on one line, a short table of the newest
 * calls, and a link to the run viewer, which shows every call.
 */
export function roundDetailsMarkdown(d: RoundDetails): string {
  const spent = `${formatTokens(d.usage.inputTokens + d.usage.cacheReadTokens + d.usage.cacheWriteTokens)} in / ${formatTokens(d.usage.outputTokens)} out · ${formatUsd(d.usage.costUsd)}`;
  const head = `**round ${d.round}** · attempt ${d.attempt} · iteration ${d.iteration} · ${d.phase}${d.note ? ` · ${escapeMarkdown(d.note)}` : ''} · ${spent}`;
  const rows = d.recent.map((l) => {
    const preview = l.preview ? `: ${l.preview.slice(0, DETAILS_PREVIEW_CHARS)}` : '';
    return `| ${l.turn} | ${escapeMarkdown(l.call)} | ${escapeMarkdown(`${l.outcome}${preview}`)} |`;
  });
  const table = rows.length > 0 ? ['', '| turn | call | outcome |', '| --- | --- | --- |', ...rows] : [];
  return [head, ...table, '', `[run viewer: every call](${d.runViewer})`].join('\n');
}

/** $0.0042, $0.18, $12.40: four decimals under a cent, so a cheap call does not read as free. */
export function formatUsd(usd: number): string {
  if (usd === 0) return '$0';
  if (usd < 0.0001) return '<$0.0001';
  return usd < 0.01 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`;
}

/**
 * For Markdown that is rendered (the details): text shown as written that links, fetches and breaks
 * nothing. The characters that open links, images, autolinks, HTML and table cells are escaped
 * (`\[`), so are backslashes. Emphasis marks are left alone: at worst they change a word's style.
 */
export function escapeMarkdown(text: string): string {
  return text.replace(/[\\[\]<>|]/g, (c) => `\\${c}`);
}

/**
 * For text that may be shown as written or rendered (a summary): an inline link or image (`](`) and
 * an autolink or HTML tag (`<` before a letter, `/`, `!` or `?`) are broken by a space, which Markdown
 * does not allow there; everything else reads exactly as written, `[REDACTED secret]` included.
 */
export function defuseMarkdown(text: string): string {
  return text.replace(/\]\(/g, '] (').replace(/<(?=[A-Za-z/!?])/g, '< ');
}

/** A summary for text from a model or a tool: one line, defused, within SUMMARY_MAX_BYTES. */
export function uiSummary(text: string): string {
  return clampSummary(defuseMarkdown(oneLine(text)), SUMMARY_MAX_BYTES);
}

/** Bytes of the text as a JSON string in UTF-8: what the payload of a summary holds. */
export function summaryBytes(text: string): number {
  let bytes = 2;
  for (const c of text) bytes += charBytes(c);
  return bytes;
}

/** The text cut on a character boundary, with `…`, so that `summaryBytes` stays within `maxBytes`. */
export function clampSummary(text: string, maxBytes: number): string {
  if (summaryBytes(text) <= maxBytes) return text;
  let bytes = 2 + charBytes('…');
  let out = '';
  for (const c of text) {
    bytes += charBytes(c);
    if (bytes > maxBytes) break;
    out += c;
  }
  return `${out}…`;
}

function charBytes(c: string): number {
  if (c === '"' || c === '\\') return 2;
  const code = c.codePointAt(0)!;
  if (code < 0x20) return 6; // \u00XX
  if (code < 0x80) return 1;
  if (code < 0x800) return 2;
  if (code >= 0xd800 && code <= 0xdfff) return 6; // a lone surrogate: JSON writes \uXXXX
  return code < 0x10000 ? 3 : 4;
}

/** Whitespace runs (newlines included) as one space; other control characters dropped. */
function oneLine(text: string): string {
  return text
    .replace(/[\u0000-\u0008\u000e-\u001f\u007f]/g, '')
    .replace(/\s+/g, ' ')
    .trim();
}
