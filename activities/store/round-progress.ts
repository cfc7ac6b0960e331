/**
 * A running round's progress as its steps recorded it: what `getStatus` reports while the round's
 * `progress` query cannot answer. A query waits for the workflow's open workflow task, and a chain of
 * local steps holds one open for up to LOCAL_STEP_CHAIN_MAX_MS; the rows the steps write are current.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import type { UsageTotals } from '../../workflows/contract';
import { ASSISTANT_KEY_PREFIX, toolResultKey } from '../tools/ledger-writes';

/** The attempt in a step's key (`assistant-a{attempt}-t{turn}`, `assistantMessageKey`). */
const STEP_KEY_ATTEMPT = `^${ASSISTANT_KEY_PREFIX}([0-9]+)-t`;

export interface RecordedRoundProgress {
  /** The attempt the latest step belongs to. */
  attempt: number;
  /** Tool iterations of that attempt whose every call has a recorded result (the round's `iteration`). */
  iteration: number;
  /** What that attempt's steps spent, their auxiliary calls included (the round's own `usage`). */
  usage: UsageTotals;
}

/** One statement over the round's session; undefined before its first step is recorded. */
export async function recordedRoundProgress(
  db: Kysely<Database>,
  sessionId: string,
): Promise<RecordedRoundProgress | undefined> {
  const resultPrefix = toolResultKey('');
  const { rows } = await sql<{
    attempt: number | null;
    iteration: string;
    input_tokens: string;
    output_tokens: string;
    cache_read_tokens: string;
    cache_write_tokens: string;
    cost_usd: string;
  }>`
    with steps as (
      select content, substring(idem_key from ${STEP_KEY_ATTEMPT})::int as attempt
      from messages
      where session_id = ${sessionId} and role = 'assistant' and idem_key like ${`${ASSISTANT_KEY_PREFIX}%`}
    ), latest as (select max(attempt) as attempt from steps)
    select latest.attempt,
      (select count(*) from steps
        where steps.attempt = latest.attempt
          and steps.content @> '[{"type":"tool_use"}]'::jsonb
          and not exists (
            select 1 from jsonb_array_elements(steps.content) as call
            where call->>'type' = 'tool_use'
              and not exists (
                select 1 from messages as result
                where result.session_id = ${sessionId} and result.idem_key = ${resultPrefix} || (call->>'id')))
      ) as iteration,
      calls.*
    from latest
    cross join lateral (
      select coalesce(sum(input_tokens), 0) as input_tokens, coalesce(sum(output_tokens), 0) as output_tokens,
        coalesce(sum(cache_read_tokens), 0) as cache_read_tokens,
        coalesce(sum(cache_write_tokens), 0) as cache_write_tokens, coalesce(sum(cost_usd), 0) as cost_usd
      from llm_calls
      where session_id = ${sessionId} and idem_key like ${ASSISTANT_KEY_PREFIX} || latest.attempt || '-t%'
    ) as calls`.execute(db);
  const row = rows[0];
  if (!row || row.attempt === null) return undefined;
  return {
    attempt: row.attempt,
    iteration: Number(row.iteration),
    usage: {
      inputTokens: Number(row.input_tokens),
      outputTokens: Number(row.output_tokens),
      cacheReadTokens: Number(row.cache_read_tokens),
      cacheWriteTokens: Number(row.cache_write_tokens),
      costUsd: Number(row.cost_usd),
    },
  };
}
