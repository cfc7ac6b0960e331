import { Context } from '@temporalio/activity';
import { z } from 'zod';
import { defineTool } from '../tools/types';
import { sendAgentMessage } from './send';

/**
 * Send a message to another agent (asynchronous: no waiting for the answer). The recipient
 * triages it in its own mailbox and answers in its own run; its answer arrives in this agent's
 * mailbox as a reply on the same thread. Replying to an item (`reply_to`) continues its thread. Sent
 * from a task round, the message names the task, and the answer joins that round while it runs.
 */
export const agentSendMessage = defineTool({
  name: 'agent_send_message',
  description:
    'Send a short message to another agent (by agent id). Asynchronous: the answer arrives later as a new message. Use it to coordinate or ask; give substantial work to a task instead.',
  schema: z
    .object({
      to: z.string().min(1).max(100).describe('The recipient agent id'),
      text: z.string().min(1).max(8_000),
      reply_to: z
        .string()
        .min(1)
        .max(100)
        .optional()
        .describe('The message item id this answers, to continue its thread'),
    })
    .strict(),
  sideEffecting: true,
  summarize: (a) => `agent_send_message → ${a.to}: ${a.text.slice(0, 100)}`,
  run: async (args, ctx) => {
    const activity = Context.current();
    const answered = args.reply_to
      ? await ctx.db
          .selectFrom('mailbox_items')
          .select(['thread_id', 'from_id'])
          .where('id', '=', args.reply_to)
          .where('agent_id', '=', ctx.agentId)
          .executeTakeFirst()
      : undefined;
    if (args.reply_to && !answered)
      return { content: `No message ${args.reply_to} in your mailbox: check the id.`, isError: true };
    const outcome = await sendAgentMessage(ctx.db, activity.client, activity.info.taskQueue, {
      fromAgentId: ctx.agentId,
      fromOrg: ctx.org,
      to: args.to,
      text: args.text,
      ...(args.reply_to ? { replyTo: args.reply_to, thread: answered!.thread_id } : {}),
      ...(ctx.taskId ? { taskId: ctx.taskId } : {}),
      idempotencyKey: `tool-${ctx.toolCallId}`,
    });
    return outcome.sent
      ? {
          content: `Message delivered to ${args.to} (item ${outcome.itemId}). Their answer will arrive as a new message; do not wait for it.`,
        }
      : { content: `Message not sent: ${outcome.reason}.`, isError: true };
  },
});
