/**
 * Task tools for agents: create (assignee, priority, parent task, dependencies), list, get, update and
 * comment. A created task is recorded with its place in the graph and its workflow `task-{id}` is
 * started through the worker's Temporal client; the workflow itself waits for a human's approval (when
 * the creator's config asks for it) and for its dependencies (blocked, woken when they finish).
 *
 * The task id is derived from the tool call, so a retried task_create finds the task it created and
 * the already-started workflow instead of making a second one: it is safe to run again, which is why
 * it is not marked side-effecting (the ledger would report an interrupted call instead of finishing it).
 */
import { createHash } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Kysely } from 'kysely';
import { z } from 'zod';
import type { Database, TaskRow } from '../../schema/database';
import { commentSignal, dependenciesChangedSignal, taskWorkflowId } from '../../workflows/contract';
import { budgetQuery } from '../../workflows/subagent-contract';
import {
  SUBTASK_SOFT_CAP,
  TASK_LIST_PAGE_MAX,
  TASK_LIST_PAGE_SIZE,
  TASK_MAX_DEPENDENCIES,
} from '../../workflows/rules/task-graph';
import { TASK_PRIORITIES } from '../../workflows/rules/priority';
import { TERMINAL_STATES } from '../../workflows/rules/task-state';
import { agentConfig } from '../store/agents';
import { addDependencies, checkNewTaskPlace, PRIORITY_RANK, recordNewTask, TaskGraphError } from '../store/task-graph';
import { addTaskEvent } from '../store/tasks';
import { findAgentInOrg, findTaskInOrg } from '../store/tenancy';
import { agentWorkRefusal } from '../store/work-policy';
import { grantableBudgetUsd } from '../store/task-budget';
import { ignoreGone, startTaskWorkflow } from '../task-propagation';
import { deliverAgentComment, deliverCommentMentions } from '../mailbox/mentions';
import { defineTool, type ToolOutput } from './types';

/** Descriptions in task lists are cut to 150 characters. */
export const TASK_LIST_DESC_CHARS = 150;
/** `task_get` shows the newest notes and comments, this many each. */
export const TASK_GET_NOTES_MAX = 10;
/** task_get shows the description up to this; the rest is rarely needed to coordinate. */
export const TASK_GET_DESC_CHARS = 4_000;
/** A task description an agent writes: a brief, not a document (documents go in files). */
export const TASK_DESC_MAX_CHARS = 20_000;
export const TASK_COMMENT_MAX_CHARS = 4_000;

/** `created_by` of a task an agent created. */
export const agentCreator = (agentId: string): string => `agent:${agentId}`;

/**
 * The answer to a task id the caller cannot see: one that never existed and another organisation's
 * read the same, so an agent cannot even learn that a task exists outside its organisation.
 */
export function noSuchTask(taskId: string): ToolOutput {
  return { content: `There is no task ${JSON.stringify(taskId)}. Find ids with task_list.`, isError: true };
}

