import { z } from 'zod';
import { sql, type RawBuilder } from 'kysely';
import { findMessage } from '../store/sessions';
import type { ToolUseBlock } from '../llm/types';
import { safeArgumentsJson, safeLine, safeToolText } from '../security/tool-text';
import { secretValues } from '../security/secrets';
import type { ToolContext, ToolOutput, ToolSpec } from './types';
import { decideForkCall } from '../fork/tool-calls';
import { appendResult, assistantMessageKey, finish, storeOutcome } from './ledger-writes';
import { settleInterrupted } from './interrupted-calls';
import {
  CallBegunElsewhereError,
  isDatabaseUnavailable,
  localCallKey,
  localCalls,
  marksItsOwnStart,
  onEffectBegins,
  type RanOutcome,
} from './effect-starts';

export { toolResultKey } from './ledger-writes';
export { settleUnansweredCalls } from './interrupted-calls';

/** The question tool: its approval decision is the human's answer (see human-tools.ts). */
const REQUEST_USER_APPROVAL = 'request_user_approval';

/** How much of a result travels back into workflow history (the full result stays in PostgreSQL). */
export const RESULT_PREVIEW_FOR_WORKFLOW_CHARS = 200;

export interface ApprovalOutcome {
  requestId: string;
  /** `expired`: a policy's expiry passed with nobody deciding (not a refusal; see `explanation`). */
  decision: 'approved' | 'rejected' | 'timed_out' | 'expired';
  comment?: string;
  decidedBy?: string;
  /** For `expired`: what the model is told, in words (nobody decided in time, and what happens next). */
  explanation?: string;
}

export interface ExecuteToolInput {
  agentId: string;
  taskId?: string;
  sessionId: string;
  /** The round attempt and LLM turn whose assistant message holds the tool call. */
  attempt: number;
  turn: number;
  toolCallId: string;
  approval?: ApprovalOutcome;
  /** The outcome of a tool that runs in the workflow (`runsInWorkflow`), to record in the ledger. */
  workflowResult?: { content: string; isError: boolean };
}

export type ExecuteToolResult =
  | {
      kind: 'done';
      tool: string;
      isError: boolean;
      /** Short preview for the workflow's history and the status timeline. */
      preview: string;
      /** Set for a successful task_submit_review: the summary. */
      submission?: string;
      /** The ledger already had a result: nothing ran this time. */
      replayed?: boolean;
      /** The outcome of an earlier run is unknown (worker died mid-run); it was not run again. */
      interrupted?: boolean;
      /** How many secret values were cut out of the result before it was stored (absent: none). */
      redactions?: number;
    }
  | { kind: 'approval-required'; tool: string; summary: string; reason: string; requestId: string }
  /** A valid call of a tool that runs in the workflow (sub-agents): nothing ran and nothing was recorded yet. */
  | { kind: 'run-in-workflow'; tool: string; summary: string; args: unknown };

export function approvalRequestId(sessionId: string, toolCallId: string): string {
  return `${sessionId}:${toolCallId}`;
}

/** Unique per session: attempts of a round share its session, each numbering its own turns. */
export { assistantMessageKey };

/**
 * Runs one tool call with an exactly-once effect under Temporal's at-least-once activities:
 * a ledger row keyed by (session, tool-call id) records `started` before the tool runs and the result
 * after. A retry that finds a result returns it; one that finds `started` on a side-effecting tool
 * reports the call as interrupted and never runs it again. Invalid calls (unknown tool, unparsable or
 * schema-violating arguments, denied by governance) become error results the model sees.
 *
 * Every result passes `safeToolText` before it is stored or returned: NUL bytes escaped, the worker's
 * secrets redacted (counted in the ledger's `redactions`), so nothing secret reaches PostgreSQL, a
 * model, the logs or Temporal history.
 */
