/**
 * The agent entity's contract: workflow `agentWorkflow`, id `agent-{agentId}`, update `deliver` (usable
 * with update-with-start, so the first message to an idle agent starts it) and query `mailbox`.
 * Imported by the workflow, the client and tests.
 */
import { defineQuery, defineUpdate } from '@temporalio/workflow';
import type { ConversationScenario } from './rules/conversation';

/** Seed priorities: 0 critical, 1 high, 2 normal, 3 low, 4 background. */
export const MAILBOX_PRIORITIES = { critical: 0, high: 1, normal: 2, low: 3, background: 4 } as const;
export type MailboxPriorityName = keyof typeof MAILBOX_PRIORITIES;

export type MailboxItemStatus = 'queued' | 'processing' | 'completed' | 'merged' | 'deferred' | 'dropped';
export type MailboxTriageDecision = 'pick' | 'continue' | 'preempt' | 'merge' | 'wait';

export const agentWorkflowId = (agentId: string): string => `agent-${agentId}`;
/** Seed DM channel between two agents: `dm:a2a:{sorted id}:{sorted id}`. */
export const agentDmChannel = (a: string, b: string): string => `dm:a2a:${[a, b].sort().join(':')}`;

/** The child workflow that answers one chat item; also the id of the run stream its deltas go to. */
export const chatRunWorkflowId = (agentId: string, itemId: string): string => `agent-${agentId}-chat-${itemId}`;
/** Seed channel reuse: one session per channel and agent, reused across messages. */
export const channelSessionId = (channel: string, agentId: string): string => `channel_${channel}_${agentId}`;
/** A human's direct channel with an agent when the message names none. */
export const directChannel = (from: { type: string; id: string }): string => `dm:${from.type}:${from.id}`;

export type MailboxItemKind = 'chat' | 'message' | 'comment' | 'mention' | 'notification' | 'task';

export interface DeliverInput {
  kind: MailboxItemKind;
  from: { type: 'human' | 'agent' | 'system'; id: string };
  /** `dm:<anything>` (default: the sender's direct channel) or `task:<taskId>`. */
  channel?: string;
  text: string;
  /** The item this one answers (threads). */
  replyTo?: string;
  /** The conversation this item continues (default: a new thread rooted at this item). */
  thread?: string;
  taskId?: string;
  /** Overrides the kind's default priority (each kind has its own default). */
  priority?: MailboxPriorityName;
  /**
   * Makes a retry safe: a later delivery to the same agent with the same key stores nothing and
   * answers with the first one's item (`replayed`). The HTTP API scopes a client's `Idempotency-Key`
   * header by the caller.
   */
  idempotencyKey?: string;
}

export interface DeliverResult {
  itemId: string;
  /** `merged`: folded into an earlier queued item (`mergedInto`), which carries the text now. */
  status: 'queued' | 'merged';
  mergedInto?: string;
  /** The channel the item belongs to (defaulted when the input named none). */
  channel: string;
  /** An earlier delivery with the same `idempotencyKey` stored this item; this one stored nothing. */
  replayed?: boolean;
}

export interface MailboxItemView {
  itemId: string;
  kind: MailboxItemKind;
  from: { type: string; id: string };
  channel: string;
  priority: number;
  status: MailboxItemStatus;
  /** The triage decision taken when the item arrived, and why. */
  decision: MailboxTriageDecision;
  reason: string;
  preview: string;
  mergedCount: number;
  receivedAt: string;
  thread: string;
  replyTo?: string;
  /** What handling it produced (e.g. a reply sent, or why not). */
  result?: string;
  /** The child run answering it (chat, mention, message). */
  runId?: string;
}

export interface MailboxView {
  agentId: string;
  attention: 'idle' | 'focused';
  focus?: { itemId: string; kind: MailboxItemKind; since: string };
  items: MailboxItemView[];
  counters: { delivered: number; completed: number; merged: number; preempted: number };
}

export interface AgentWorkflowInput {
  agentId: string;
  /** Carried across continue-as-new: counters only (the items live in `mailbox_items`). */
  carry?: { delivered: number; completed: number; merged: number; preempted: number };
}

export const deliverUpdate = defineUpdate<DeliverResult, [DeliverInput]>('deliver');
export const mailboxQuery = defineQuery<MailboxView>('mailbox');

/** Chat reply run (child of the agent workflow). */
export interface ChatRunInput {
  agentId: string;
  itemId: string;
  sessionId: string;
  channel: string;
  from: { type: string; id: string };
  text: string;
  /** The scenario that answers (prompt section, tools, cap); absent in runs recorded before scenarios: chat. */
  scenario?: ConversationScenario;
}

export interface ChatRunResult {
  iterations: number;
  stoppedBy: 'answer' | 'iteration-cap' | 'loop-detector';
  textPreview: string;
}