/** The task id task_create gives the task it creates: the same for a retried call. */
export function createdTaskId(sessionId: string, toolCallId: string): string {
  const h = createHash('sha256').update(`task_create\0${sessionId}\0${toolCallId}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

const priority = z.enum(TASK_PRIORITIES);
const taskId = z.string().min(1).max(100);

export const taskCreate = defineTool({
  name: 'task_create',
  description:
    'Create a task for yourself or another agent. Use parent_task_id to make it a subtask (cancelling the parent cancels it) and depends_on for tasks that must complete first: it stays blocked until they do, then starts by itself.',
  schema: z
    .object({
      title: z.string().min(1).max(200),
      description: z.string().max(TASK_DESC_MAX_CHARS).optional().describe('What to do and how to know it is done'),
      assignee: z.string().min(1).max(100).optional().describe('Agent id of the assignee (default: yourself)'),
      priority: priority.optional().describe('Default: medium'),
      parent_task_id: taskId.optional().describe('Make this a subtask of that task'),
      depends_on: z
        .array(taskId)
        .max(TASK_MAX_DEPENDENCIES)
        .optional()
        .describe('Task ids that must be completed before this one starts'),
    })
    .strict(),
  sideEffecting: false,
  summarize: (a) => `task_create: ${a.title}${a.assignee ? ` → ${a.assignee}` : ''}`,
  run: async (args, ctx) =>
    asToolError(async () => {
      const creator = await findAgentInOrg(ctx.db, ctx.agentId, ctx.org);
      const assigneeId = args.assignee ?? ctx.agentId;
      // Another organisation's agent is an unknown one (recordNewTask says so, naming this organisation's agents).
      const assignee = assigneeId === ctx.agentId ? creator : await findAgentInOrg(ctx.db, assigneeId, ctx.org);
      // The assignee's policy, not only the creator's: work it does not take from this agent waits for a human.
      const refusal = creator && assignee ? agentWorkRefusal(assignee, creator) : undefined;
      const needsApproval =
        (creator ? agentConfig(creator).tasksNeedApproval === true : false) || refusal !== undefined;
      // Assignee, parent and dependencies inside this organisation, before anything else happens.
      await checkNewTaskPlace(ctx.db, {
        agentId: assigneeId,
        ...(args.parent_task_id ? { parentTaskId: args.parent_task_id } : {}),
        ...(args.depends_on ? { dependsOn: args.depends_on } : {}),
        org: ctx.org,
      });
      // The task this one draws its budget from: the task the agent works on, else the parent it names.
      const budgetParent = ctx.taskId ?? args.parent_task_id;
      const taskId = createdTaskId(ctx.sessionId, ctx.toolCallId);
      const grant = budgetParent
        ? await grantableBudgetUsd(ctx.db, budgetParent, (id) => liveBudgetLimitUsd(Context.current().client, id))
        : null;
      if (grant !== null && grant <= 0 && !(await findTaskInOrg(ctx.db, taskId, ctx.org)))
        return {
          content: `Not created: task ${budgetParent} has no cost budget left (its budget, or an ancestor's, is spent or promised to its other subtasks), and a task you create spends from it. Ask a human to raise the budget, or finish with what you have.`,
          isError: true,
        };
      const { created, row } = await recordNewTask(ctx.db, {
        id: taskId,
        agentId: assigneeId,
        title: args.title,
        description: args.description ?? args.title,
        priority: args.priority ?? 'medium',
        createdBy: agentCreator(ctx.agentId),
        ...(args.parent_task_id ? { parentTaskId: args.parent_task_id } : {}),
        ...(args.depends_on?.length ? { dependsOn: args.depends_on } : {}),
        needsApproval,
        org: ctx.org,
        ...(budgetParent ? { budgetParentId: budgetParent } : {}),
        ...(grant !== null ? { costBudgetUsd: grant } : {}),
      });
      const activity = Context.current();
      await startTaskWorkflow(activity.client, activity.info.taskQueue, {
        id: row.id,
        agentId: row.agent_id,
        title: row.title,
        // The grant as recorded (a retried call starts the task with the budget it was first given).
        ...(row.cost_budget_usd !== null ? { costBudgetUsd: row.cost_budget_usd } : {}),
      });
      const waiting = args.depends_on?.length
        ? ` It stays blocked until ${args.depends_on.join(', ')} complete${args.depends_on.length === 1 ? 's' : ''}, then starts by itself.`
        : '';
      const gate = row.needs_approval
        ? ` It waits for a human to approve it before it starts${refusal ? ` (${refusal})` : ''}.`
        : '';
      const budget =
        row.cost_budget_usd !== null
          ? ` It may spend $${row.cost_budget_usd.toFixed(4)}, what ${row.budget_parent_id} has left; its spend counts against that task's budget.`
          : '';
      const siblings = args.parent_task_id ? await countSubtasks(ctx.db, args.parent_task_id) : 0;
      const tooFine =
        siblings > SUBTASK_SOFT_CAP
          ? ` Note: ${args.parent_task_id} now has ${siblings} subtasks; more than ${SUBTASK_SOFT_CAP} is usually too fine a split.`
          : '';
      return {
        content: `${created ? 'Created' : 'Already created'} task ${row.id} "${row.title}" for ${row.agent_id} (priority ${row.priority}${row.parent_task_id ? `, subtask of ${row.parent_task_id}` : ''}).${gate}${budget}${waiting}${tooFine}`,
      };
    }),
});

