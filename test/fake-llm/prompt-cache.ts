/**
 * The fake server's model of Anthropic's prompt cache, with lifetimes. The prompt is the block
 * sequence tools → system blocks → message blocks. Every `cache_control` block is a breakpoint that
 * writes the prefix ending there, with the breakpoint's lifetime (`ttl: '5m'`, the default, or
 * `'1h'`). A request reads the longest live prefix that ends at a breakpoint or at one of the block
 * boundaries just before it; what lies between that prefix and the last breakpoint is written, each
 * stretch at the lifetime of the breakpoint that ends it; the rest is plain input. A read refreshes the
 * lifetime of every live entry along the prefix it used (the API refreshes a cache each time it is
 * used, at no cost). Breakpoints whose prefix is shorter than the model's minimum are not cached.
 *
 * Time is simulated: `now()` runs at `timeScale` simulated milliseconds per real one, and `advance`
 * jumps ahead, so a test's hour-long approval wait takes no real time.
 */
import { createHash } from 'node:crypto';

/** The fake's stand-in for a token: 4 characters of the block's JSON (the API's own rule of thumb). */
export const FAKE_CHARS_PER_TOKEN = 4;
/** Anthropic's default lifetime of a cache entry (`ttl` absent or `'5m'`). */
export const CACHE_TTL_5M_MS = 5 * 60_000;
/** The extended lifetime (`ttl: '1h'`). */
export const CACHE_TTL_1H_MS = 60 * 60_000;
/** Anthropic looks for an earlier entry at this many block boundaries before each breakpoint. */
export const CACHE_LOOKBACK_BLOCKS = 20;
/** The API rejects a request with more breakpoints than this. */
export const CACHE_MAX_BREAKPOINTS = 4;
/** Sonnet's and Opus's shortest cacheable prefix; shorter prefixes are silently not cached. */
export const DEFAULT_MIN_CACHEABLE_TOKENS = 1_024;

export interface PromptCacheOptions {
  /** Simulated milliseconds per real millisecond (default 1). */
  timeScale?: number;
  /** Default 1,024 (Sonnet and Opus); 0 caches any prefix. */
  minCacheableTokens?: number;
}

/** What one request costs in the cache, in the API's usage fields' terms. */
export interface PromptCacheUsage {
  inputTokens: number;
  cacheReadTokens: number;
  /** All cache writes; the split by lifetime follows. */
  cacheWriteTokens: number;
  cacheWrite5mTokens: number;
  cacheWrite1hTokens: number;
  /** Simulated time of the request. */
  at: number;
}

interface Block {
  /** Tokens of the prompt up to and including this block. */
  cumulativeTokens: number;
  hash: string;
  ttlMs: number | undefined;
}

interface Entry {
  tokens: number;
  ttlMs: number;
  expiresAt: number;
}

/** A request the real API would refuse (400 invalid_request_error). */
export class PromptCacheRequestError extends Error {}

export class FakePromptCache {
  private readonly entries = new Map<string, Entry>();
  private readonly startedReal = Date.now();
  private readonly timeScale: number;
  private readonly minCacheableTokens: number;
  private skipped = 0;

  constructor(options: PromptCacheOptions = {}) {
    this.timeScale = options.timeScale ?? 1;
    this.minCacheableTokens = options.minCacheableTokens ?? DEFAULT_MIN_CACHEABLE_TOKENS;
    if (!(this.timeScale > 0)) throw new Error(`prompt cache: timeScale must be positive, got ${this.timeScale}`);
  }

  /** Simulated time in ms since the cache was created. */
  now(): number {
    return (Date.now() - this.startedReal) * this.timeScale + this.skipped;
  }

  /** Moves simulated time forward by `ms` (an approval wait that takes no real time). */
  advance(ms: number): void {
    this.skipped += ms;
  }

