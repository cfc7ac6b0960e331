import { ApplicationFailure } from '@temporalio/common';
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { unknownAgent } from '../errors';
import { findAgent } from '../store/agents';
import { orgOfAgent } from '../store/tenancy';
import { appendMessage, ensureSession } from '../store/sessions';
import { addTaskEvent, findTask } from '../store/tasks';
import { Context } from '@temporalio/activity';
import { NO_RESPONSE_MARKER, sendAgentMessage } from './send';
import { groupNameOf } from '../../workflows/rules/group';
import { groupMembers, postGroupMessage } from './group';
import { recordNewTask } from '../store/task-graph';
import { startTaskWorkflow } from '../task-propagation';
import { FailureType } from '../../workflows/failure-types';
import { findIdempotentItem, textSha256, type IdempotentItem } from './idempotency';

/** A task started from a mailbox item is titled by the first line of its text, cut here (tasks allow 200). */
const MAILBOX_TASK_TITLE_CHARS = 120;

export interface MailboxItemRecord {
  id: string;
  agentId: string;
  kind: string;
  from: { type: string; id: string };
  channel: string;
  text: string;
  replyTo?: string;
  thread: string;
  taskId?: string;
  priority: number;
  status: string;
  decision: string;
  reason: string;
  mergedInto?: string;
  mergedCount?: number;
  runId?: string;
  result?: string;
  receivedAt: string;
  /** A retried delivery with this key finds this item (see ./idempotency.ts). */
  idempotencyKey?: string;
}

export interface MailboxItemChange {
  id: string;
  status?: string;
  decision?: string;
  reason?: string;
  text?: string;
  mergedInto?: string;
  mergedCount?: number;
  runId?: string;
  result?: string;
}

/** Open items (not finished) are reloaded after continue-as-new; this many at most. */
const MAILBOX_OPEN_LOAD_MAX = 1_000;