export const taskList = defineTool({
  name: 'task_list',
  description:
    'List tasks by priority: yours (default), the ones you created, or all; optionally by state or parent task.',
  schema: z
    .object({
      scope: z
        .enum(['mine', 'created', 'all'])
        .optional()
        .describe('mine = assigned to you (default); created = created by you'),
      states: z
        .array(z.string().min(1).max(20))
        .max(9)
        .optional()
        .describe('Only these states (pending, in_progress, blocked, review, completed, failed, …)'),
      parent_task_id: taskId.optional().describe('Only the subtasks of this task'),
      include_closed: z
        .boolean()
        .optional()
        .describe('Also completed, failed, cancelled, rejected and archived tasks (default: no)'),
      limit: z.number().int().min(1).max(TASK_LIST_PAGE_MAX).optional(),
      offset: z.number().int().min(0).optional(),
    })
    .strict(),
  sideEffecting: false,
  summarize: (a) => `task_list ${a.scope ?? 'mine'}${a.states ? ` ${a.states.join(',')}` : ''}`,
  run: async (args, ctx) => {
    // Only the caller's organisation: 'all' is all of its tasks, never another organisation's.
    let query = ctx.db.selectFrom('tasks').selectAll().where('org', '=', ctx.org);
    const scope = args.scope ?? 'mine';
    if (scope === 'mine') query = query.where('agent_id', '=', ctx.agentId);
    if (scope === 'created') query = query.where('created_by', '=', agentCreator(ctx.agentId));
    if (args.parent_task_id) query = query.where('parent_task_id', '=', args.parent_task_id);
    if (args.states?.length) query = query.where('state', 'in', args.states);
    else if (!args.include_closed) query = query.where('state', 'not in', [...TERMINAL_STATES]);
    const limit = args.limit ?? TASK_LIST_PAGE_SIZE;
    const offset = args.offset ?? 0;
    const rows = await query
      .orderBy(PRIORITY_RANK)
      .orderBy('updated_at', 'desc')
      .orderBy('id')
      .limit(limit + 1)
      .offset(offset)
      .execute();
    const shown = rows.slice(0, limit);
    if (!shown.length) return { content: offset ? 'No more tasks.' : 'No tasks match.' };
    const lines = shown.map((t) => taskLine(t, t.agent_id !== ctx.agentId));
    if (rows.length > limit) lines.push(`…more: call task_list again with offset ${offset + limit}`);
    return { content: lines.join('\n') };
  },
});

export const taskGet = defineTool({
  name: 'task_get',
  description:
    'Show one task: description, state, assignee, parent, subtasks, dependencies, latest notes and comments, result or error.',
  schema: z.object({ task_id: taskId }).strict(),
  sideEffecting: false,
  summarize: (a) => `task_get ${a.task_id}`,
  run: async (args, ctx) => {
    const task = await findTaskInOrg(ctx.db, args.task_id, ctx.org);
    if (!task) return noSuchTask(args.task_id);
    // Related tasks of another organisation (an operator's link, a moved agent) are not shown either.
    const [subtasks, deps, dependants, events] = await Promise.all([
      ctx.db
        .selectFrom('tasks')
        .selectAll()
        .where('parent_task_id', '=', task.id)
        .where('org', '=', ctx.org)
        .orderBy('created_at')
        .execute(),
      ctx.db
        .selectFrom('task_dependencies')
        .innerJoin('tasks', 'tasks.id', 'task_dependencies.depends_on')
        .selectAll('tasks')
        .where('task_dependencies.task_id', '=', task.id)
        .where('tasks.org', '=', ctx.org)
        .execute(),
      ctx.db
        .selectFrom('task_dependencies')
        .innerJoin('tasks', 'tasks.id', 'task_dependencies.task_id')
        .selectAll('tasks')
        .where('task_dependencies.depends_on', '=', task.id)
        .where('tasks.org', '=', ctx.org)
        .execute(),
      ctx.db
        .selectFrom('task_events')
        .select(['type', 'data', 'created_at'])
        .where('task_id', '=', task.id)
        .where('type', 'in', ['note-added', 'comment-added'])
        .orderBy('id', 'desc')
        .limit(TASK_GET_NOTES_MAX * 2)
        .execute(),
    ]);
    const parts = [
      `# ${task.title}`,
      `id ${task.id} · ${task.state} · priority ${task.priority} · assignee ${task.agent_id} · round ${task.round}${task.created_by ? ` · created by ${task.created_by}` : ''}${task.needs_approval ? ' · waiting for human approval' : ''}`,
    ];
    if (task.parent_task_id) parts.push(`Subtask of ${task.parent_task_id}`);
    parts.push(
      `## Description\n${task.description.length > TASK_GET_DESC_CHARS ? `${task.description.slice(0, TASK_GET_DESC_CHARS)}…` : task.description}`,
    );
    if (subtasks.length)
      parts.push(`## Subtasks (${subtasks.length})\n${subtasks.map((t) => taskLine(t, true)).join('\n')}`);
    if (deps.length) parts.push(`## Depends on\n${deps.map((t) => taskLine(t, true)).join('\n')}`);
    if (dependants.length) parts.push(`## Waited on by\n${dependants.map((t) => taskLine(t, true)).join('\n')}`);
    const notes = events
      .filter((e) => e.type === 'note-added')
      .slice(0, TASK_GET_NOTES_MAX)
      .reverse();
    const comments = events
      .filter((e) => e.type === 'comment-added')
      .slice(0, TASK_GET_NOTES_MAX)
      .reverse();
    if (notes.length)
      parts.push(`## Notes (newest last)\n${notes.map((n) => `- ${String(n.data.note ?? '')}`).join('\n')}`);
    if (comments.length)
      parts.push(
        `## Comments (newest last)\n${comments.map((c) => `- ${String(c.data.from ?? 'someone')}: ${String(c.data.text ?? '')}`).join('\n')}`,
      );
    if (task.result_summary) parts.push(`## Result\n${task.result_summary}`);
    if (task.last_error) parts.push(`## Last error\n${task.last_error}`);
    return { content: parts.join('\n\n') };
  },
});

