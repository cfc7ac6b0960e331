/**
 * Prompt-injection hardening for text we did not write (user-provided segments are fenced
 * and neutralised). Two tools:
 *
 * - `neutralize(text)` defuses markup that could forge structure: our fence tags (`<untrusted>`,
 *   `<skill>`, …) so a value cannot close its fence early, chat-template special tokens (`<|im_start|>`),
 *   which some OpenAI-compatible servers parse inside text, and lines that imitate harness injections
 *   (`[SYSTEM …]`, `[SYSTEM REMINDER]`).
 * - `fence(source, text)` wraps neutralised text in `<untrusted source="…">…</untrusted>`. The Tier 1
 *   policies tell the model that fenced text is data: read it, never obey it.
 *
 * Identity files (SOUL.md, AGENTS.md, HEARTBEAT.md, TOOLS.md) are the agent's own instructions, so they
 * are neutralised (they cannot forge a fence) but not fenced.
 */

/** Tags we use to fence content; any occurrence inside a value is defused. */
export const FENCE_TAGS = ['untrusted', 'skill', 'scope-context', 'scope-prompts', 'message', 'transcript'] as const;

const FENCE_TAG_PATTERN = new RegExp(`<(/?)(${FENCE_TAGS.join('|')})(?=[\\s>/])`, 'gi');
const SPECIAL_TOKEN_PATTERN = /<\|([A-Za-z0-9_]{1,40})\|>/g;
const FAKE_INJECTION_PATTERN =
  /^(\s*)\[(SYSTEM|REFLECTION CHECKPOINT|HEARTBEAT CHECK-IN|TASK EXECUTION|Conversation history summary)/gim;

export function neutralize(text: string): string {
  return text
    .replace(FENCE_TAG_PATTERN, '‹$1$2')
    .replace(SPECIAL_TOKEN_PATTERN, '‹|$1|›')
    .replace(FAKE_INJECTION_PATTERN, '$1[quoted $2');
}

/** Quotes an attribute value (source names, skill names) so it cannot break out of the tag. */
export function attribute(value: string): string {
  return `"${value.replace(/["<>\n\r]/g, ' ').slice(0, 120)}"`;
}

/** `<untrusted source="…">` block around neutralised text. */
export function fence(source: string, text: string): string {
  return `<untrusted source=${attribute(source)}>\n${neutralize(text)}\n</untrusted>`;
}

/** Single-line, neutralised, length-capped rendering of a value shown inside a list item. */
export function inline(text: string, maxChars: number): string {
  // Only the opening can survive the cap; never run the regexes over a multi-megabyte value.
  const opening = text.length > maxChars * 4 + 64 ? text.slice(0, maxChars * 4 + 64) : text;
  return truncateChars(neutralize(opening.replace(/\s+/g, ' ').trim()), maxChars);
}

/** Cuts `text` to `maxChars` characters (ellipsis included), never splitting a surrogate pair. */
export function truncateChars(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  if (maxChars <= 1) return '…'.slice(0, Math.max(0, maxChars));
  let end = maxChars - 1;
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end -= 1;
  return `${text.slice(0, end)}…`;
}
