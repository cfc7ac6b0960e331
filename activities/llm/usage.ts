/**
 * LLM usage accounting in PostgreSQL (`llm_calls`): one row per provider call (the main step call and
 * the auxiliary calls it makes: summaries, cognitive preparation), with agent, task, session, model,
 * tokens and cost; and the totals a task or an agent has spent.
 *
 * Auxiliary calls share the step's idempotency key as a prefix (`assistant-a1-t0:summary:…`,
 * `assistant-a1-t0:cpp-appraisal`), so a step's usage is every row whose key is the step's or starts
 * with it, and a retried activity finds what it already paid for.
 */
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../schema/database';
import { costUsd } from './cost';
import type { ChatResult } from './types';

type Db = Kysely<Database> | Transaction<Database>;

export interface UsageTotalsRow {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  costUsd: number;
  /** Provider calls counted. */
  calls: number;
}

export interface LlmCallRecord {
  agentId: string;
  taskId?: string;
  sessionId?: string;
  /** Unique per session; a second record with the same key is a no-op. */
  idemKey: string;
  result: Pick<ChatResult, 'provider' | 'model' | 'usage' | 'stopReason'>;
  durationMs: number;
}

/** Separates an auxiliary call's purpose from the step key it belongs to. */
export const AUXILIARY_KEY_SEPARATOR = ':';

/** The key of an auxiliary call made during a step, e.g. `assistant-a1-t0:cpp-appraisal`. */
export function auxiliaryCallKey(stepKey: string, purpose: string): string {
  return `${stepKey}${AUXILIARY_KEY_SEPARATOR}${purpose}`;
}

/** Records one provider call with its cost (list prices); idempotent by (session, key). Returns the cost. */
export async function recordLlmCall(db: Db, call: LlmCallRecord): Promise<number> {
  const { query, cost } = llmCallInsert(db, call);
  await query.execute();
  return cost;
}

/** `recordLlmCall`'s statement, not run (to combine it with other writes in one statement), and the cost it records. */
export function llmCallInsert(db: Db, call: LlmCallRecord) {
  const cost = costUsd(call.result.usage, call.result.model);
  const query = db
    .insertInto('llm_calls')
    .values({
      agent_id: call.agentId,
      task_id: call.taskId ?? null,
      session_id: call.sessionId ?? null,
      idem_key: call.idemKey,
      provider: call.result.provider,
      model: call.result.model,
      input_tokens: call.result.usage.inputTokens,
      output_tokens: call.result.usage.outputTokens,
      cache_read_tokens: call.result.usage.cacheReadTokens,
      cache_write_tokens: call.result.usage.cacheWriteTokens,
      cost_usd: cost,
      duration_ms: Math.round(call.durationMs),
      stop_reason: call.result.stopReason,
    })
    .onConflict((oc) => oc.columns(['session_id', 'idem_key']).doNothing());
  return { query, cost };
}

/** Whether a call with this key was already recorded in the session (an activity retry). */
export async function hasLlmCall(db: Db, sessionId: string, idemKey: string): Promise<boolean> {
  const row = await db
    .selectFrom('llm_calls')
    .select('id')
    .where('session_id', '=', sessionId)
    .where('idem_key', '=', idemKey)
    .executeTakeFirst();
  return row !== undefined;
}

export interface UsageFilter {
  agentId?: string;
  taskId?: string;
  /** One step: its own call and every auxiliary call made during it. */
  step?: { sessionId: string; key: string };
  /** Only calls made at or after this instant. */
  since?: Date;
}

/**
 * Sums `llm_calls` for a task, an agent (optionally since an instant) or one step. Costs are summed
 * per call as recorded (see `costUsd`: a long prompt can move a whole call into a dearer band).
 *
 * @example
 * await usageTotals(db, { agentId: 'reviewer', since: new Date(Date.UTC(2026, 10, 1)) });
 * // select sum(input_tokens), …, sum(cost_usd), count(*) from llm_calls where agent_id = $1 and created_at >= $2
 */
export async function usageTotals(db: Db, filter: UsageFilter): Promise<UsageTotalsRow> {
  let query = db
    .selectFrom('llm_calls')
    .select((eb) => [
      eb.fn.coalesce(eb.fn.sum<string>('input_tokens'), eb.lit(0)).as('inputTokens'),
      eb.fn.coalesce(eb.fn.sum<string>('output_tokens'), eb.lit(0)).as('outputTokens'),
      eb.fn.coalesce(eb.fn.sum<string>('cache_read_tokens'), eb.lit(0)).as('cacheReadTokens'),
      eb.fn.coalesce(eb.fn.sum<string>('cache_write_tokens'), eb.lit(0)).as('cacheWriteTokens'),
      eb.fn.coalesce(eb.fn.sum<string>('cost_usd'), eb.lit(0)).as('costUsd'),
      eb.fn.countAll<string>().as('calls'),
    ]);
  if (filter.agentId !== undefined) query = query.where('agent_id', '=', filter.agentId);
  if (filter.taskId !== undefined) query = query.where('task_id', '=', filter.taskId);
  if (filter.since !== undefined) query = query.where('created_at', '>=', filter.since);
  if (filter.step !== undefined) {
    const { sessionId, key } = filter.step;
    query = query
      .where('session_id', '=', sessionId)
      .where((eb) =>
        eb.or([eb('idem_key', '=', key), eb('idem_key', 'like', `${escapeLike(key)}${AUXILIARY_KEY_SEPARATOR}%`)]),
      );
  }
  const row = await query.executeTakeFirstOrThrow();
  return {
    inputTokens: Number(row.inputTokens),
    outputTokens: Number(row.outputTokens),
    cacheReadTokens: Number(row.cacheReadTokens),
    cacheWriteTokens: Number(row.cacheWriteTokens),
    costUsd: Number(row.costUsd),
    calls: Number(row.calls),
  };
}

function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}
