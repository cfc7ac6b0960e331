/**
 * What a step returns and reads besides its main work: the compact summary the workflow gets (previews
 * only), the summary of a reply stored by an earlier attempt, the sender as the prompt names it, and
 * the skills query of a conversation turn.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { ZERO_USAGE_TOTALS, type UsageTotals } from '../../workflows/contract';
import type { ChatMessage, ChatResult, ToolUseBlock } from '../llm/types';
import type { PromptInputs } from '../context';
import { findAgent } from '../store/agents';
import { assistantMessageKey } from '../tools/execute';
import { summarizeCall, type toolsForScenario } from '../tools/registry';
import { secretValues } from '../security/secrets';
import { stepUsage } from './spend';
import type { LlmStepInput, LlmStepResult } from './types';

/** Characters of the reply's text the workflow gets as its preview. */
const TEXT_PREVIEW_CHARS = 200;

/** A sender as the prompt names it: an agent by its name and description, anyone else by id. */
export async function senderIdentity(
  db: Kysely<Database>,
  from: { type: string; id: string },
): Promise<NonNullable<PromptInputs['sender']>> {
  const agent = from.type === 'agent' ? await findAgent(db, from.id) : undefined;
  if (agent)
    return { id: agent.id, name: agent.name, kind: 'agent', ...(agent.description ? { role: agent.description } : {}) };
  return { id: from.id, name: from.id, kind: from.type === 'agent' ? 'agent' : 'human' };
}

export async function replayRecorded(
  db: Kysely<Database>,
  input: LlmStepInput,
  content: unknown[],
  tools: ReturnType<typeof toolsForScenario>,
): Promise<LlmStepResult> {
  const call = await db
    .selectFrom('llm_calls')
    .selectAll()
    .where('session_id', '=', input.sessionId)
    .where('idem_key', '=', assistantMessageKey(input.attempt, input.turn))
    .executeTakeFirst();
  const usage: UsageTotals = call
    ? await stepUsage(db, input.sessionId, assistantMessageKey(input.attempt, input.turn))
    : ZERO_USAGE_TOTALS;
  const blocks = content as ChatResult['content'];
  const stopReason =
    (call?.stop_reason as ChatResult['stopReason'] | null) ??
    (blocks.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn');
  return summarize(blocks, stopReason, usage, call?.model ?? 'unknown', call?.provider ?? 'unknown', tools, true);
}

export function summarize(
  content: ChatResult['content'],
  stopReason: ChatResult['stopReason'],
  usage: UsageTotals,
  model: string,
  provider: string,
  tools: ReturnType<typeof toolsForScenario>,
  replayed: boolean,
  secrets?: readonly string[],
): LlmStepResult {
  const uses = content.filter((b): b is ToolUseBlock => b.type === 'tool_use');
  const values = uses.length > 0 ? (secrets ?? secretValues()) : undefined;
  const toolCalls = uses.map((b) => ({
    id: b.id,
    name: b.name,
    summary: summarizeCall(tools, b.name, b.input, values),
  }));
  const text = content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('\n');
  return { stopReason, toolCalls, textPreview: text.slice(0, TEXT_PREVIEW_CHARS), usage, model, provider, replayed };
}

/** Characters of the latest user message used as the skills query: its opening says what is asked. */
const SKILL_QUERY_CHARS = 500;

/** The latest user message's text (harness injections included), for the skills relevance filter. */
export function lastUserText(messages: readonly ChatMessage[]): string | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== 'user') continue;
    const text = (
      typeof m.content === 'string'
        ? m.content
        : m.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('\n')
    ).trim();
    if (text) return text.slice(0, SKILL_QUERY_CHARS);
  }
  return undefined;
}
