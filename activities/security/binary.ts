/**
 * Binary data in tool results. PostgreSQL text cannot hold a NUL byte (error 22021), and a model gains
 * nothing from mojibake, so binary output is summarised truthfully (size, why it counts as binary,
 * the first bytes in hex) and any NUL left in text is escaped.
 */

/** Like git, look for a NUL in the first 8000 bytes to call data binary. */
export const BINARY_SNIFF_BYTES = 8_000;
/** Share of invalid UTF-8 sequences above which decoded text counts as binary rather than text. */
const MAX_REPLACEMENT_CHAR_RATIO = 0.1;
/** How many leading bytes a binary summary shows in hex. */
export const BINARY_PREVIEW_BYTES = 32;

/** Why `data` is binary, or undefined when it is text. */
export function binaryReason(data: Buffer): string | undefined {
  const head = data.subarray(0, BINARY_SNIFF_BYTES);
  if (head.includes(0)) return 'it contains NUL bytes';
  if (head.length === 0) return undefined;
  const text = head.toString('utf8');
  const invalid = (text.match(/\uFFFD/g) ?? []).length;
  return invalid / Math.max(text.length, 1) > MAX_REPLACEMENT_CHAR_RATIO ? 'it is not valid UTF-8 text' : undefined;
}

/** A truthful one-line description of binary data, for the model. */
export function summariseBinary(what: string, head: Buffer, totalBytes: number, reason: string): string {
  const shown = head.subarray(0, BINARY_PREVIEW_BYTES);
  const hex = shown.toString('hex').replace(/(..)(?!$)/g, '$1 ');
  return `[${what} is binary (${reason}): ${totalBytes} bytes, not shown as text. First ${shown.length} bytes in hex: ${hex}]`;
}

/** Text with each NUL written as the two characters `\0`, so it can be stored and shown. */
export function escapeNul(text: string): string {
  return text.includes('\0') ? text.replaceAll('\0', '\\0') : text;
}

/** `value` with NUL bytes escaped in every string it contains (for storing model arguments as JSON). */
export function escapeNulDeep(value: unknown): unknown {
  if (typeof value === 'string') return escapeNul(value);
  if (Array.isArray(value)) return value.map(escapeNulDeep);
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [escapeNul(k), escapeNulDeep(v)]));
  return value;
}

/** A UTF-16 surrogate without its partner: it has no UTF-8 encoding, so PostgreSQL cannot store it. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * Text a model produced, made storable in PostgreSQL text and jsonb: NUL written as `\0` and lone
 * surrogates replaced by U+FFFD. Without this a reply carrying either (an adversarial model can send
 * `\u0000` in any string) fails every write of the step ("unsupported Unicode escape sequence"), and
 * each retry pays for another call.
 */
export function storableText(text: string): string {
  return escapeNul(text.replace(LONE_SURROGATE, '\uFFFD'));
}

/** `value` with every string in it (keys too) made storable. */
export function storableDeep(value: unknown): unknown {
  if (typeof value === 'string') return storableText(value);
  if (Array.isArray(value)) return value.map(storableDeep);
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [storableText(k), storableDeep(v)]));
  return value;
}