  /** The cache accounting of one Messages request body; records its writes and refreshes its reads. */
  usageFor(body: Record<string, unknown>): PromptCacheUsage {
    const blocks = blocksOf(body);
    const breakpoints = blocks.flatMap((b, i) => (b.ttlMs === undefined ? [] : [i]));
    if (breakpoints.length > CACHE_MAX_BREAKPOINTS)
      throw new PromptCacheRequestError(
        `A maximum of ${CACHE_MAX_BREAKPOINTS} blocks with cache_control may be provided. Found ${breakpoints.length}.`,
      );
    const ttls = breakpoints.map((i) => blocks[i]!.ttlMs!);
    if (ttls.some((ttl, k) => k > 0 && ttl > ttls[k - 1]!))
      throw new PromptCacheRequestError(
        "a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block",
      );
    const now = this.now();
    const live = (hash: string) => {
      const entry = this.entries.get(hash);
      return entry && entry.expiresAt > now ? entry : undefined;
    };

    // The longest live prefix at a breakpoint or within the look-back window before one.
    let readIndex = -1;
    for (const bp of breakpoints) {
      for (let i = bp; i >= Math.max(0, bp - CACHE_LOOKBACK_BLOCKS); i -= 1) {
        if (i <= readIndex) break;
        if (live(blocks[i]!.hash)) {
          readIndex = i;
          break;
        }
      }
    }
    const readTokens = readIndex >= 0 ? blocks[readIndex]!.cumulativeTokens : 0;
    for (let i = 0; i <= readIndex; i += 1) {
      const entry = live(blocks[i]!.hash);
      if (entry) entry.expiresAt = now + entry.ttlMs;
    }

    let written = readTokens;
    let write5m = 0;
    let write1h = 0;
    for (const bp of breakpoints) {
      const block = blocks[bp]!;
      if (bp <= readIndex || block.cumulativeTokens < this.minCacheableTokens) continue;
      const ttlMs = block.ttlMs!;
      const stretch = block.cumulativeTokens - written;
      if (ttlMs === CACHE_TTL_1H_MS) write1h += stretch;
      else write5m += stretch;
      written = block.cumulativeTokens;
      this.entries.set(block.hash, { tokens: block.cumulativeTokens, ttlMs, expiresAt: now + ttlMs });
    }
    const total = blocks.at(-1)?.cumulativeTokens ?? 0;
    return {
      inputTokens: total - written,
      cacheReadTokens: readTokens,
      cacheWriteTokens: write5m + write1h,
      cacheWrite5mTokens: write5m,
      cacheWrite1hTokens: write1h,
      at: now,
    };
  }
}

function ttlOf(cacheControl: unknown): number | undefined {
  if (cacheControl === undefined || cacheControl === null) return undefined;
  const { type, ttl } = cacheControl as { type?: unknown; ttl?: unknown };
  if (type !== 'ephemeral') throw new PromptCacheRequestError(`cache_control.type: expected 'ephemeral'`);
  if (ttl === undefined || ttl === '5m') return CACHE_TTL_5M_MS;
  if (ttl === '1h') return CACHE_TTL_1H_MS;
  throw new PromptCacheRequestError(`cache_control.ttl: expected '5m' or '1h', got ${JSON.stringify(ttl)}`);
}

function blocksOf(body: Record<string, unknown>): Block[] {
  const out: Block[] = [];
  let hash = '';
  let chars = 0;
  const add = (value: Record<string, unknown>) => {
    const { cache_control: cacheControl, ...rest } = value;
    const json = JSON.stringify(rest);
    hash = createHash('sha256').update(hash).update(json).digest('hex');
    chars += json.length;
    out.push({ cumulativeTokens: Math.ceil(chars / FAKE_CHARS_PER_TOKEN), hash, ttlMs: ttlOf(cacheControl) });
  };
  for (const tool of (body.tools as Array<Record<string, unknown>> | undefined) ?? []) add(tool);
  const system = body.system;
  if (typeof system === 'string') add({ type: 'text', text: system });
  else for (const block of (system as Array<Record<string, unknown>> | undefined) ?? []) add(block);
  for (const message of (body.messages as Array<{ role: string; content: unknown }> | undefined) ?? []) {
    const content =
      typeof message.content === 'string'
        ? [{ type: 'text', text: message.content }]
        : (message.content as Array<Record<string, unknown>>);
    content.forEach((block, i) => add({ role: i === 0 ? message.role : undefined, ...block }));
  }
  return out;
}
