import { StringDecoder } from 'node:string_decoder';
import { BINARY_SNIFF_BYTES, binaryReason, summariseBinary } from '../../security/binary';
import { TRUNCATION_HEAD_FRACTION } from './limits';

/**
 * Collects a stream's text up to `maxChars`, keeping its head and its tail. Memory stays bounded by
 * about twice the cap whatever the command prints. A stream that is binary (a NUL byte or mostly
 * invalid UTF-8 in its first bytes, as git judges it) is reported as a one-line summary instead.
 */
export class HeadTailBuffer {
  private readonly decoder = new StringDecoder('utf8');
  private readonly headLimit: number;
  private readonly tailLimit: number;
  private head = '';
  private tail = '';
  private totalChars = 0;
  private totalBytes = 0;
  private sniffed: Buffer[] = [];
  private sniffedBytes = 0;

  constructor(private readonly maxChars: number) {
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
  finish(): { text: string; truncated: boolean; binary: boolean } {
    this.append(this.decoder.end());
    const head = Buffer.concat(this.sniffed);
    const reason = binaryReason(head);
    if (reason) return { text: `${summariseBinary('the output', head, this.totalBytes, reason)}\n`, truncated: false, binary: true };
    if (this.totalChars <= this.maxChars) return { text: this.head + this.tail, truncated: false, binary: false };
    const tail = lastChars(this.tail, this.tailLimit);
    const omitted = this.totalChars - this.head.length - tail.length;
    return { text: `${this.head}\n[… ${omitted} characters truncated …]\n${tail}`, truncated: true, binary: false };
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
    this.tail += rest;
    // Trim only when the tail is twice its limit, so trimming costs amortised O(1) per character.
    if (this.tail.length > 2 * this.tailLimit) this.tail = lastChars(this.tail, this.tailLimit);
  }
}

function lastChars(text: string, count: number): string {
  return count <= 0 ? '' : text.slice(-count);
}