export async function executeToolCall(
  input: ExecuteToolInput,
  tools: ReadonlyMap<string, ToolSpec>,
  ctx: Omit<ToolContext, 'toolCallId' | 'approvalComment' | 'approved'>,
  /** The call as stored in its assistant message, when the caller has it (the fused step): not read again. */
  known?: ToolUseBlock,
  /**
   * `fresh`: the caller stored the call's reply itself, so the call has no ledger row to find.
   * `started`: its `started` row was written with that reply (`startedWithReply`), so it runs at once.
   */
  options: { fresh?: boolean; started?: boolean } = {},
): Promise<ExecuteToolResult> {
  const { db, sessionId } = ctx;
  const call =
    known && known.id === input.toolCallId
      ? known
      : await loadToolCall(ctx, input.attempt, input.turn, input.toolCallId);
  const spec = tools.get(call.name);

  const ledger =
    options.fresh && call === known
      ? undefined
      : await db
          .selectFrom('tool_calls')
          .selectAll()
          .where('session_id', '=', sessionId)
          .where('tool_call_id', '=', call.id)
          .executeTakeFirst();
  if (ledger && ledger.status !== 'started') {
    await appendResult(ctx, call.id, ledger.result ?? '', ledger.is_error);
    return done(call.name, ledger.result ?? '', ledger.is_error, { replayed: true });
  }
  const localKey = localCallKey(sessionId, call.id);
  // A side-effecting call found started is never run twice. When this process began it, it knows
  // what happened: the run's outcome is stored now (its first write failed: a database outage), and
  // a call whose start was never reached runs now. Otherwise the worker that ran it stopped: its tool
  // says what happened when it can, else the model is told the outcome is unknown. A call whose
  // effect never landed changed nothing, so it runs now, once (its ledger row stays as it is).
  let resumed = false;
  if (ledger && ledger.side_effecting && !input.workflowResult) {
    const local = await localCalls.settled(localKey, ctx.signal);
    if (local?.state === 'ran') return land(ctx, call, spec, local.outcome);
    if (local?.state === 'not-begun') resumed = true;
    else {
      const { text, isError, landed } = await settleInterrupted(call, spec, ctx);
      if (landed !== false) {
        await finish(ctx, call.id, text, isError);
        return done(call.name, text, isError, landed === undefined ? { interrupted: true } : {});
      }
      resumed = true;
    }
  }
  if (options.started && !startsWithReply(call, spec, ctx))
    throw new Error(`tool call ${call.id} was recorded as started with its reply but needs a decision first`);
  // The worker's secret values, read from its environment once for every redaction of this call.
  const secrets = secretValues();

  const rejection = validate(call, spec);
  if (rejection) return recordWithoutRunning(ctx, call, rejection);
  const parsed = spec!.schema.safeParse(call.input);
  if (!parsed.success) {
    return recordWithoutRunning(
      ctx,
      call,
      `Invalid arguments for ${call.name}: ${z.prettifyError(parsed.error)}. Fix the arguments and call it again.`,
    );
  }
  const args = parsed.data;
  if (ctx.fork && call.name !== 'task_submit_review') {
    // The fork's own submission always runs (it is the fork's task); every other call is the fork policy's.
    const decided = await decideForkCall(ctx, ctx.fork, call, spec!, args);
    if (decided.kind === 'answer') return recordWithoutRunning(ctx, call, decided.text, decided.isError);
  }
  const toolCtx: ToolContext = {
    ...ctx,
    toolCallId: call.id,
    approvalComment: input.approval?.comment,
    approved: input.approval?.decision === 'approved',
  };
  const governance = spec!.govern ? await spec!.govern(args, toolCtx) : { tier: 'allow' as const };
  const summary = safeLine(spec!.summarize?.(args) ?? call.name, secrets);

  if (governance.tier === 'deny') {
    return recordWithoutRunning(
      ctx,
      call,
      `Denied by policy: ${governance.reason}. This action is never allowed; do not retry it.`,
    );
  }
  if (governance.tier === 'approval') {
    if (!input.approval) {
      return {
        kind: 'approval-required',
        tool: call.name,
        summary,
        reason: safeLine(governance.reason),
        requestId: approvalRequestId(sessionId, call.id),
      };
    }
    if (input.approval.decision !== 'approved') {
      const who = input.approval.decidedBy ? ` by ${input.approval.decidedBy}` : '';
      if (call.name === REQUEST_USER_APPROVAL && input.approval.decision === 'rejected') {
        // For a question, "rejected" is an answer, not a failure.
        const answer = input.approval.comment ? ` Their answer: ${input.approval.comment}` : ' They added no comment.';
        return recordWithoutRunning(ctx, call, `${input.approval.decidedBy ?? 'The human'} declined.${answer}`, false);
      }
      if (input.approval.decision === 'expired') {
        return recordWithoutRunning(
          ctx,
          call,
          input.approval.explanation ??
            `Not run: nobody decided on the approval request for "${summary}" in time. This is not a refusal; you may ask again.`,
        );
      }
      const text =
        input.approval.decision === 'timed_out'
          ? `Not run: the approval request for "${summary}" timed out without a decision. Do not retry it without asking again.`
          : `Not run: the approval request for "${summary}" was rejected${who}.${input.approval.comment ? ` Reason: ${input.approval.comment}` : ''}`;
      return recordWithoutRunning(ctx, call, text);
    }
  }

  if (spec!.runsInWorkflow && !input.workflowResult) return { kind: 'run-in-workflow', tool: call.name, summary, args };

  // The `started` row is written when the call's work can begin: right before `run`, or, for a tool
  // that reads the database first (`startsItsOwnEffect`), when the tool reaches its effect. A row
  // written with the reply, or one whose run never landed or never began, is there already.
  const ownStart = marksItsOwnStart(spec!);
  let begun = false;
  let ran: ((outcome: RanOutcome | undefined) => void) | undefined;
  const begin = async (): Promise<void> => {
    if (begun) return;
    if (!options.started && !resumed) {
      try {
        await writeStarted(ctx, call, spec!, safeArgumentsJson(args, secrets), ownStart);
      } catch (error) {
        // The row may have been written (a commit whose answer was lost), but nothing began.
        localCalls.notBegun(localKey);
        throw error;
      }
    }
    begun = true;
    ran = localCalls.running(localKey);
  };
  if (ownStart) onEffectBegins(toolCtx, begin);
  else await begin();

  let output: ToolOutput;
  try {
    output = input.workflowResult && spec!.runsInWorkflow ? input.workflowResult : await spec!.run(args, toolCtx);
  } catch (error) {
    if (
      ctx.signal.aborted ||
      error instanceof CallBegunElsewhereError ||
      (ownStart && !begun && isDatabaseUnavailable(error))
    ) {
      // Cancelled: the outcome is not known here. Another execution began the call: its record stands.
      // Or the database went away before the effect began: nothing was recorded and nothing ran, so
      // the activity's retry runs the call, once.
      ran?.(undefined);
      throw error;
    }
    output = {
      content: `${call.name} failed: ${error instanceof Error ? error.message : String(error)}`,
      isError: true,
    };
  }
  if (governance.tier === 'approval' && input.approval?.comment && call.name !== REQUEST_USER_APPROVAL) {
    output = {
      ...output,
      content: `${output.content}\n[Approved${input.approval.decidedBy ? ` by ${input.approval.decidedBy}` : ''} with comment: ${input.approval.comment}]`,
    };
  }
  // The tool answered without reaching its effect (it refused, or now needs approval): nothing ran.
  if (!begun) return recordWithoutRunning(ctx, call, output.content, output.isError ?? false);
  const safe = safeToolText(output.content, secrets, output.redactions ?? 0);
  const outcome = {
    text: safe.text,
    isError: output.isError ?? false,
    redactions: safe.redactions,
    images: output.images ?? [],
  };
  // Remembered until stored: a retry in this process stores it if the writes below fail.
  ran!(outcome);
  return land(ctx, call, spec, outcome, secrets);
}

