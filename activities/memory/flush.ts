import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { STAGE1_TRIGGER_MESSAGES } from '../context/limits';
import { appendMessage, findMessage } from '../store/sessions';
import { shouldFlushMemory } from '../../workflows/rules/memory-limits';
import { MEMORY_FLUSH_PROMPT } from '../../prompts/memory';

/**
 * Ours: the flush comes this many messages before stage 1 of compression folds the head into a summary
 * (at 60), so the agent has a few turns of memory_save calls while it still sees every message verbatim.
 */
export const MEMORY_FLUSH_LEAD_MESSAGES = 10;
/** A planned preflight of the reference code: flush once the conversation fills 75% of its message budget (stage 3 compresses at 100%). */
export const MEMORY_FLUSH_BUDGET_FRACTION = 0.75;
/** The flush request's key in the session: one per session, so it is never asked twice. */
export const MEMORY_FLUSH_MESSAGE_KEY = 'memory-flush';
/** The tool the flush asks for: sessions whose scenario does not offer it are never flushed. */
const MEMORY_SAVE_TOOL = 'memory_save';

export interface CompactionOutlook {
  /** Stored messages of the session, this turn's included. */
  messageCount: number;
  /** The conversation's size before compression, and the budget it must fit (calibrated tokens). */
  messageTokens: number;
  messageBudget: number;
}

/** True when compression will soon drop messages verbatim: near stage 1's count, or past 75% of the budget. */
export function compactionIsNear(outlook: CompactionOutlook): boolean {
  if (outlook.messageCount >= STAGE1_TRIGGER_MESSAGES - MEMORY_FLUSH_LEAD_MESSAGES) return true;
  return outlook.messageBudget > 0 && outlook.messageTokens >= MEMORY_FLUSH_BUDGET_FRACTION * outlook.messageBudget;
}

/**
 * Wired: before compression drops messages, the agent gets the `[MEMORY FLUSH]`
 * request once per session, as a user message of this turn, while it still sees the whole
 * conversation; it answers with memory_save / update_notebook calls and carries on. Applies only where
 * `memory_save` is offered and the session is longer than 30 messages (`shouldFlushMemory`).
 * Returns true when it appended the request (the caller re-reads the session and re-assembles).
 * Idempotent: the request is stored under a fixed key, so a retried step neither repeats nor loses it.
 */
export async function requestMemoryFlushIfDue(
  db: Kysely<Database>,
  sessionId: string,
  offeredTools: ReadonlySet<string> | ReadonlyMap<string, unknown>,
  outlook: CompactionOutlook,
): Promise<boolean> {
  if (!offeredTools.has(MEMORY_SAVE_TOOL)) return false;
  if (!shouldFlushMemory({ messageCount: outlook.messageCount, aboutToCompact: compactionIsNear(outlook) }))
    return false;
  if (await findMessage(db, sessionId, MEMORY_FLUSH_MESSAGE_KEY)) return false;
  await appendMessage(db, sessionId, MEMORY_FLUSH_MESSAGE_KEY, {
    role: 'user',
    kind: 'injection',
    content: [{ type: 'text', text: MEMORY_FLUSH_PROMPT }],
  });
  return true;
}
