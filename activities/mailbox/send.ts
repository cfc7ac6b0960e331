import type { Client } from '@temporalio/client';
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { agentDmChannel, type DeliverResult } from '../../workflows/agent-contract';
import { findAgentInOrg } from '../store/tenancy';
import { agentWorkRefusal } from '../store/work-policy';
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
 * id), so a retried activity never delivers twice. Refuses a message to itself, to an unknown agent or
 * one of another organisation (the same words), to an agent whose `acceptsWorkFrom` does not take the
 * sender's messages (unless it answers that agent), and one that would exceed the thread's budget.
 */
export async function sendAgentMessage(
  db: Kysely<Database>,
  client: Client,
  taskQueue: string,
  message: {
    fromAgentId: string;
    /** The sender's organisation: the recipient must be in it. */
    fromOrg: string;
    to: string;
    text: string;
    replyTo?: string;
    thread?: string;
    taskId?: string;
    idempotencyKey: string;
  },
): Promise<SendOutcome> {
  if (message.to === message.fromAgentId) return { sent: false, reason: 'an agent cannot message itself' };
  // Both ends inside the sender's organisation: another organisation's agent is an unknown one.
  const [sender, recipient] = await Promise.all([
    findAgentInOrg(db, message.fromAgentId, message.fromOrg),
    findAgentInOrg(db, message.to, message.fromOrg),
  ]);
  if (!sender || !recipient) return { sent: false, reason: `unknown agent ${JSON.stringify(message.to)}` };
  // The recipient's policy; an answer to a message the recipient sent is always allowed (it asked).
  const refusal = agentWorkRefusal(recipient, sender);
  if (refusal && !(message.replyTo && (await answersRecipient(db, message)))) return { sent: false, reason: refusal };
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

/** Whether the message answers an item the recipient sent to the sender (a reply to its own question). */
async function answersRecipient(
  db: Kysely<Database>,
  message: { fromAgentId: string; to: string; replyTo?: string },
): Promise<boolean> {
  const item = await db
    .selectFrom('mailbox_items')
    .select('id')
    .where('id', '=', message.replyTo!)
    .where('agent_id', '=', message.fromAgentId)
    .where('from_type', '=', 'agent')
    .where('from_id', '=', message.to)
    .executeTakeFirst();
  return item !== undefined;
}
