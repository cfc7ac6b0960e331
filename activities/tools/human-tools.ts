import { z } from 'zod';
import { addTaskEvent } from '../store/tasks';
import { defineTool } from './types';

/**
 * Ask a human a question and wait for the answer. Governance always asks for approval, so the call
 * goes through the workflow's approval wait (signal `approvalDecision` / update `decideApproval`,
 * recorded in `approvals`): approved or rejected is the yes/no, the decision's comment is the chosen
 * option or the free-form answer. Both reach the model as a normal result; a timeout is an error.
 */
export const requestUserApproval = defineTool({
  name: 'request_user_approval',
  description:
    'Ask a human to approve something, to choose between options, or for a free-form answer, and wait for it. Use it before anything irreversible or when the task is ambiguous.',
  schema: z
    .object({
      question: z.string().min(1).max(4_000),
      options: z.array(z.string().min(1).max(200)).max(10).optional().describe('Choices to offer'),
      allow_freeform: z.boolean().optional().describe('Invite a free-text answer (with or without options)'),
    })
    .strict(),
  sideEffecting: false,
  summarize: (a) =>
    `request_user_approval: ${a.question.slice(0, 120)}${a.options?.length ? ` [${a.options.join(' / ')}]` : ''}${a.allow_freeform ? ' (free-form answer welcome)' : ''}`,
  govern: (a) => ({ tier: 'approval', reason: `the agent asks: ${a.question.slice(0, 200)}` }),
  run: async (args, ctx) => ({
    content: `The human approved.${ctx.approvalComment ? ` Their answer: ${ctx.approvalComment}` : ' They added no comment.'}`,
  }),
});

/** Tell the humans following the task something, without waiting. Recorded in the task timeline. */
export const notifyUser = defineTool({
  name: 'notify_user',
  description: 'Send a short notification to the humans following this task. Does not wait for an answer.',
  schema: z
    .object({
      message: z.string().min(1).max(4_000),
      level: z.enum(['info', 'warning', 'success']).optional(),
    })
    .strict(),
  sideEffecting: true,
  summarize: (a) => `notify_user: ${a.message.slice(0, 120)}`,
  run: async (args, ctx) => {
    if (ctx.taskId) {
      await addTaskEvent(ctx.db, ctx.taskId, 'user-notified', { message: args.message, level: args.level ?? 'info' }, `notify:${ctx.toolCallId}`);
    }
    return { content: 'Notification delivered.' };
  },
});
