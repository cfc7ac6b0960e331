/**
 * Priority, one vocabulary. Tasks are stored, started and listed on one four-level scale; the other
 * scales (the prompt's task board, notifications) are defined here beside it, with the mapping from a
 * stored value to each, so a level is added or renamed in one place. The mailbox's numeric scale is
 * the agent contract's `MAILBOX_PRIORITIES` (0 most urgent): it ranks deliveries, not tasks.
 */

/** A task's priority: what `taskWorkflow`, the client, the API and the task tools accept. */
export const TASK_PRIORITIES = ['low', 'medium', 'high', 'urgent'] as const;
export type TaskPriority = (typeof TASK_PRIORITIES)[number];

/**
 * The prompt's task board: the task scale plus `critical`, which rows written outside the task
 * contract (by hand, or imported) may carry; it is shown as is rather than folded into `urgent`.
 */
export const PROMPT_PRIORITIES = ['critical', 'urgent', 'high', 'medium', 'low'] as const;
export type PromptPriority = (typeof PROMPT_PRIORITIES)[number];

/** A stored value as the prompt shows it: an unknown one reads as `medium` (the default), never dropped. */
export function promptPriority(stored: string): PromptPriority {
  return PROMPT_PRIORITIES.find((level) => level === stored) ?? 'medium';
}

/** Board order, most pressing first: `critical` ranks with `urgent`. */
export const PRIORITY_RANK: Record<PromptPriority, number> = { critical: 0, urgent: 0, high: 1, medium: 2, low: 3 };

/** A notification's urgency for the human it goes to (`notify_user`, the notifications table). */
export const NOTIFICATION_PRIORITIES = ['low', 'normal', 'high', 'urgent'] as const;
export type NotificationPriority = (typeof NOTIFICATION_PRIORITIES)[number];