export function createMailboxActivities(deps: { db: Kysely<Database> }) {
  const { db } = deps;
  return {
    /**
     * The agent's open mailbox (queued, processing, deferred), oldest first. Throws a non-retryable
     * `UnknownAgent` when the agent does not exist, so the agent workflow ends at once.
     */
    async loadOpenMailbox(input: { agentId: string }): Promise<MailboxItemRecord[]> {
      if (!(await findAgent(db, input.agentId))) throw unknownAgent(input.agentId);
      const rows = await db
        .selectFrom('mailbox_items')
        .selectAll()
        .where('agent_id', '=', input.agentId)
        .where('status', 'in', ['queued', 'processing', 'deferred'])
        .orderBy('created_at')
        .limit(MAILBOX_OPEN_LOAD_MAX)
        .execute();
      return rows.map((r) => ({
        id: r.id,
        agentId: r.agent_id,
        kind: r.kind,
        from: { type: r.from_type, id: r.from_id },
        channel: r.channel,
        text: r.text,
        ...(r.reply_to ? { replyTo: r.reply_to } : {}),
        thread: r.thread_id,
        ...(r.task_id ? { taskId: r.task_id } : {}),
        priority: r.priority,
        // A run cut off by continue-as-new or a crash is not lost: it is picked again.
        status: r.status === 'processing' ? 'queued' : r.status,
        decision: r.decision,
        reason: r.reason,
        mergedCount: r.merged_count,
        receivedAt: r.created_at.toISOString(),
      }));
    },

    /**
     * Stores a delivered item (idempotent by id). With an idempotency key that an earlier delivery to
     * this agent already stored, stores nothing and returns that item (`existing`). Refuses,
     * non-retryably and before anything is stored, an item for an unknown agent or naming an unknown
     * task.
     */
    async recordMailboxItem(item: MailboxItemRecord): Promise<{ existing?: IdempotentItem } | undefined> {
      if (!(await findAgent(db, item.agentId))) throw unknownAgent(item.agentId);
      const taskId = item.taskId ?? (item.channel.startsWith('task:') ? item.channel.slice('task:'.length) : undefined);
      if (taskId && !(await findTask(db, taskId))) {
        throw ApplicationFailure.nonRetryable(
          `unknown task ${JSON.stringify(taskId)}: the item names a task that does not exist`,
          FailureType.UnknownTask,
        );
      }
      const group = groupNameOf(item.channel);
      if (group !== undefined) {
        const members = await groupMembers(db, group);
        if (!members)
          throw ApplicationFailure.nonRetryable(
            `unknown group ${JSON.stringify(group)}: create it first`,
            FailureType.InvalidGroup,
          );
        if (!members.some((m) => m.type === 'agent' && m.id === item.agentId))
          throw ApplicationFailure.nonRetryable(
            `agent ${item.agentId} is not a member of group ${group}`,
            FailureType.InvalidGroup,
          );
      }
      await db
        .insertInto('mailbox_items')
        .values({
          id: item.id,
          agent_id: item.agentId,
          kind: item.kind,
          from_type: item.from.type,
          from_id: item.from.id,
          channel: item.channel,
          text: item.text,
          reply_to: item.replyTo ?? null,
          thread_id: item.thread,
          task_id: item.taskId ?? null,
          priority: item.priority,
          status: item.status,
          decision: item.decision,
          reason: item.reason,
          merged_into: item.mergedInto ?? null,
          merged_count: item.mergedCount ?? 0,
          created_at: item.receivedAt,
          ...(item.idempotencyKey
            ? { idempotency_key: item.idempotencyKey, idempotency_text_sha256: textSha256(item.text) }
            : {}),
        })
        // Any conflict: this item's own id (a retried activity) or, with a key, an earlier delivery's item.
        .onConflict((oc) => oc.doNothing())
        .execute();
      if (!item.idempotencyKey) return undefined;
      const stored = await findIdempotentItem(db, item.agentId, item.idempotencyKey);
      return stored && stored.itemId !== item.id ? { existing: stored } : undefined;
    },

    /** Applies triage and processing changes to stored items. */
    async updateMailboxItems(input: { changes: MailboxItemChange[] }): Promise<void> {
      for (const c of input.changes) {
        await db
          .updateTable('mailbox_items')
          .set({
            ...(c.status !== undefined ? { status: c.status } : {}),
            ...(c.decision !== undefined ? { decision: c.decision } : {}),
            ...(c.reason !== undefined ? { reason: c.reason } : {}),
            ...(c.text !== undefined ? { text: c.text } : {}),
            ...(c.mergedInto !== undefined ? { merged_into: c.mergedInto } : {}),
            ...(c.mergedCount !== undefined ? { merged_count: c.mergedCount } : {}),
            ...(c.runId !== undefined ? { run_id: c.runId } : {}),
            ...(c.result !== undefined ? { result: c.result } : {}),
            updated_at: new Date(),
          })
          .where('id', '=', c.id)
          .execute();
      }
    },

    /**
     * The reply path of an agent message: sends the recipient's last answer in the session back to
     * the sender on the same thread (unless empty or NO_RESPONSE, or over the thread's budget).
     * Idempotent by the answered item.
     */
    async replyToAgent(input: {
      agentId: string;
      to: string;
      sessionId: string;
      replyTo: string;
      thread: string;
      taskId?: string;
    }): Promise<{ sent: boolean; reason: string }> {
      const text = await lastAnswer(db, input.sessionId);
      if (!text || text === NO_RESPONSE_MARKER)
        return { sent: false, reason: 'no reply: the agent chose not to answer' };
      const fromOrg = await orgOfAgent(db, input.agentId);
      if (fromOrg === undefined) return { sent: false, reason: `reply not sent: unknown agent ${input.agentId}` };
      const activity = Context.current();
      const outcome = await sendAgentMessage(db, activity.client, activity.info.taskQueue, {
        fromAgentId: input.agentId,
        fromOrg,
        to: input.to,
        text,
        replyTo: input.replyTo,
        thread: input.thread,
        ...(input.taskId ? { taskId: input.taskId } : {}),
        idempotencyKey: `reply-${input.replyTo}`,
      });
      return outcome.sent
        ? { sent: true, reason: `replied to ${input.to} (item ${outcome.itemId})` }
        : { sent: false, reason: `reply not sent: ${outcome.reason}` };
    },

    /**
     * Whether a colleague's answer about a task can go to the task's running round: the task is this
     * agent's own and in progress. Otherwise the answer is handled in a conversation run as usual.
     */
    async taskRoundListening(input: { agentId: string; taskId: string }): Promise<boolean> {
      const task = await findTask(db, input.taskId);
      return task?.agent_id === input.agentId && task.state === 'in_progress';
    },

    /**
     * The reply path of a group message: posts the agent's last answer in the session to the group,
     * where the group rules deliver it further (only to the agents it @mentions, within the turn's
     * budgets). Not posted when empty or NO_RESPONSE (silence by default). Idempotent by item.
     */
    async replyToGroup(input: {
      agentId: string;
      sessionId: string;
      group: string;
      replyTo?: string;
      itemId: string;
    }): Promise<{ sent: boolean; reason: string }> {
      const text = await lastAnswer(db, input.sessionId);
      if (!text || text === NO_RESPONSE_MARKER) return { sent: false, reason: 'no reply: the agent stayed silent' };
      const activity = Context.current();
      const outcome = await postGroupMessage(db, activity.client, activity.info.taskQueue, {
        id: `reply-${input.itemId}`,
        group: input.group,
        from: { type: 'agent', id: input.agentId },
        text,
        ...(input.replyTo ? { replyTo: input.replyTo } : {}),
      });
      return outcome.posted
        ? { sent: true, reason: `posted to group ${input.group} (${outcome.message.routing})`.slice(0, 200) }
        : { sent: false, reason: `reply not posted: ${outcome.reason}` };
    },

    /**
     * A `task` item without a task id asks the agent to work on something: records a task for the agent
     * (title = the text's first line, description = the text; id `mailbox-{itemId}`, so a retry creates
     * nothing twice) and starts its workflow.
     */
    async startTaskFromItem(input: {
      agentId: string;
      itemId: string;
      from: { type: string; id: string };
      text: string;
    }): Promise<{ taskId: string; reason: string }> {
      const title =
        (input.text.trim().split('\n')[0] ?? '').trim().slice(0, MAILBOX_TASK_TITLE_CHARS) || 'Task from the mailbox';
      const { created, row } = await recordNewTask(db, {
        id: `mailbox-${input.itemId}`,
        agentId: input.agentId,
        title,
        description: input.text,
        priority: 'medium',
        createdBy: `${input.from.type}:${input.from.id}`,
      });
      const activity = Context.current();
      await startTaskWorkflow(activity.client, activity.info.taskQueue, {
        id: row.id,
        agentId: row.agent_id,
        title: row.title,
      });
      return { taskId: row.id, reason: `${created ? 'started' : 'already started'} task ${row.id}` };
    },

    /**
     * Records the agent's threaded answer to a task comment: a `comment-answered` task event whose
     * `replyTo` is the comment's item id (idempotent by it), with the last answer in the session.
     */
    async recordCommentAnswer(input: {
      agentId: string;
      taskId: string;
      sessionId: string;
      replyTo: string;
    }): Promise<{ answered: boolean }> {
      const text = await lastAnswer(db, input.sessionId);
      if (!text || text === NO_RESPONSE_MARKER) return { answered: false };
      await addTaskEvent(
        db,
        input.taskId,
        'comment-answered',
        { replyTo: input.replyTo, from: input.agentId, text },
        `comment-answer:${input.replyTo}`,
      );
      return { answered: true };
    },

    /**
     * Opens a chat turn: the channel's session (created on first use, then reused) gets the human's
     * message, once per item. Returns the turn number in this session, which keys the turn's LLM
     * steps (idempotent: a retry returns the same number).
     */
    async beginChatTurn(input: {
      agentId: string;
      sessionId: string;
      itemId: string;
      text: string;
      from: { type: string; id: string };
    }): Promise<{ turnNumber: number }> {
      await ensureSession(db, { id: input.sessionId, agentId: input.agentId, kind: 'chat' });
      await appendMessage(db, input.sessionId, `chat-${input.itemId}`, {
        role: 'user',
        content: [{ type: 'text', text: input.text }],
      });
      const mine = await db
        .selectFrom('messages')
        .select('id')
        .where('session_id', '=', input.sessionId)
        .where('idem_key', '=', `chat-${input.itemId}`)
        .executeTakeFirstOrThrow();
      const before = await db
        .selectFrom('messages')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('session_id', '=', input.sessionId)
        .where('idem_key', 'like', 'chat-%')
        .where('id', '<=', mine.id)
        .executeTakeFirstOrThrow();
      return { turnNumber: Number(before.n) };
    },
  };
}

/** The text of the session's last assistant message (empty when it has none). */
async function lastAnswer(db: Kysely<Database>, sessionId: string): Promise<string> {
  const last = await db
    .selectFrom('messages')
    .select('content')
    .where('session_id', '=', sessionId)
    .where('role', '=', 'assistant')
    .orderBy('id', 'desc')
    .executeTakeFirst();
  return ((last?.content ?? []) as Array<{ type: string; text?: string }>)
    .flatMap((b) => (b.type === 'text' && b.text ? [b.text] : []))
    .join('\n')
    .trim();
}
