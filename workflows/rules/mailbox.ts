/**
 * The mailbox's pure rules: item priorities, what merges at delivery, what interrupts
 * the current work, what waits, and the order items are picked in. Used by the agent workflow.
 */
import { MAILBOX_PRIORITIES, type DeliverInput, type MailboxItemKind } from '../agent-contract';

export {
  MAILBOX_PRIORITIES,
  type MailboxItemStatus,
  type MailboxPriorityName,
  type MailboxTriageDecision,
} from '../agent-contract';

/** A delivery's text is capped: larger content belongs in a file or a task description. */
export const MAILBOX_TEXT_MAX_CHARS = 32_000;
/** Preview kept in the `mailbox` query (item preview 120 chars). */
export const MAILBOX_ITEM_PREVIEW_CHARS = 120;
/** Seed: merged content is joined with this separator. */
export const MAILBOX_MERGE_SEPARATOR = '\n\n---\n\n';
/** Seed: informational items older than 4 h are dropped before triage. */
export const MAILBOX_INFORMATIONAL_TTL_MS = 4 * 60 * 60_000;
/** Items kept in the workflow's memory for the `mailbox` query; older finished ones are in PostgreSQL only. */
export const MAILBOX_VIEW_MAX_ITEMS = 100;

interface KindRule {
  /** The design's item type for this kind. */
  seedType: string;
  priority: number;
  /** The item asks for an LLM run (false: recorded and seen by the heartbeat, no run). */
  invokesLlm: boolean;
  /** A running item of this kind may be preempted (chat honours merge only). */
  preemptable: boolean;
  user: boolean;
  system: boolean;
}

/** Seed MAILBOX_TYPE_REGISTRY, mapped onto the contract's kinds. */
export const MAILBOX_KIND_RULES: Record<MailboxItemKind, KindRule> = {
  chat: { seedType: 'human_chat', priority: 0, invokesLlm: true, preemptable: false, user: true, system: false },
  mention: { seedType: 'mention', priority: 1, invokesLlm: true, preemptable: false, user: true, system: false },
  message: { seedType: 'a2a_message', priority: 2, invokesLlm: true, preemptable: true, user: false, system: false },
  // Ours: the design only live-injects a comment; here it also gets a threaded answer, so it runs the LLM.
  comment: { seedType: 'task_comment', priority: 2, invokesLlm: true, preemptable: true, user: false, system: false },
  task: {
    seedType: 'task_status_update',
    priority: 1,
    invokesLlm: false,
    preemptable: true,
    user: false,
    system: true,
  },
  notification: {
    seedType: 'system_event',
    priority: 1,
    invokesLlm: false,
    preemptable: true,
    user: false,
    system: true,
  },
};

export interface TriageItem {
  itemId: string;
  kind: MailboxItemKind;
  from: { type: string; id: string };
  channel: string;
  taskId?: string;
  priority: number;
  receivedAtMs: number;
}

export function itemPriority(input: Pick<DeliverInput, 'kind' | 'priority'>): number {
  return input.priority !== undefined ? MAILBOX_PRIORITIES[input.priority] : MAILBOX_KIND_RULES[input.kind].priority;
}

const isUser = (i: TriageItem): boolean => MAILBOX_KIND_RULES[i.kind].user && i.from.type === 'human';

/**
 * Seed heuristic rules, first match wins, for an item arriving while `current` is being processed:
 * R0 same human, same channel, chat after chat → merge; R1 user interaction over non-user work →
 * preempt; R1.5 A2A over background work → preempt; R2 comment on the focused task → merge; R4 a
 * critical item over a non-critical one → preempt; R6 strictly higher priority → preempt; R8 same
 * priority over a system item → preempt; R9 mention over normal-or-lower work → preempt; otherwise
 * continue. A chat run honours merge only, so a preempt of a chat becomes `continue`.
 */
export function interruptDecision(
  current: TriageItem,
  incoming: TriageItem,
): { decision: 'merge' | 'preempt' | 'continue'; rule: string } {
  const decide = (): { decision: 'merge' | 'preempt' | 'continue'; rule: string } => {
    if (
      current.kind === 'chat' &&
      incoming.kind === 'chat' &&
      current.from.id === incoming.from.id &&
      current.channel === incoming.channel
    )
      return { decision: 'merge', rule: 'R0' };
    if (isUser(incoming) && !isUser(current)) return { decision: 'preempt', rule: 'R1' };
    if (incoming.kind === 'message' && current.priority >= MAILBOX_PRIORITIES.background)
      return { decision: 'preempt', rule: 'R1.5' };
    if (incoming.kind === 'comment' && incoming.taskId !== undefined && incoming.taskId === current.taskId)
      return { decision: 'merge', rule: 'R2' };
    if (incoming.priority === 0 && current.priority !== 0) return { decision: 'preempt', rule: 'R4' };
    if (incoming.priority < current.priority) return { decision: 'preempt', rule: 'R6' };
    if (incoming.priority === current.priority && MAILBOX_KIND_RULES[current.kind].system)
      return { decision: 'preempt', rule: 'R8' };
    if (incoming.kind === 'mention' && current.priority >= MAILBOX_PRIORITIES.normal)
      return { decision: 'preempt', rule: 'R9' };
    return { decision: 'continue', rule: 'none' };
  };
  const result = decide();
  if (result.decision === 'preempt' && !MAILBOX_KIND_RULES[current.kind].preemptable)
    return { decision: 'continue', rule: `${result.rule} (chat honours merge only)` };
  return result;
}

