import { WithStartWorkflowOperation, type Client } from '@temporalio/client';
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { agentWorkflowId, deliverUpdate, type DeliverInput } from '../../workflows/agent-contract';
import { mentionTokens } from '../../workflows/rules/group';
import { findAgent } from '../store/agents';

/** Agents one comment can mention: a comment addressing more is a broadcast, which belongs in a group. */
export const COMMENT_MAX_MENTIONS = 5;

/**
 * Seed task-comment notification rules: every `@agent` in a comment gets a `mention` item (high
 * priority, answered in the task's thread), once per comment (set dedup), skipping the author and the
 * agents that already get the comment itself (`skip`: the task's assignee). Unknown names are ignored
 * (an `@` in prose is not an error). At most `COMMENT_MAX_MENTIONS`. Idempotent by `commentItemId`.
 */
export async function deliverCommentMentions(
  db: Kysely<Database>,
  client: Client,
  taskQueue: string,
  input: { taskId: string; text: string; from: DeliverInput['from']; commentItemId: string; skip: string[] },
): Promise<string[]> {
  const skip = new Set([...input.skip, ...(input.from.type === 'agent' ? [input.from.id] : [])]);
  const mentioned: string[] = [];
  for (const id of mentionTokens(input.text)) {
    if (mentioned.length >= COMMENT_MAX_MENTIONS) break;
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
