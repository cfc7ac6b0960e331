import type { ToolUseBlock } from '../llm/types';
import { safeToolText } from '../security/tool-text';
import { interruptedToolCallText, notLandedToolCallText, notRunToolCallText } from '../../prompts/task';
import { appendResult, finish, storeOutcome } from './ledger-writes';
import { localCallKey, localCalls } from './effect-starts';
import type { ToolContext, ToolSpec } from './types';

/**
 * What the model is told of a side-effecting call the worker stopped in: the tool's own verdict when
 * it can tell (its effect landed, with the finished run's result, or nothing changed), else that the
 * outcome is unknown. Its leftovers are cleaned up either way.
 */
export async function settleInterrupted(
  call: ToolUseBlock,
  spec: ToolSpec | undefined,
  ctx: Omit<ToolContext, 'toolCallId' | 'approvalComment' | 'approved'>,
): Promise<{ text: string; isError: boolean; landed?: boolean }> {
  const cutOff = spec?.schema.safeParse(call.input);
  const verdict =
    spec?.interrupted && cutOff?.success
      ? await spec.interrupted(cutOff.data, { ...ctx, toolCallId: call.id })
      : undefined;
  if (!verdict) return { text: interruptedToolCallText(call.name), isError: true };
  if (verdict.landed) return { text: safeToolText(verdict.content).text, isError: false, landed: true };
  return { text: notLandedToolCallText(call.name), isError: true, landed: false };
}

/**
 * Before a new attempt of a round talks to the model again, every call of the session's last
 * assistant turn that has no result is settled from the ledger, so the model knows which effects
 * happened instead of guessing: a call the ledger finished gets its stored result, one that was
 * running when the worker died is reported as interrupted (and its leftovers cleaned up), and one
 * with no ledger row never started, so it is reported as not run. A call this process ran, or knows
 * it never began, while the database was away gets what really happened. Returns how many were settled.
 */
export async function settleUnansweredCalls(
  messages: readonly { role: string; content: readonly { type: string }[] }[],
  tools: ReadonlyMap<string, ToolSpec>,
  ctx: Omit<ToolContext, 'toolCallId' | 'approvalComment' | 'approved'>,
): Promise<number> {
  const lastAssistant = messages.findLastIndex((m) => m.role === 'assistant');
  if (lastAssistant < 0) return 0;
  const answered = new Set(
    messages
      .slice(lastAssistant + 1)
      .flatMap((m) => m.content)
      .filter((b): b is { type: 'tool_result'; toolUseId: string } => b.type === 'tool_result')
      .map((b) => b.toolUseId),
  );
  const unanswered = (messages[lastAssistant]!.content as readonly ToolUseBlock[]).filter(
    (b) => b.type === 'tool_use' && !answered.has(b.id),
  );
  for (const call of unanswered) {
    const ledger = await ctx.db
      .selectFrom('tool_calls')
      .select(['status', 'result', 'is_error'])
      .where('session_id', '=', ctx.sessionId)
      .where('tool_call_id', '=', call.id)
      .executeTakeFirst();
    const local =
      ledger?.status === 'started'
        ? await localCalls.settled(localCallKey(ctx.sessionId, call.id), ctx.signal)
        : undefined;
    if (!ledger) {
      await appendResult(ctx, call.id, notRunToolCallText(call.name), true);
    } else if (local?.state === 'ran') {
      // This process ran it; only storing its result failed (a database outage).
      await storeOutcome(ctx, call.id, local.outcome);
    } else if (local?.state === 'not-begun') {
      await finish(ctx, call.id, notRunToolCallText(call.name), true);
      localCalls.forget(localCallKey(ctx.sessionId, call.id));
    } else if (ledger.status === 'started') {
      const { text, isError } = await settleInterrupted(call, tools.get(call.name), ctx);
      await finish(ctx, call.id, text, isError);
    } else {
      await appendResult(ctx, call.id, ledger.result ?? '', ledger.is_error);
    }
  }
  return unanswered.length;
}
