import { z } from 'zod';
import { notificationId, storeNotification } from '../store/notifications';
import { addTaskEvent } from '../store/tasks';
import { findTaskInOrg } from '../store/tenancy';
import { defineTool } from './types';
import { NOTIFICATION_PRIORITIES } from '../../workflows/rules/priority';

const PRIORITY = z.enum(NOTIFICATION_PRIORITIES);

/**
 * Ask a human a question. In a task, governance asks for approval, so the call goes through the task
 * workflow's approval wait (signal `approvalDecision` / update `decideApproval`, recorded in
 * `approvals`): approved or rejected is the yes/no, the decision's comment is the chosen option or the
 * free-form answer. Both reach the model as a normal result; a timeout is an error. Outside a task
 * (a heartbeat) nobody can wait for the answer: the question is stored in the notification inbox as an
 * `approval_request` and the model is told so.
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
      priority: PRIORITY.optional(),
    })
    .strict(),
  // Outside a task it writes a notification keyed by the call: safe to run again.
  sideEffecting: false,
  summarize: (a) =>
    `request_user_approval: ${a.question.slice(0, 120)}${a.options?.length ? ` [${a.options.join(' / ')}]` : ''}${a.allow_freeform ? ' (free-form answer welcome)' : ''}`,
  govern: (a, ctx) =>
    ctx.taskId ? { tier: 'approval', reason: `the agent asks: ${a.question.slice(0, 200)}` } : { tier: 'allow' },
  run: async (args, ctx) => {
    if (!ctx.taskId) {
      const stored = await storeNotification(ctx.db, notificationId(ctx.sessionId, ctx.toolCallId), {
        agentId: ctx.agentId,
        kind: 'approval_request',
        body: args.question,
        priority: args.priority ?? 'high',
        ...(args.options ? { options: args.options } : {}),
      });
      return {
        content:
          `Your question was delivered to the humans' inbox as ${stored.id}. Nobody can answer within this run: ` +
          'do not wait for it and do not act as if it were approved. If the work depends on the answer, create a task for it; a task can wait for a decision.',
      };
    }
    return {
      content: `The human approved.${ctx.approvalComment ? ` Their answer: ${ctx.approvalComment}` : ' They added no comment.'}`,
    };
  },
});

/**
 * Tell humans something without waiting: stored in the notification inbox (read state, listed by the
 * client and the CLI) and, for a task, in its timeline. Keyed by the tool call, so a retry stores nothing twice.
 */
export const notifyUser = defineTool({
  name: 'notify_user',
  description:
    "Send a short notification to the humans' inbox (status, findings, alerts). Does not wait for an answer. Set related_task_id when it concerns a task.",
  schema: z
    .object({
      message: z.string().min(1).max(4_000),
      title: z.string().min(1).max(200).optional(),
      priority: PRIORITY.optional(),
      level: z.enum(['info', 'warning', 'success']).optional(),
      related_task_id: z
        .string()
        .min(1)
        .max(100)
        .optional()
        .describe('The task this is about (default: the task you are working on)'),
    })
    .strict(),
  sideEffecting: false,
  summarize: (a) => `notify_user: ${(a.title ?? a.message).slice(0, 120)}`,
  run: async (args, ctx) => {
    const taskId = args.related_task_id ?? ctx.taskId;
    // Another organisation's task reads as one that never existed.
    if (args.related_task_id && !(await findTaskInOrg(ctx.db, args.related_task_id, ctx.org))) {
      return {
        content: `Not sent: there is no task ${JSON.stringify(args.related_task_id)}. Check the id with task_list or leave related_task_id out.`,
        isError: true,
      };
    }
    const stored = await storeNotification(ctx.db, notificationId(ctx.sessionId, ctx.toolCallId), {
      agentId: ctx.agentId,
      kind: 'notification',
      body: args.message,
      ...(args.title ? { title: args.title } : {}),
      priority: args.priority ?? (args.level === 'warning' ? 'high' : 'normal'),
      ...(taskId ? { taskId } : {}),
    });
    if (taskId) {
      await addTaskEvent(
        ctx.db,
        taskId,
        'user-notified',
        { message: args.message, level: args.level ?? 'info', notificationId: stored.id },
        `notify:${ctx.sessionId}:${ctx.toolCallId}`,
      );
    }
    return { content: `Notification ${stored.id} delivered to the humans' inbox.` };
  },
});
