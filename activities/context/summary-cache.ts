/**
 * Reuse of conversation summaries across calls (a cost fix of ours).
 *
 * Without it, a session past 60 messages is re-summarised on every LLM call: one summariser call per
 * step, and a summary at the head of the conversation that changes every time, so the provider's
 * message cache never hits past it. `prepareMessages` therefore (1) folds stage 1's head in steps of
 * 20 messages rather than one message at a time, and (2) keeps each summary it makes in a
 * `SummaryCache`, keyed by a hash chained over the messages it folds. A later call whose head is the
 * same reuses the summary byte for byte (no summariser call, same cached prefix); when the head has
 * grown, the cached summary of the longest matching shorter head is folded together with the new
 * messages only (an incremental summary). The cache is advisory: a lookup or store that fails is
 * ignored and the summary is made as if there were no cache.
 */
import { createHash } from 'node:crypto';
import type { ChatMessage } from '../llm/types';

/** A summary made earlier of the first `length` messages of a conversation whose chained hash is `hash`. */
export interface CachedSummary {
  length: number;
  hash: string;
  /** The whole summary message text, label included. */
  text: string;
  source: 'llm' | 'heuristic';
}

/** Where prepareMessages keeps its summaries: `session_summaries` in production, a Map in tests and the bench. */
export interface SummaryCache {
  /** Summaries of heads of at most `maxLength` messages, longest first; a handful is plenty. */
  candidates(maxLength: number): Promise<CachedSummary[]>;
  /** Keeps a summary; storing the same hash again is a no-op. */
  store(summary: CachedSummary): Promise<void>;
}

/** How many candidates a cache should return: the latest few folds of the session. */
export const SUMMARY_CACHE_CANDIDATES = 5;

const HASH_ALGORITHM = 'sha256';
const memo = new WeakMap<ChatMessage, string>();

/** Hash of one message (role, kind, content); memoised per message object. */
export function messageHash(message: ChatMessage): string {
  const known = memo.get(message);
  if (known) return known;
  const hash = createHash(HASH_ALGORITHM)
    .update(message.role)
    .update('\0')
    .update(message.kind ?? 'normal')
    .update('\0')
    .update(JSON.stringify(message.content))
    .digest('hex');
  memo.set(message, hash);
  return hash;
}

/** `result[i]` identifies `messages.slice(0, i)`: a hash chained message by message (`result[0]` is the empty head). */
export function prefixHashes(messages: readonly ChatMessage[]): string[] {
  const out = [createHash(HASH_ALGORITHM).digest('hex')];
  for (const message of messages)
    out.push(createHash(HASH_ALGORITHM).update(out.at(-1)!).update(messageHash(message)).digest('hex'));
  return out;
}

/** An in-memory cache (tests, the bench, callers without a database). */
export function createMemorySummaryCache(): SummaryCache & { readonly entries: ReadonlyMap<string, CachedSummary> } {
  const entries = new Map<string, CachedSummary>();
  return {
    entries,
    async candidates(maxLength) {
      return [...entries.values()]
        .filter((e) => e.length <= maxLength)
        .sort((a, b) => b.length - a.length)
        .slice(0, SUMMARY_CACHE_CANDIDATES);
    },
    async store(summary) {
      if (!entries.has(summary.hash)) entries.set(summary.hash, summary);
    },
  };
}