/**
 * Stores a run's outcome (`storeOutcome`) and returns it. Also the retry's path for an outcome this
 * process remembered because its first storing failed.
 */
async function land(
  ctx: Omit<ToolContext, 'toolCallId' | 'approvalComment' | 'approved'>,
  call: ToolUseBlock,
  spec: ToolSpec | undefined,
  outcome: RanOutcome,
  secrets?: readonly string[],
): Promise<ExecuteToolResult> {
  const content = await storeOutcome(ctx, call.id, outcome);
  const parsed =
    call.name === 'task_submit_review' && !outcome.isError ? spec?.schema.safeParse(call.input) : undefined;
  const submission = parsed?.success
    ? safeLine(String((parsed.data as { summary: string }).summary), secrets)
    : undefined;
  return done(call.name, content, outcome.isError, {
    submission,
    ...(outcome.redactions > 0 ? { redactions: outcome.redactions } : {}),
  });
}

/**
 * The ledger's `started` row, right before the call's work begins. For a tool that marks its own
 * start, a row already there means another execution of the call began it: this one must not.
 */
async function writeStarted(
  ctx: Omit<ToolContext, 'toolCallId' | 'approvalComment' | 'approved'>,
  call: ToolUseBlock,
  spec: ToolSpec,
  args: string,
  exclusive: boolean,
): Promise<void> {
  const written = await ctx.db
    .insertInto('tool_calls')
    .values({
      session_id: ctx.sessionId,
      tool_call_id: call.id,
      task_id: ctx.taskId ?? null,
      agent_id: ctx.agentId,
      tool: call.name,
      args,
      status: 'started',
      side_effecting: spec.sideEffecting,
      is_error: false,
      executions: 1,
    })
    .onConflict((oc) =>
      exclusive
        ? oc.columns(['session_id', 'tool_call_id']).doNothing()
        : oc
            .columns(['session_id', 'tool_call_id'])
            .doUpdateSet((eb) => ({ executions: eb('tool_calls.executions', '+', 1) })),
    )
    .returning('executions')
    .executeTakeFirst();
  if (!written) throw new CallBegunElsewhereError(call.id);
}

