import type { MailboxItemRecord } from '../activities/mailbox/mailbox-activities';
import type { MailboxItemKind, MailboxItemView } from './agent-contract';
import {
  MAILBOX_ITEM_PREVIEW_CHARS,
  type MailboxItemStatus,
  type MailboxTriageDecision,
  type TriageItem,
} from './rules/mailbox';

/** A mailbox item as the agent workflow holds it: what triage reads, plus its text and outcome. */
export interface Item extends TriageItem {
  text: string;
  replyTo?: string;
  thread: string;
  result?: string;
  status: MailboxItemStatus;
  decision: MailboxTriageDecision;
  reason: string;
  mergedCount: number;
  runId?: string;
  /** The queued item this one was folded into (a merged item). */
  mergedInto?: string;
  idempotencyKey?: string;
}

/** An item reloaded from PostgreSQL (after continue-as-new). */
export function fromRecord(r: MailboxItemRecord): Item {
  return {
    itemId: r.id,
    kind: r.kind as MailboxItemKind,
    from: r.from,
    channel: r.channel,
    ...(r.taskId ? { taskId: r.taskId } : {}),
    ...(r.replyTo ? { replyTo: r.replyTo } : {}),
    thread: r.thread,
    priority: r.priority,
    receivedAtMs: Date.parse(r.receivedAt),
    text: r.text,
    status: r.status as MailboxItemStatus,
    decision: r.decision as MailboxTriageDecision,
    reason: r.reason,
    mergedCount: r.mergedCount ?? 0,
  };
}

/** What the `mailbox` query shows of an item. */
export function view(i: Item): MailboxItemView {
  return {
    itemId: i.itemId,
    kind: i.kind,
    from: i.from,
    channel: i.channel,
    priority: i.priority,
    status: i.status,
    decision: i.decision,
    reason: i.reason,
    preview: i.text.slice(0, MAILBOX_ITEM_PREVIEW_CHARS),
    mergedCount: i.mergedCount,
    receivedAt: new Date(i.receivedAtMs).toISOString(),
    thread: i.thread,
    ...(i.replyTo ? { replyTo: i.replyTo } : {}),
    ...(i.result ? { result: i.result } : {}),
    ...(i.runId ? { runId: i.runId } : {}),
  };
}