export const taskUpdate = defineTool({
  name: 'task_update',
  description:
    'Change a task you created or are assigned: title, description, priority, add dependencies (only before it starts), or cancel it (tasks you created; cancels its subtasks too).',
  schema: z
    .object({
      task_id: taskId,
      title: z.string().min(1).max(200).optional(),
      description: z.string().max(TASK_DESC_MAX_CHARS).optional(),
      priority: priority.optional(),
      add_dependencies: z
        .array(taskId)
        .max(TASK_MAX_DEPENDENCIES)
        .optional()
        .describe('Task ids that must complete before this task starts'),
      status: z.enum(['cancelled']).optional().describe('cancelled: stop the task and its subtasks'),
    })
    .strict(),
  // Every change is a plain write or an idempotent request (cancel twice = cancel once): safe to run again.
  sideEffecting: false,
  summarize: (a) =>
    `task_update ${a.task_id}${a.status ? ` → ${a.status}` : ''}${a.add_dependencies ? ` +deps ${a.add_dependencies.join(',')}` : ''}`,
  run: async (args, ctx) =>
    asToolError(async () => {
      const task = await findTaskInOrg(ctx.db, args.task_id, ctx.org);
      if (!task) return noSuchTask(args.task_id);
      const mayEdit = task.agent_id === ctx.agentId || task.created_by === agentCreator(ctx.agentId);
      if (!mayEdit)
        return {
          content: `Task ${task.id} is neither assigned to you nor created by you; comment on it with task_comment instead.`,
          isError: true,
        };
      const done: string[] = [];
      const fields = {
        ...(args.title !== undefined ? { title: args.title } : {}),
        ...(args.description !== undefined ? { description: args.description } : {}),
        ...(args.priority !== undefined ? { priority: args.priority } : {}),
      };
      if (Object.keys(fields).length) {
        await ctx.db
          .updateTable('tasks')
          .set({ ...fields, updated_at: new Date() })
          .where('id', '=', task.id)
          .execute();
        await addTaskEvent(
          ctx.db,
          task.id,
          'task-updated',
          { ...fields, by: agentCreator(ctx.agentId) },
          `update:${ctx.sessionId}:${ctx.toolCallId}`,
        );
        done.push(`updated ${Object.keys(fields).join(', ')}`);
      }
      if (args.add_dependencies?.length) {
        const added = await addDependencies(ctx.db, task.id, args.add_dependencies, ctx.org);
        if (added.length)
          await ignoreGone(
            Context.current().client.workflow.getHandle(taskWorkflowId(task.id)).signal(dependenciesChangedSignal),
          );
        done.push(added.length ? `now also waits for ${added.join(', ')}` : 'those dependencies were already set');
      }
      if (args.status === 'cancelled') {
        if (task.created_by !== agentCreator(ctx.agentId))
          return {
            content: `${done.join('; ') || 'Nothing changed'}. Not cancelled: only the creator of task ${task.id} may cancel it; ask them with task_comment.`,
            isError: true,
          };
        if ((TERMINAL_STATES as readonly string[]).includes(task.state)) {
          done.push(`not cancelled: it is already ${task.state}`);
        } else {
          await ignoreGone(Context.current().client.workflow.getHandle(taskWorkflowId(task.id)).cancel());
          done.push('cancellation requested (its subtasks and the tasks waiting on it are cancelled too)');
        }
      }
      return {
        content: done.length ? `Task ${task.id}: ${done.join('; ')}.` : 'Nothing to change: give a field to update.',
      };
    }),
});

