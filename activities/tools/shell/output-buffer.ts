import { StringDecoder } from 'node:string_decoder';
import { BINARY_SNIFF_BYTES, binaryReason, summariseBinary } from '../../security/binary';
import { redactSecrets, secretValues } from '../../security/secrets';
import { TRUNCATION_HEAD_FRACTION } from './limits';

/**
 * Characters kept beyond each side of the cut, so that a secret lying across it is still whole when
 * redaction runs: longer than any provider key or password a worker holds.
 */
export const REDACTION_MARGIN_CHARS = 4096;

/**
 * Collects a stream's text up to `maxChars`, keeping its head and its tail. Memory stays bounded by
 * about twice the cap whatever the command prints. A stream that is binary (a NUL byte or mostly
 * invalid UTF-8 in its first bytes, as git judges it) is reported as a one-line summary instead.
 *
 * Secrets are redacted before the output is cut (issue 18): head and tail are kept with a margin, the
 * margin is redacted with them, and only then is each side cut to size, never inside a redaction
 * marker. So the truncation marker can never split a secret into two halves that each pass redaction.
 */
export class HeadTailBuffer {
  private readonly decoder = new StringDecoder('utf8');
  private readonly headLimit: number;
  private readonly tailLimit: number;
  private head = '';
  /** Up to `REDACTION_MARGIN_CHARS` after the head, kept until the end so redaction sees across the cut. */
  private headMargin = '';
  private tail = '';
  private totalChars = 0;
  private totalBytes = 0;
  private sniffed: Buffer[] = [];
  private sniffedBytes = 0;

  constructor(
    private readonly maxChars: number,
    private readonly secrets: readonly string[] = secretValues(),
  ) {
    this.headLimit = Math.floor(maxChars * TRUNCATION_HEAD_FRACTION);
    this.tailLimit = maxChars - this.headLimit;
  }

  push(chunk: Buffer): void {
    this.totalBytes += chunk.length;
    if (this.sniffedBytes < BINARY_SNIFF_BYTES) {
      const part = chunk.subarray(0, BINARY_SNIFF_BYTES - this.sniffedBytes);
      this.sniffed.push(Buffer.from(part));
      this.sniffedBytes += part.length;
    }
    this.append(this.decoder.write(chunk));
  }

  /** The collected text; when over the cap, head and tail around a marker saying how much was cut. */
  finish(): { text: string; truncated: boolean; binary: boolean; redactions: number } {
    this.append(this.decoder.end());
    const sniffed = Buffer.concat(this.sniffed);
    const reason = binaryReason(sniffed);
    if (reason)
      return {
        text: `${summariseBinary('the output', sniffed, this.totalBytes, reason)}\n`,
        truncated: false,
        binary: true,
        redactions: 0,
      };
    if (this.totalChars <= this.maxChars)
      return { text: this.head + this.tail, truncated: false, binary: false, redactions: 0 };
    // The head with what follows it, and the tail with what precedes it, redacted whole, then cut.
    const tailWithMargin = lastChars(this.tail, this.tailLimit + REDACTION_MARGIN_CHARS);
    const headSide = redactSecrets(this.head + this.headMargin, this.secrets);
    const tailSide = redactSecrets(tailWithMargin, this.secrets);
    const head = cutAfter(headSide.text, this.headLimit);
    const tail = cutBefore(tailSide.text, this.tailLimit);
    const omitted = Math.max(this.totalChars - this.headLimit - this.tailLimit, 0);
    return {
      text: `${head}\n[… ${omitted} characters truncated …]\n${tail}`,
      truncated: true,
      binary: false,
      redactions: countMarkers(head) + countMarkers(tail),
    };
  }

  private append(text: string): void {
    if (text === '') return;
    this.totalChars += text.length;
    let rest = text;
    if (this.head.length < this.headLimit) {
      const room = this.headLimit - this.head.length;
      this.head += rest.slice(0, room);
      rest = rest.slice(room);
    }
    if (rest === '') return;
    if (this.headMargin.length < REDACTION_MARGIN_CHARS) {
      const room = REDACTION_MARGIN_CHARS - this.headMargin.length;
      this.headMargin += rest.slice(0, room);
    }
    this.tail += rest;
    // Trim only when the tail is twice its limit, so trimming costs amortised O(1) per character.
    const keep = this.tailLimit + REDACTION_MARGIN_CHARS;
    if (this.tail.length > 2 * keep) this.tail = lastChars(this.tail, keep);
  }
}

/** Redaction markers of any kind: `[REDACTED secret]` and the scanner's `[REDACTED <name>]`. */
const MARKER = /\[REDACTED [^\]\n]*\]/g;

function countMarkers(text: string): number {
  return text.match(MARKER)?.length ?? 0;
}

/** The first `limit` characters, extended to the end of a redaction marker the cut would split. */
function cutAfter(text: string, limit: number): string {
  for (const match of text.matchAll(MARKER)) {
    const start = match.index;
    const end = start + match[0].length;
    if (start < limit && end > limit) return text.slice(0, end);
  }
  return text.slice(0, limit);
}

/** The last `limit` characters, extended back to the start of a redaction marker the cut would split. */
function cutBefore(text: string, limit: number): string {
  const from = Math.max(text.length - limit, 0);
  for (const match of text.matchAll(MARKER)) {
    const start = match.index;
    const end = start + match[0].length;
    if (start < from && end > from) return text.slice(start);
  }
  return text.slice(from);
}

function lastChars(text: string, count: number): string {
  return count <= 0 ? '' : text.slice(-count);
}
