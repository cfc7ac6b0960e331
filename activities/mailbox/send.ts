import type { Client } from '@temporalio/client';
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { agentDmChannel, type DeliverResult } from '../../workflows/agent-contract';
import { findAgent } from '../store/agents';
import { deliverToAgent } from './deliver-to-agent';

/**
 * Agent messages allowed in one thread (both directions, the first included). Two agents that always
 * answer each other would talk for ever; the budget ends such a conversation after a few exchanges,
 * enough for a question, an answer and a clarification or two. A human can always start a new thread.
 */
export const A2A_THREAD_MESSAGE_BUDGET = 8;
/** A reply with this text (or empty) is not sent: the agent chose not to answer (the group-chat convention, so silence is a choice). */
export const NO_RESPONSE_MARKER = '[NO_RESPONSE]';

export type SendOutcome = { sent: true; itemId: string; thread: string } | { sent: false; reason: string };

/**
 * Delivers an agent's message into another agent's mailbox (update-with-start: an idle recipient is
 * started) on their DM channel. A message sent from a task carries its id, and so does the answer: it
 * reaches the sender's running round rather than a separate conversation. Idempotent by `idempotencyKey` (Temporal deduplicates the update by
 * id), so a retried activity never delivers twice. Refuses a message to itself or to an unknown
 * agent, and one that would exceed the thread's budget.
 */
export async function sendAgentMessage(
  db: Kysely<Database>,
  client: Client,
  taskQueue: string,
  message: {
    fromAgentId: string;
    to: string;
    text: string;
    replyTo?: string;
    thread?: string;
    taskId?: string;
    idempotencyKey: string;
  },
): Promise<SendOutcome> {
  if (message.to === message.fromAgentId) return { sent: false, reason: 'an agent cannot message itself' };
  if (!(await findAgent(db, message.to))) return { sent: false, reason: `unknown agent ${JSON.stringify(message.to)}` };
  if (message.thread) {
    const used = await db
      .selectFrom('mailbox_items')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('thread_id', '=', message.thread)
      .where('kind', '=', 'message')
      .executeTakeFirstOrThrow();
    if (Number(used.n) >= A2A_THREAD_MESSAGE_BUDGET) {
      return {
        sent: false,
        reason: `the thread's reply budget (${A2A_THREAD_MESSAGE_BUDGET} agent messages) is used up`,
      };
    }
  }
  const result: DeliverResult = await deliverToAgent(
    client,
    taskQueue,
    message.to,
    {
      kind: 'message',
      from: { type: 'agent', id: message.fromAgentId },
      channel: agentDmChannel(message.fromAgentId, message.to),
      text: message.text,
      ...(message.replyTo ? { replyTo: message.replyTo } : {}),
      ...(message.thread ? { thread: message.thread } : {}),
      ...(message.taskId ? { taskId: message.taskId } : {}),
    },
    { updateId: message.idempotencyKey },
  );
  return { sent: true, itemId: result.itemId, thread: message.thread ?? result.itemId };
}
