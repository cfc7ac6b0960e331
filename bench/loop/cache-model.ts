/**
 * A model of Anthropic's prompt caching, applied to recorded request bodies: the prompt is the block
 * sequence tools → system → messages; a request writes a cache entry at every `cache_control`
 * breakpoint, and reads the longest prefix, ending at a breakpoint or at one of the 20 block boundaries
 * before it, that an earlier request wrote. Tokens are tiktoken estimates per block (the shares, not
 * the absolute counts, are what the figures report). Entries do not expire (calls are seconds apart).
 */
import { createHash } from 'node:crypto';
import { countTokensRaw } from '../../activities/context/tokens';

/** Anthropic checks this many block boundaries before a breakpoint for an earlier entry. */
export const CACHE_LOOKBACK_BLOCKS = 20;

interface Block {
  tokens: number;
  hash: string;
  breakpoint: boolean;
}

function blocksOf(body: Record<string, unknown>): Block[] {
  const raw: Array<{ value: unknown; breakpoint: boolean }> = [];
  const take = (value: unknown) => {
    const { cache_control: cc, ...rest } = value as Record<string, unknown>;
    raw.push({ value: rest, breakpoint: cc !== undefined });
  };
  for (const tool of (body.tools as unknown[] | undefined) ?? []) take(tool);
  const system = body.system;
  if (typeof system === 'string') raw.push({ value: system, breakpoint: false });
  else for (const block of (system as unknown[] | undefined) ?? []) take(block);
  for (const message of (body.messages as Array<{ role: string; content: unknown }> | undefined) ?? []) {
    if (typeof message.content === 'string')
      raw.push({ value: { role: message.role, text: message.content }, breakpoint: false });
    else
      for (const [i, block] of (message.content as unknown[]).entries())
        take({ ...(block as object), ...(i === 0 ? { role: message.role } : {}) });
  }
  const hash = createHash('sha256');
  return raw.map(({ value, breakpoint }) => {
    const text = JSON.stringify(value);
    hash.update(text);
    return { tokens: countTokensRaw(text, 'claude-sonnet-4-5'), hash: hash.copy().digest('hex'), breakpoint };
  });
}

export interface CacheFigures {
  calls: number;
  /** From the second call on: input tokens a cache read would serve, of all input tokens. */
  cachedShareAfterFirst: number;
  /** Calls (from the second) whose read stopped short of the previous call's last breakpoint. */
  misses: number;
}

export function modelPrefixCache(bodies: ReadonlyArray<Record<string, unknown>>): CacheFigures {
  const written = new Set<string>();
  let read = 0;
  let total = 0;
  let misses = 0;
  let previousBreakpointTokens = 0;
  for (const [n, body] of bodies.entries()) {
    const blocks = blocksOf(body);
    const cumulative: number[] = [];
    blocks.reduce((acc, b, i) => (cumulative[i] = acc + b.tokens), 0);
    let hit = 0;
    for (const [i, block] of blocks.entries()) {
      if (!block.breakpoint) continue;
      for (let j = i; j >= Math.max(0, i - CACHE_LOOKBACK_BLOCKS); j -= 1) {
        if (written.has(blocks[j]!.hash)) {
          hit = Math.max(hit, cumulative[j]!);
          break;
        }
      }
    }
    for (const block of blocks) if (block.breakpoint) written.add(block.hash);
    if (n > 0) {
      read += hit;
      total += cumulative.at(-1) ?? 0;
      if (hit < previousBreakpointTokens) misses += 1;
    }
    const last = blocks
      .map((b, i) => (b.breakpoint ? i : -1))
      .filter((i) => i >= 0)
      .at(-1);
    previousBreakpointTokens = last === undefined ? 0 : cumulative[last]!;
  }
  return { calls: bodies.length, cachedShareAfterFirst: total > 0 ? read / total : 0, misses };
}
