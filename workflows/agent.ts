import {
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  executeChild,
  getExternalWorkflowHandle,
  isCancellation,
  patched,
  log,
  ParentClosePolicy,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import { MAILBOX_STORE_LOCAL, MESSAGING } from './activity-options';
import type { Activities } from '../activities';
import type { MailboxItemChange, MailboxItemRecord } from '../activities/mailbox/mailbox-activities';
import {
  channelSessionId,
  chatRunWorkflowId,
  deliverUpdate,
  directChannel,
  mailboxQuery,
  type AgentWorkflowInput,
  type DeliverInput,
  type DeliverResult,
  type MailboxView,
} from './agent-contract';
import { AgentIdSearchAttribute, commentSignal, taskWorkflowId } from './contract';
import {
  deliveryProblem,
  interruptDecision,
  isStaleInformational,
  itemPriority,
  MAILBOX_ITEM_PREVIEW_CHARS,
  MAILBOX_KIND_RULES,
  MAILBOX_MERGE_SEPARATOR,
  MAILBOX_VIEW_MAX_ITEMS,
  mergeTarget,
  nextItem,
  type MailboxItemStatus,
} from './rules/mailbox';
import { conversationScenario } from './rules/conversation';
import { groupNameOf } from './rules/group';
import { chatRunWorkflow } from './scenario-run';
import { fromRecord, view, type Item } from './mailbox-items';
import { AGENT_ANSWERS_JOIN_TASK_PATCH, AGENT_WAITS_FOR_LATE_DELIVERIES_PATCH, BASELINE_0_9_0_PATCH } from './patches';
import { FailureType } from './failure-types';
import { agentMessageText, taskCommentText } from '../prompts/conversation';
import { inheritedOrgOption } from './org-attribute';

const store = proxyLocalActivities<Activities>({
  ...MAILBOX_STORE_LOCAL,
  retry: { ...MAILBOX_STORE_LOCAL.retry, nonRetryableErrorTypes: [FailureType.UnknownAgent, FailureType.UnknownTask] },
});
const messaging = proxyActivities<Activities>(MESSAGING);

/** The entity continues as new past this many history events (well under Temporal's 51,200), when idle. */
export const AGENT_MAX_HISTORY_EVENTS_PER_RUN = 5_000;

/**
 * The agent as an entity (`agent-{agentId}`): it owns the mailbox and the agent's attention. Items
 * arrive by the update `deliver` (update-with-start starts an idle agent), are stored in
 * `mailbox_items` before the update returns, and are triaged by the design's rules: a queued item of the
 * same group absorbs a new one (merge); an item arriving during work may preempt it (a preempted
 * item goes back to the queue and is picked again); everything else waits, highest priority first.
 * Chat, mentions, agent messages and group messages are answered by a child `chatRunWorkflow` in the
 * channel's session, in the item's scenario (chat, a2a, comment_response, group_chat); comments are
 * forwarded to their task's running round and answered in its thread; notifications and task items are recorded for
 * the heartbeat (no LLM run). Continues as new when idle and the history grows, carrying counters only:
 * the queue is reloaded from PostgreSQL.
 */
export async function agentWorkflow(input: AgentWorkflowInput): Promise<void> {
  const { agentId } = input;
  // Asked first, in the run's first workflow task: a run started by 0.9.0 or later takes the two
  // patches below without asking them, where the runs before asked them after a local activity ('The
  // release baseline' and 'Up-front patches' in patches.ts).
  const baseline = patched(BASELINE_0_9_0_PATCH);
  const counters = { delivered: 0, completed: 0, merged: 0, preempted: 0, ...input.carry };
  const items = new Map<string, Item>();
  let current: { item: Item; scope?: CancellationScope; preempted: boolean; since: string } | undefined;
  let loaded = false;
  /**
   * Deliveries between their first await and their return. The main loop picks work only when none is
   * in flight, and only the main loop writes triage changes (`pendingChanges`): the two never race, so
   * the order of commands in the history is the same when it is replayed.
   */
  let delivering = 0;
  const pendingChanges: MailboxItemChange[] = [];

  upsertSearchAttributes([{ key: AgentIdSearchAttribute, value: agentId }]);

  setHandler(mailboxQuery, (): MailboxView => ({
    agentId,
    attention: current ? 'focused' : 'idle',
    ...(current ? { focus: { itemId: current.item.itemId, kind: current.item.kind, since: current.since } } : {}),
    items: [...items.values()].map(view),
    counters: { ...counters },
  }));

  setHandler(
    deliverUpdate,
    async (delivery: DeliverInput): Promise<DeliverResult> => {
      await condition(() => loaded);
      delivering += 1;
      try {
        return await accept(delivery);
      } finally {
        delivering -= 1;
      }
    },
    {
      validator: (delivery: DeliverInput) => {
        const problem = deliveryProblem(delivery);
        if (problem) throw ApplicationFailure.nonRetryable(problem, FailureType.InvalidDelivery);
      },
    },
  );

  /** Stores a delivered item, then triages it synchronously; the triage is written by the main loop. */
  async function accept(delivery: DeliverInput): Promise<DeliverResult> {
    const receivedAtMs = Date.now();
    const channel = delivery.channel ?? (delivery.taskId ? `task:${delivery.taskId}` : directChannel(delivery.from));
    const itemId = uuid4();
    const item: Item = {
      itemId,
      thread: delivery.thread ?? itemId,
      kind: delivery.kind,
      from: { type: delivery.from.type, id: delivery.from.id },
      channel,
      ...(delivery.taskId ? { taskId: delivery.taskId } : {}),
      ...(delivery.replyTo ? { replyTo: delivery.replyTo } : {}),
      priority: itemPriority(delivery),
      receivedAtMs,
      text: delivery.text,
      status: 'queued',
      decision: 'pick',
      reason: '',
      mergedCount: 0,
      ...(delivery.idempotencyKey ? { idempotencyKey: delivery.idempotencyKey } : {}),
    };
    // Stored first (and refused here for an unknown agent or task): from now on it cannot be lost.
    const stored = await store.recordMailboxItem(record(item));
    // A retry of a delivery already stored under its idempotency key: the first one's item, nothing new.
    // Histories recorded before keys never reach this (their result has no `existing`).
    if (stored?.existing) return replayedDelivery(stored.existing);

    const changes: MailboxItemChange[] = [];
    const target = mergeTarget(queued(), item);
    counters.delivered += 1;
    if (target) {
      target.text += MAILBOX_MERGE_SEPARATOR + item.text;
      target.mergedCount += 1;
      Object.assign(item, {
        status: 'merged',
        mergedInto: target.itemId,
        decision: 'merge',
        reason: `merged into queued item ${target.itemId} (same ${item.kind === 'comment' ? 'task' : 'channel and sender'})`,
      });
      counters.merged += 1;
      changes.push(
        { id: target.itemId, text: target.text, mergedCount: target.mergedCount },
        { id: item.itemId, status: 'merged', decision: 'merge', reason: item.reason, mergedInto: target.itemId },
      );
    } else if (current) {
      const { decision, rule } = interruptDecision(current.item, item);
      if (decision === 'preempt') {
        item.decision = 'preempt';
        item.reason = `${rule}: preempts ${current.item.kind} ${current.item.itemId}`;
        current.preempted = true;
        current.scope?.cancel();
      } else {
        item.decision = 'wait';
        item.reason = `${rule === 'none' ? 'lower or equal priority' : rule}: waits for ${current.item.kind} ${current.item.itemId}`;
      }
      changes.push({ id: item.itemId, decision: item.decision, reason: item.reason });
    } else {
      item.reason = 'agent idle';
      changes.push({ id: item.itemId, reason: item.reason });
    }
    remember(item);
    pendingChanges.push(...changes);
    return {
      itemId: item.itemId,
      status: item.status === 'merged' ? 'merged' : 'queued',
      ...(target ? { mergedInto: target.itemId } : {}),
      channel,
    };
  }

  /** The answer to a retried delivery: the stored item, merged as this run knows it (its row may lag). */
  function replayedDelivery(existing: { itemId: string; channel: string; mergedInto?: string }): DeliverResult {
    const mergedInto = items.get(existing.itemId)?.mergedInto ?? existing.mergedInto;
    return {
      itemId: existing.itemId,
      status: mergedInto ? 'merged' : 'queued',
      ...(mergedInto ? { mergedInto } : {}),
      channel: existing.channel,
      replayed: true,
    };
  }

  /** Writes the triage changes deliveries made (main loop only). */
  async function flushChanges(): Promise<void> {
    if (pendingChanges.length > 0) await store.updateMailboxItems({ changes: pendingChanges.splice(0) });
  }

  for (const r of await store.loadOpenMailbox({ agentId })) remember(fromRecord(r));
  loaded = true;

  for (;;) {
    await condition(() => delivering === 0 && (queued().length > 0 || pendingChanges.length > 0 || historyTooLong()));
    await flushChanges();
    if (queued().length === 0) {
      if (!historyTooLong()) continue;
      await condition(allHandlersFinished);
      await flushChanges();
      // A delivery may have arrived while the changes were written: continuing as new now would abandon
      // it (the sender gets UnprocessedUpdate; found by the mailbox bench). Loop instead. Behind
      // patched() so histories recorded before the fix replay (the marker is written only on this path).
      if (
        queued().length === 0 &&
        (allHandlersFinished() || !(baseline || patched(AGENT_WAITS_FOR_LATE_DELIVERIES_PATCH)))
      ) {
        log.info('agent continues as new', { agentId, historyLength: workflowInfo().historyLength });
        await continueAsNew<typeof agentWorkflow>({ agentId, carry: counters });
      }
      continue;
    }
    const item = nextItem(queued())!;
    if (isStaleInformational(item, Date.now())) {
      await settle(item, 'dropped', { reason: 'informational item older than 4 h (seed)' });
      continue;
    }
    item.status = 'processing';
    current = { item, preempted: false, since: new Date().toISOString() };
    setCurrentDetails(`focused on ${item.kind} ${item.itemId} from ${item.from.type}:${item.from.id}`);
    if (MAILBOX_KIND_RULES[item.kind].invokesLlm) item.runId = chatRunWorkflowId(agentId, item.itemId);
    pendingChanges.push({ id: item.itemId, status: 'processing', ...(item.runId ? { runId: item.runId } : {}) });
    await flushChanges();
    try {
      const result = await processItem(item, current);
      await settle(item, 'completed', { result });
      counters.completed += 1;
    } catch (error) {
      if (current.preempted && isCancellation(error)) {
        counters.preempted += 1;
        await settle(item, 'queued', { reason: 'preempted: picked again when nothing more urgent waits' });
      } else {
        const message = error instanceof Error ? error.message : String(error);
        log.warn('mailbox item failed', { agentId, itemId: item.itemId, error: message });
        await settle(item, 'dropped', { result: `failed: ${message}` });
      }
    } finally {
      current = undefined;
      setCurrentDetails('idle');
    }
  }

  async function processItem(item: Item, focus: NonNullable<typeof current>): Promise<string> {
    const rules = MAILBOX_KIND_RULES[item.kind];
    if (item.kind === 'comment' && item.taskId) return answerComment(item, item.taskId, focus);
    // A task item without a task id starts a task (such items were refused before, so no replayed
    // history reaches this path).
    if (item.kind === 'task' && !item.taskId)
      return (await messaging.startTaskFromItem({ agentId, itemId: item.itemId, from: item.from, text: item.text }))
        .reason;
    if (!rules.invokesLlm) return 'recorded for the heartbeat';
    // A colleague's answer on a thread this agent opened from a task joins that task's running round.
    // Agents' messages did not carry a task before this path; the patch keeps a raw client's older one
    // (a message delivered with a taskId) on its recorded path.
    if (
      item.kind === 'message' &&
      item.from.type === 'agent' &&
      item.taskId &&
      item.replyTo &&
      (baseline || patched(AGENT_ANSWERS_JOIN_TASK_PATCH)) &&
      (await forwardToTask(item, item.taskId))
    ) {
      return `handed to the running round of task ${item.taskId}`;
    }
    const workflowId = chatRunWorkflowId(agentId, item.itemId);
    const scope = new CancellationScope();
    focus.scope = scope;
    const sessionId = channelSessionId(item.channel, agentId);
    // An agent's message names its sender and id, so the model can answer it with reply_to (a group
    // item already carries its channel header instead).
    const text =
      item.from.type === 'agent' && groupNameOf(item.channel) === undefined
        ? agentMessageText(item.from.id, item.itemId, item.text, item.taskId)
        : item.text;
    // The scenario is an argument of the child: the command order is the same as before scenarios.
    const scenario = conversationScenario(item);
    const run = await scope.run(() =>
      executeChild(chatRunWorkflow, {
        workflowId,
        parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
        ...inheritedOrgOption(),
        args: [{ agentId, itemId: item.itemId, sessionId, channel: item.channel, from: item.from, text, scenario }],
      }),
    );
    const group = groupNameOf(item.channel);
    if (group !== undefined) {
      // Group chat: the answer is posted to the group (unless silent), which routes it by the group rules.
      // Only group items take this path; no earlier history has one, so the command order of replayed
      // histories is unchanged.
      if (run.stoppedBy !== 'answer') return `${run.stoppedBy}: not posted to the group`;
      const reply = await messaging.replyToGroup({
        agentId,
        sessionId,
        group,
        itemId: item.itemId,
        ...(item.replyTo ? { replyTo: item.replyTo } : {}),
      });
      return reply.reason;
    }
    if (item.kind === 'mention' && item.taskId && run.stoppedBy === 'answer') {
      // A mention in a task comment is answered in the task's thread. Mention items did not exist before
      // this path, so replayed histories never reach it.
      const { answered } = await store.recordCommentAnswer({
        agentId,
        taskId: item.taskId,
        sessionId,
        replyTo: item.itemId,
      });
      return answered ? 'answered in the task thread' : 'no answer';
    }
    if (item.kind === 'message' && item.from.type === 'agent' && run.stoppedBy === 'answer') {
      // The reply path: the answer goes back to the sender on the same thread, within its budget.
      const reply = await messaging.replyToAgent({
        agentId,
        to: item.from.id,
        sessionId,
        replyTo: item.itemId,
        thread: item.thread,
        ...(item.taskId ? { taskId: item.taskId } : {}),
      });
      return reply.reason;
    }
    return `${run.stoppedBy}: ${run.textPreview}`.slice(0, MAILBOX_ITEM_PREVIEW_CHARS);
  }

  /**
   * A task comment: the running round sees it at its next turn (forwarded as the `comment` signal,
   * as before), and the agent answers it in the task's comment thread (`comment-answered` event with
   * `replyTo` = the comment's item id) from a chat run in the task channel's session.
   */
  async function answerComment(item: Item, taskId: string, focus: NonNullable<typeof current>): Promise<string> {
    const from = `${item.from.type}:${item.from.id}`;
    let forwarded = true;
    try {
      await getExternalWorkflowHandle(taskWorkflowId(taskId)).signal(commentSignal, { text: item.text, from });
    } catch {
      forwarded = false; // the task is not running: the answer in the thread still comes
    }
    const workflowId = chatRunWorkflowId(agentId, item.itemId);
    const sessionId = channelSessionId(`task:${taskId}`, agentId);
    const scope = new CancellationScope();
    focus.scope = scope;
    await scope.run(() =>
      executeChild(chatRunWorkflow, {
        workflowId,
        parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
        ...inheritedOrgOption(),
        args: [
          {
            agentId,
            itemId: item.itemId,
            sessionId,
            channel: `task:${taskId}`,
            from: item.from,
            text: taskCommentText(taskId, from, item.itemId, item.text),
            scenario: 'comment_response',
          },
        ],
      }),
    );
    const { answered } = await store.recordCommentAnswer({ agentId, taskId, sessionId, replyTo: item.itemId });
    return `${forwarded ? 'seen by the running round; ' : ''}${answered ? 'answered in the thread' : 'no answer'}`;
  }

  /**
   * Hands a colleague's answer to the running round of this agent's task, as a message it can answer
   * with reply_to; false when the task is not this agent's or not in progress (the caller then runs
   * the a2a scenario) or its workflow has just ended.
   */
  async function forwardToTask(item: Item, taskId: string): Promise<boolean> {
    if (!(await store.taskRoundListening({ agentId, taskId }))) return false;
    try {
      await getExternalWorkflowHandle(taskWorkflowId(taskId)).signal(commentSignal, {
        text: agentMessageText(item.from.id, item.itemId, item.text),
        from: `agent:${item.from.id}`,
        kind: 'message',
      });
      return true;
    } catch {
      return false;
    }
  }

  async function settle(
    item: Item,
    status: MailboxItemStatus,
    extra: { result?: string; reason?: string },
  ): Promise<void> {
    item.status = status;
    if (extra.result) item.result = extra.result;
    if (extra.reason) item.reason = extra.reason;
    pendingChanges.push({ id: item.itemId, status, ...extra });
    await CancellationScope.nonCancellable(() => flushChanges());
    trim();
  }

  function queued(): Item[] {
    return [...items.values()].filter((i) => i.status === 'queued');
  }

  function remember(item: Item): void {
    items.set(item.itemId, item);
    trim();
  }

  /** Finished items leave the in-memory view first; PostgreSQL keeps them all. */
  function trim(): void {
    for (const [id, i] of items) {
      if (items.size <= MAILBOX_VIEW_MAX_ITEMS) break;
      if (['completed', 'merged', 'dropped'].includes(i.status)) items.delete(id);
    }
  }

  function record(item: Item): MailboxItemRecord {
    return {
      id: item.itemId,
      agentId,
      kind: item.kind,
      from: item.from,
      channel: item.channel,
      text: item.text,
      ...(item.replyTo ? { replyTo: item.replyTo } : {}),
      thread: item.thread,
      ...(item.taskId ? { taskId: item.taskId } : {}),
      priority: item.priority,
      status: item.status,
      decision: item.decision,
      reason: item.reason,
      receivedAt: new Date(item.receivedAtMs).toISOString(),
      ...(item.idempotencyKey ? { idempotencyKey: item.idempotencyKey } : {}),
    };
  }
}

function historyTooLong(): boolean {
  const info = workflowInfo();
  return info.continueAsNewSuggested || info.historyLength > AGENT_MAX_HISTORY_EVENTS_PER_RUN;
}
