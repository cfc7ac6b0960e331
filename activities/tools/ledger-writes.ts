import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import { TOOL_RESULT_OFFLOAD_CHARS, TOOL_RESULT_PREVIEW_CHARS } from '../../workflows/rules/harness';
import type { ToolResultImage } from '../llm/types';
import { appendMessage, appendMessageQuery } from '../store/sessions';
import { localCallKey, localCalls, type RanOutcome } from './effect-starts';
import { archiveToolImages, retireOldToolImages } from './tool-result-images';
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

/**
 * Stores what a run of the call produced: a long text offloaded (`offloadIfLarge`), its images, the
 * ledger's result and the session's message. Every write is idempotent, so storing again after a
 * failed attempt (a database outage) changes nothing twice. Returns the text the model reads. The
 * process stops remembering the outcome (`localCalls`) once it is stored.
 */
export async function storeOutcome(
  ctx: Pick<ToolContext, 'db' | 'sessionId'>,
  toolCallId: string,
  outcome: RanOutcome,
): Promise<string> {
  const content = await offloadIfLarge(ctx, toolCallId, outcome.text);
  // Images go with the message into PostgreSQL only: the workflow gets the text preview, as for any result.
  await archiveToolImages(ctx.db, ctx.sessionId, toolCallId, outcome.images);
  await finish(ctx, toolCallId, content, outcome.isError, outcome.redactions, outcome.images);
  localCalls.forget(localCallKey(ctx.sessionId, toolCallId));
  if (outcome.images.length > 0) await retireOldToolImages(ctx.db, ctx.sessionId);
  return content;
}

/** Results over the offload threshold are stored whole; the model gets a preview and the id to page through. */
async function offloadIfLarge(
  ctx: Pick<ToolContext, 'db' | 'sessionId'>,
  toolCallId: string,
  content: string,
): Promise<string> {
  if (content.length <= TOOL_RESULT_OFFLOAD_CHARS) return content;
  // Deterministic id: a retried call overwrites its own stored output instead of adding another.
  const id = `out_${createHash('sha256').update(`${ctx.sessionId}\0${toolCallId}`).digest('hex').slice(0, 24)}`;
  await ctx.db
    .insertInto('tool_outputs')
    .values({ id, session_id: ctx.sessionId, tool_call_id: toolCallId, content, chars: content.length })
    .onConflict((oc) => oc.column('id').doUpdateSet({ content, chars: content.length }))
    .execute();
  return (
    `${content.slice(0, TOOL_RESULT_PREVIEW_CHARS)}\n\n[Output truncated: ${content.length} characters in all. ` +
    `The full output is stored as ${id}; read more with read_tool_output({"id":"${id}","offset":${TOOL_RESULT_PREVIEW_CHARS}}).]`
  );
}
