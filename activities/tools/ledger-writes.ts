import { sql } from 'kysely';
import type { ToolResultImage } from '../llm/types';
import { appendMessage, appendMessageQuery } from '../store/sessions';
import type { ToolContext } from './types';

/** Every task step's reply key starts with this (`assistantMessageKey`). */
export const ASSISTANT_KEY_PREFIX = 'assistant-a';

/** The session message key of a task step's reply: `assistant-a{attempt}-t{turn}`. */
export function assistantMessageKey(attempt: number, turn: number): string {
  return `${ASSISTANT_KEY_PREFIX}${attempt}-t${turn}`;
}

/** The session message key of a tool call's result. */
export function toolResultKey(toolCallId: string): string {
  return `result-${toolCallId}`;
}

/** Records the result in the ledger and appends it to the session: one atomic statement (one round trip). */
export async function finish(
  ctx: Pick<ToolContext, 'db' | 'sessionId'>,
  toolCallId: string,
  content: string,
  isError: boolean,
  redactions = 0,
  images: ToolResultImage[] = [],
): Promise<void> {
  const ledger = ctx.db
    .updateTable('tool_calls')
    .set({
      status: isError ? 'failed' : 'completed',
      result: content,
      is_error: isError,
      completed_at: new Date(),
      redactions,
    })
    .where('session_id', '=', ctx.sessionId)
    .where('tool_call_id', '=', toolCallId);
  const message = appendMessageQuery(ctx.db, ctx.sessionId, toolResultKey(toolCallId), {
    role: 'user',
    content: [
      { type: 'tool_result', toolUseId: toolCallId, content, isError, ...(images.length > 0 ? { images } : {}) },
    ],
  });
  await sql`with ledger as (${ledger}), message as (${message}) select 1`.execute(ctx.db);
}

/** Appends a tool call's result to the session (its ledger row is written by the caller). */
export async function appendResult(
  ctx: Pick<ToolContext, 'db' | 'sessionId'>,
  toolCallId: string,
  content: string,
  isError: boolean,
): Promise<void> {
  await appendMessage(ctx.db, ctx.sessionId, toolResultKey(toolCallId), {
    role: 'user',
    content: [{ type: 'tool_result', toolUseId: toolCallId, content, isError }],
  });
}
