import type { Client } from '@temporalio/client';
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import type { DeliverInput } from '../../workflows/agent-contract';
import { mentionTokens } from '../../workflows/rules/group';
import { findAgentInOrg } from '../store/tenancy';
import { agentWorkRefusal } from '../store/work-policy';
import { deliverToAgent } from './deliver-to-agent';
import { mentionText } from '../../prompts/conversation';

/** Agents one comment can mention: a comment addressing more is a broadcast, which belongs in a group. */
export const COMMENT_MAX_MENTIONS = 5;
/**
 * Deliveries agents' comments may make on one task per hour (comment items to the assignee and mention
 * items together). Each one is answered in the thread, and while answering an agent may comment and
 * mention again: two agents that keep addressing each other would otherwise talk for ever. Humans'
 * comments are not counted.
 */
export const AGENT_COMMENT_DELIVERIES_PER_TASK_HOUR = 8;
const AGENT_COMMENT_BUDGET_WINDOW_MS = 60 * 60_000;

/** What is left of the agents' comment budget on a task (see `AGENT_COMMENT_DELIVERIES_PER_TASK_HOUR`). */
export async function agentCommentRoom(db: Kysely<Database>, taskId: string): Promise<number> {
  const used = await db
    .selectFrom('mailbox_items')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('kind', 'in', ['comment', 'mention'])
    .where('task_id', '=', taskId)
    .where('from_type', '=', 'agent')
    .where('created_at', '>', new Date(Date.now() - AGENT_COMMENT_BUDGET_WINDOW_MS))
    .executeTakeFirstOrThrow();
  return Math.max(0, AGENT_COMMENT_DELIVERIES_PER_TASK_HOUR - Number(used.n));
}

/**
 * An agent's comment on another agent's task, as a human's: a `comment` item in the assignee's mailbox,
 * which forwards it to the task's running round and answers it in the thread. Idempotent by
 * `commentId`. Returns the item id, or undefined when the budget is used up (nothing delivered).
 */
export async function deliverAgentComment(
  db: Kysely<Database>,
  client: Client,
  taskQueue: string,
  input: { taskId: string; assignee: string; fromAgentId: string; text: string; commentId: string },
): Promise<string | undefined> {
  if ((await agentCommentRoom(db, input.taskId)) === 0) return undefined;
  const result = await deliverToAgent(
    client,
    taskQueue,
    input.assignee,
    { kind: 'comment', from: { type: 'agent', id: input.fromAgentId }, taskId: input.taskId, text: input.text },
    { updateId: input.commentId },
  );
  return result.itemId;
}

/**
 * Seed task-comment notification rules: every `@agent` in a comment gets a `mention` item (high
 * priority, answered in the task's thread), once per comment (set dedup), skipping the author and the
 * agents that already get the comment itself (`skip`: the task's assignee). Unknown names, agents of
 * another organisation than the task's, and agents whose `acceptsWorkFrom` does not take the author's
 * messages are ignored (an `@` in prose is not an error). At most `COMMENT_MAX_MENTIONS`, and an agent's comment only within
 * `AGENT_COMMENT_DELIVERIES_PER_TASK_HOUR`. Idempotent by `commentItemId`.
 */
export async function deliverCommentMentions(
  db: Kysely<Database>,
  client: Client,
  taskQueue: string,
  input: { taskId: string; text: string; from: DeliverInput['from']; commentItemId: string; skip: string[] },
): Promise<string[]> {
  const skip = new Set([...input.skip, ...(input.from.type === 'agent' ? [input.from.id] : [])]);
  const room =
    input.from.type === 'agent'
      ? Math.min(COMMENT_MAX_MENTIONS, await agentCommentRoom(db, input.taskId))
      : COMMENT_MAX_MENTIONS;
  // Only agents of the task's organisation: another organisation's is as unknown as a name in prose.
  const task = await db.selectFrom('tasks').select('org').where('id', '=', input.taskId).executeTakeFirst();
  if (!task) return [];
  const author = input.from.type === 'agent' ? await findAgentInOrg(db, input.from.id, task.org) : undefined;
  if (input.from.type === 'agent' && !author) return [];
  const mentioned: string[] = [];
  for (const id of mentionTokens(input.text)) {
    if (mentioned.length >= room) break;
    if (skip.has(id) || mentioned.includes(id)) continue;
    const agent = await findAgentInOrg(db, id, task.org);
    // An agent that does not take this agent's messages is not addressed by its mention either.
    if (!agent || (author && agentWorkRefusal(agent, author))) continue;
    mentioned.push(id);
  }
  const from = `${input.from.type}:${input.from.id}`;
  await Promise.all(
    mentioned.map((agentId) =>
      deliverToAgent(
        client,
        taskQueue,
        agentId,
        {
          kind: 'mention',
          from: input.from,
          channel: `task:${input.taskId}`,
          taskId: input.taskId,
          replyTo: input.commentItemId,
          text: mentionText(input.taskId, from, input.text),
        },
        { updateId: `mention-${input.commentItemId}-${agentId}` },
      ),
    ),
  );
  return mentioned;
}