export const taskComment = defineTool({
  name: 'task_comment',
  description:
    "Comment on a task's thread. The task's agent sees the comment in its next step and answers in the thread; so does each agent you @mention (by id).",
  schema: z.object({ task_id: taskId, text: z.string().min(1).max(TASK_COMMENT_MAX_CHARS) }).strict(),
  sideEffecting: true,
  summarize: (a) => `task_comment ${a.task_id}: ${a.text.slice(0, 80)}`,
  run: async (args, ctx) => {
    const task = await findTaskInOrg(ctx.db, args.task_id, ctx.org);
    if (!task) return noSuchTask(args.task_id);
    const from = agentCreator(ctx.agentId);
    // The assignee answers a comment: its policy decides whether this agent may address it, unless the
    // task is one this agent created (the creator may always follow up on its own request).
    if (task.agent_id !== ctx.agentId && task.created_by !== from) {
      const [assignee, me] = await Promise.all([
        findAgentInOrg(ctx.db, task.agent_id, ctx.org),
        findAgentInOrg(ctx.db, ctx.agentId, ctx.org),
      ]);
      const refusal = assignee && me ? agentWorkRefusal(assignee, me) : undefined;
      if (refusal)
        return {
          content: `Not commented: ${refusal}. Ask a human to pass it on (notify_user), or message an agent that takes your messages.`,
          isError: true,
        };
    }
    // The comment's id, the same for a retried call: it is delivered, and its mentions, once.
    const commentId = `comment-${createHash('sha256').update(`${ctx.sessionId}\0${ctx.toolCallId}`).digest('hex').slice(0, 32)}`;
    await addTaskEvent(
      ctx.db,
      task.id,
      'comment-added',
      { text: args.text, from, commentId },
      `comment:${ctx.sessionId}:${ctx.toolCallId}`,
    );
    const activity = Context.current();
    const open = !(TERMINAL_STATES as readonly string[]).includes(task.state);
    const done: string[] = [];
    // Another agent's task: as a human's comment, through its assignee's mailbox, which forwards it to the
    // running round and answers in the thread. Past the agents' comment budget, the round still sees it.
    const itemId =
      task.agent_id !== ctx.agentId
        ? await deliverAgentComment(ctx.db, activity.client, activity.info.taskQueue, {
            taskId: task.id,
            assignee: task.agent_id,
            fromAgentId: ctx.agentId,
            text: args.text,
            commentId,
          })
        : undefined;
    if (itemId) done.push(`${task.agent_id} sees it${open ? ' in its next step' : ''} and answers in the thread`);
    // My own task, or the budget is used up: a running round gets it directly (my current round already has it).
    else if (
      task.id !== ctx.taskId &&
      open &&
      (await ignoreGone(
        activity.client.workflow.getHandle(taskWorkflowId(task.id)).signal(commentSignal, { text: args.text, from }),
      ))
    ) {
      done.push(`${task.agent_id} sees it in its next step`);
    }
    // Every other agent it @mentions answers in the thread (not the author, not the assignee).
    const mentioned = await deliverCommentMentions(ctx.db, activity.client, activity.info.taskQueue, {
      taskId: task.id,
      text: args.text,
      from: { type: 'agent', id: ctx.agentId },
      commentItemId: itemId ?? commentId,
      skip: [task.agent_id],
    });
    if (mentioned.length) done.push(`asked ${mentioned.join(', ')} to answer in the thread`);
    return { content: `Comment added to task ${task.id}${done.length ? `; ${done.join('; ')}` : ''}.` };
  },
});

export const taskManagementTools = [taskCreate, taskList, taskGet, taskUpdate, taskComment];

function taskLine(t: TaskRow, showAssignee: boolean): string {
  const description =
    t.description.trim() && t.description !== t.title ? ` — ${oneLine(t.description, TASK_LIST_DESC_CHARS)}` : '';
  return `- [${t.priority}] ${t.title} (id ${t.id}, ${t.state}${showAssignee ? `, assignee ${t.agent_id}` : ''})${description}`;
}

function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/**
 * A running task's live cost limit, from its workflow (a human's raise included); undefined when the
 * workflow is not there (the stored grant then stands). Other failures propagate: the activity retries.
 */
async function liveBudgetLimitUsd(client: Client, taskId: string): Promise<number | null | undefined> {
  try {
    return (await client.workflow.getHandle(taskWorkflowId(taskId)).query(budgetQuery)).limitUsd;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return undefined;
    throw error;
  }
}

async function countSubtasks(db: Kysely<Database>, parentId: string): Promise<number> {
  const row = await db
    .selectFrom('tasks')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('parent_task_id', '=', parentId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Bad input becomes an error result the model reads; nothing was written (see TaskGraphError). */
async function asToolError(run: () => Promise<ToolOutput>): Promise<ToolOutput> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof TaskGraphError) return { content: error.message, isError: true };
    throw error;
  }
}
