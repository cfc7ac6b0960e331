/**
 * Delivering to an agent's mailbox, and a person's comment on a task: one implementation behind
 * `AgentsClient.comment`, `ConversationClient.comment`, `POST /v1/tasks/:id/comments` and
 * `agents task comment`, so @mentions are routed the same way whichever door a comment came in by.
 */
import { WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import type { Kysely } from 'kysely';
import { deliverToAgent as sendDelivery } from '../activities/mailbox/deliver-to-agent';
import { deliverCommentMentions } from '../activities/mailbox/mentions';
import { findAgent } from '../activities/store/agents';
import { addTaskEvent, findTask } from '../activities/store/tasks';
import type { Database } from '../schema/database';
import type { DeliverInput, DeliverResult } from '../workflows/agent-contract';
import { deliveryProblem } from '../workflows/rules/mailbox';
import { DeliveryRejectedError, innermostMessage, innermostType, UnknownAgentError } from './errors';
import { FailureType } from '../workflows/failure-types';

/**
 * A delivery that reaches the agent while it continues as new is rejected unprocessed by the server;
 * it is sent again this many times in all (each continue-as-new is rare: once per 5,000 events).
 */
const DELIVER_UNPROCESSED_ATTEMPTS = 5;

/** What a delivery needs: the Temporal client, the database and the task queue agents run on. */
export interface MailboxAccess {
  temporal: Client;
  db: Kysely<Database>;
  taskQueue: string;
}

/**
 * Delivers an item to the agent's mailbox (update-with-start: an idle agent's workflow is started).
 * Resolves once the item is stored, with its id. Throws `UnknownAgentError` for an agent that does
 * not exist and `DeliveryRejectedError` for bad input; either way nothing was stored.
 */
export async function deliverToAgent(
  access: MailboxAccess,
  agentId: string,
  input: DeliverInput,
): Promise<DeliverResult> {
  const problem = deliveryProblem(input);
  if (problem) throw new DeliveryRejectedError(problem);
  if (!(await findAgent(access.db, agentId))) throw new UnknownAgentError(agentId);
  for (let attempt = 1; ; attempt++) {
    try {
      // A fresh start operation per attempt: an operation is used once.
      return await sendDelivery(access.temporal, access.taskQueue, agentId, input);
    } catch (error) {
      // The agent continued as new in the workflow task that received the update: nothing ran or was
      // stored, so sending it again (to the new run) is safe.
      if (
        error instanceof WorkflowUpdateFailedError &&
        innermostType(error) === FailureType.UnprocessedUpdate &&
        attempt < DELIVER_UNPROCESSED_ATTEMPTS
      )
        continue;
      if (error instanceof WorkflowUpdateFailedError) throw new DeliveryRejectedError(innermostMessage(error), error);
      throw error;
    }
  }
}

/** What a comment did: the assignee's `comment` item, and the other agents it @mentioned (each got a `mention` item). */
export interface CommentResult {
  itemId: string;
  mentioned: string[];
}

/**
 * A comment on a task: the task's agent gets a `comment` item (forwarded to its running round and
 * answered in the thread), and every other agent the text @mentions gets a `mention` item it answers
 * in the task's thread (@mentions always notify; the author and the assignee are skipped; once per
 * comment). The comment is on the task's timeline as `comment-added`. Throws `DeliveryRejectedError` for an unknown task or bad text: nothing was stored then.
 */
export async function commentOnTask(
  access: MailboxAccess,
  taskId: string,
  text: string,
  from: DeliverInput['from'],
): Promise<CommentResult> {
  const task = await findTask(access.db, taskId);
  if (!task)
    throw new DeliveryRejectedError(
      `unknown task ${JSON.stringify(taskId)}: the item names a task that does not exist`,
    );
  const { itemId } = await deliverToAgent(access, task.agent_id, { kind: 'comment', from, taskId, text });
  // On the task's timeline as an agent's comment is (task_comment): a person's name, `agent:<id>` for an agent.
  await addTaskEvent(
    access.db,
    taskId,
    'comment-added',
    { text, from: from.type === 'human' ? from.id : `${from.type}:${from.id}`, itemId },
    `comment:${itemId}`,
  );
  const mentioned = await deliverCommentMentions(access.db, access.temporal, access.taskQueue, {
    taskId,
    text,
    from,
    commentItemId: itemId,
    skip: [task.agent_id],
  });
  return { itemId, mentioned };
}
