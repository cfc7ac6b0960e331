import { WithStartWorkflowOperation, type Client } from '@temporalio/client';
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { agentWorkflowId, deliverUpdate, type DeliverInput } from '../../workflows/agent-contract';
import { mentionTokens } from '../../workflows/rules/group';
import { findAgent } from '../store/agents';

/** Agents one comment can mention: a comment addressing more is a broadcast, which belongs in a group. */
export const COMMENT_MAX_MENTIONS = 5;
/**
 * Mentions agents' comments may deliver on one task per hour. A mentioned agent answers in the thread,
 * and while answering it may comment and mention again: two agents that keep mentioning each other
 * would otherwise talk for ever. Humans' comments are not counted.
 */
export const COMMENT_AGENT_MENTIONS_PER_TASK_HOUR = 8;
const MENTION_BUDGET_WINDOW_MS = 60 * 60_000;

/**
 * Seed task-comment notification rules: every `@agent` in a comment gets a `mention` item (high
 * priority, answered in the task's thread), once per comment (set dedup), skipping the author and the
 * agents that already get the comment itself (`skip`: the task's assignee). Unknown names are ignored
 * (an `@` in prose is not an error). At most `COMMENT_MAX_MENTIONS`, and an agent's comment only within
 * `COMMENT_AGENT_MENTIONS_PER_TASK_HOUR`. Idempotent by `commentItemId`.
 */
export async function deliverCommentMentions(
  db: Kysely<Database>,
  client: Client,
  taskQueue: string,
  input: { taskId: string; text: string; from: DeliverInput['from']; commentItemId: string; skip: string[] },
): Promise<string[]> {
  const skip = new Set([...input.skip, ...(input.from.type === 'agent' ? [input.from.id] : [])]);
  let room = COMMENT_MAX_MENTIONS;
  if (input.from.type === 'agent') {
    const used = await db
      .selectFrom('mailbox_items')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('kind', '=', 'mention')
      .where('task_id', '=', input.taskId)
      .where('from_type', '=', 'agent')
      .where('created_at', '>', new Date(Date.now() - MENTION_BUDGET_WINDOW_MS))
      .executeTakeFirstOrThrow();
    room = Math.min(room, Math.max(0, COMMENT_AGENT_MENTIONS_PER_TASK_HOUR - Number(used.n)));
  }
  const mentioned: string[] = [];
  for (const id of mentionTokens(input.text)) {
    if (mentioned.length >= room) break;
    if (skip.has(id) || mentioned.includes(id) || !(await findAgent(db, id))) continue;
    mentioned.push(id);
  }
  const from = `${input.from.type}:${input.from.id}`;
  await Promise.all(
    mentioned.map((agentId) =>
      client.workflow.executeUpdateWithStart(deliverUpdate, {
        updateId: `mention-${input.commentItemId}-${agentId}`,
        args: [
          {
            kind: 'mention',
            from: input.from,
            channel: `task:${input.taskId}`,
            taskId: input.taskId,
            replyTo: input.commentItemId,
            text: `[MENTION in a comment on task ${input.taskId} from ${from}: answer in the task's thread]\n${input.text}`,
          },
        ],
        startWorkflowOperation: new WithStartWorkflowOperation('agentWorkflow', {
          workflowId: agentWorkflowId(agentId),
          taskQueue,
          args: [{ agentId }],
          workflowIdConflictPolicy: 'USE_EXISTING',
        }),
      }),
    ),
  );
  return mentioned;
}