/**
 * Enqueue-time dedup: a queued item of the same group absorbs the new one. Groups: comments by
 * task, agent messages by channel, a human's chat by channel (R0). Notifications and task items are
 * never merged. Returns the queued item to merge into, if any.
 */
export function mergeTarget<T extends TriageItem>(queued: T[], incoming: TriageItem): T | undefined {
  return queued.find((q) => {
    if (q.kind !== incoming.kind) return false;
    switch (incoming.kind) {
      case 'comment':
        return incoming.taskId !== undefined && q.taskId === incoming.taskId;
      case 'message':
      case 'chat':
        return q.channel === incoming.channel && q.from.id === incoming.from.id;
      default:
        return false;
    }
  });
}

/** The next item to work on: highest priority (lowest number), then oldest. */
export function nextItem<T extends TriageItem>(queued: T[]): T | undefined {
  return [...queued].sort((a, b) => a.priority - b.priority || a.receivedAtMs - b.receivedAtMs)[0];
}

/** Informational items (no LLM run) older than 4 h are dropped instead of handled. */
export function isStaleInformational(item: TriageItem, nowMs: number): boolean {
  return !MAILBOX_KIND_RULES[item.kind].invokesLlm && nowMs - item.receivedAtMs > MAILBOX_INFORMATIONAL_TTL_MS;
}

/** Channel names: `dm:<key>`, `task:<taskId>` or `group:<name>` (a group created beforehand). */
export const CHANNEL_PATTERN = /^(dm|task):[A-Za-z0-9._:@-]{1,200}$|^group:[A-Za-z0-9._-]{1,100}$/;

/** A delivery's idempotency key is an index key, not content: the HTTP API's scoped keys stay far below this. */
export const DELIVERY_IDEMPOTENCY_KEY_MAX_CHARS = 600;

/** Why a delivery is refused, in words the sender can act on; undefined when it is valid. */
export function deliveryProblem(input: DeliverInput): string | undefined {
  if (typeof input !== 'object' || input === null) return 'deliver expects an object { kind, from, text, ... }';
  if (!(input.kind in MAILBOX_KIND_RULES))
    return `unknown kind ${JSON.stringify(input.kind)}: use one of ${Object.keys(MAILBOX_KIND_RULES).join(', ')}`;
  if (
    !input.from ||
    !['human', 'agent', 'system'].includes(input.from.type) ||
    typeof input.from.id !== 'string' ||
    !input.from.id.trim()
  ) {
    return 'from must be { type: "human" | "agent" | "system", id: <non-empty string> }';
  }
  if (typeof input.text !== 'string' || !input.text.trim()) return 'text is empty: there is nothing to deliver';
  if (input.text.length > MAILBOX_TEXT_MAX_CHARS)
    return `text is ${input.text.length} characters; the limit is ${MAILBOX_TEXT_MAX_CHARS} (put long content in a file or a task)`;
  if (input.text.includes('\u0000')) return 'text contains a NUL character (U+0000), which cannot be stored: remove it';
  if (input.channel !== undefined && !CHANNEL_PATTERN.test(input.channel)) {
    return `unknown channel ${JSON.stringify(input.channel)}: use "dm:<key>", "task:<taskId>" or "group:<name>"`;
  }
  if (input.priority !== undefined && !(input.priority in MAILBOX_PRIORITIES))
    return `unknown priority ${JSON.stringify(input.priority)}: use one of ${Object.keys(MAILBOX_PRIORITIES).join(', ')}`;
  if (
    input.idempotencyKey !== undefined &&
    (typeof input.idempotencyKey !== 'string' ||
      !input.idempotencyKey ||
      input.idempotencyKey.length > DELIVERY_IDEMPOTENCY_KEY_MAX_CHARS ||
      input.idempotencyKey.includes('\u0000'))
  )
    return `idempotencyKey must be a string of 1 to ${DELIVERY_IDEMPOTENCY_KEY_MAX_CHARS} characters without NUL`;
  // A task item with a taskId reports on that task; without one it asks the agent to start a task.
  if (input.kind === 'comment' && !input.taskId) return 'a comment item needs taskId';
  return undefined;
}