async function loadToolCall(
  ctx: Pick<ToolContext, 'db' | 'sessionId'>,
  attempt: number,
  turn: number,
  toolCallId: string,
): Promise<ToolUseBlock> {
  const message = await findMessage(ctx.db, ctx.sessionId, assistantMessageKey(attempt, turn));
  const block = message?.content.find((b): b is ToolUseBlock => b.type === 'tool_use' && b.id === toolCallId);
  if (!block) throw new Error(`tool call ${toolCallId} not found in turn ${turn} of session ${ctx.sessionId}`);
  return block;
}

/**
 * The ledger's `started` row of a call that runs as it is, with nothing to decide first (a known tool,
 * valid arguments, no governance, not a fork's, not run by the workflow), as a statement for the
 * fused step to run with the reply that holds the call: `insert … select … where exists (select 1
 * from reply)`, so it is written only when that statement stored the reply. One commit fewer per
 * step. Undefined for any other call (see `startsWithReply`), which goes through `executeToolCall`.
 */
export function startedWithReply(
  call: ToolUseBlock | undefined,
  tools: ReadonlyMap<string, ToolSpec>,
  ctx: Pick<ToolContext, 'sessionId' | 'taskId' | 'agentId' | 'fork'>,
  secrets?: readonly string[],
): RawBuilder<unknown> | undefined {
  const spec = call && tools.get(call.name);
  if (!call || !spec || !startsWithReply(call, spec, ctx)) return undefined;
  return sql`insert into tool_calls (session_id, tool_call_id, task_id, agent_id, tool, args, status, side_effecting, is_error, executions)
    select ${ctx.sessionId}::text, ${call.id}::text, ${ctx.taskId ?? null}::text, ${ctx.agentId}::text, ${call.name}::text,
      ${safeArgumentsJson(spec.schema.parse(call.input), secrets)}::jsonb, 'started', ${spec.sideEffecting}::boolean, false, 1
    where exists (select 1 from reply)
    on conflict (session_id, tool_call_id) do nothing
    returning 1`;
}

/**
 * The call needs no decision before it runs (a known tool, valid arguments, no governance, not in the
 * workflow, not a fork's), and a `started` row written before its work can begin loses nothing: the
 * step still reads the database before the tool runs, and a retry after that read failed finds the
 * row. So the tool is one a retry runs again anyway (not side-effecting), or one whose `interrupted`
 * hook tells whether its effect landed (a write), which a retry runs again when it did not.
 */
function startsWithReply(call: ToolUseBlock, spec: ToolSpec | undefined, ctx: Pick<ToolContext, 'fork'>): boolean {
  if (!spec || spec.govern || spec.runsInWorkflow || ctx.fork || validate(call, spec)) return false;
  if (spec.sideEffecting && (!spec.interrupted || marksItsOwnStart(spec))) return false;
  return spec.schema.safeParse(call.input).success;
}

function validate(call: ToolUseBlock, spec: ToolSpec | undefined): string | undefined {
  if (!spec) return `Unknown tool "${call.name}". Use only the tools you were given.`;
  if (call.inputParseError)
    return `The arguments for ${call.name} were not valid JSON (${call.inputParseError}). Send a JSON object matching the tool's schema.`;
  return undefined;
}

/** Records a call's outcome without running the tool (refused, invalid, or decided by a human). */
async function recordWithoutRunning(
  ctx: Omit<ToolContext, 'toolCallId' | 'approvalComment' | 'approved'>,
  call: ToolUseBlock,
  rawText: string,
  isError = true,
): Promise<ExecuteToolResult> {
  const { text, redactions } = safeToolText(rawText);
  await ctx.db
    .insertInto('tool_calls')
    .values({
      session_id: ctx.sessionId,
      tool_call_id: call.id,
      task_id: ctx.taskId ?? null,
      agent_id: ctx.agentId,
      tool: call.name,
      args: safeArgumentsJson(call.input),
      status: isError ? 'failed' : 'completed',
      side_effecting: false,
      result: text,
      is_error: isError,
      executions: 0,
      redactions,
      completed_at: new Date(),
    })
    // A row left started (a run cut off before its effect landed, now refused) is closed with the outcome.
    .onConflict((oc) =>
      oc
        .columns(['session_id', 'tool_call_id'])
        .doUpdateSet({
          status: isError ? 'failed' : 'completed',
          result: text,
          is_error: isError,
          completed_at: new Date(),
          redactions,
        })
        .where('tool_calls.status', '=', 'started'),
    )
    .execute();
  await appendResult(ctx, call.id, text, isError);
  return done(call.name, text, isError);
}

function done(
  tool: string,
  content: string,
  isError: boolean,
  extra: { replayed?: boolean; interrupted?: boolean; submission?: string; redactions?: number } = {},
): ExecuteToolResult {
  return { kind: 'done', tool, isError, preview: content.slice(0, RESULT_PREVIEW_FOR_WORKFLOW_CHARS), ...extra };
}
