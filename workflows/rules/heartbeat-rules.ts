/**
 * Heartbeat rules as named constants and pure functions: the tool
 * whitelist, retries, the idle skip, and the schedule's defaults. The heartbeat workflow applies them;
 * the schedule helpers and unit tests read them.
 */

/** A new agent checks in every 30 minutes. */
export const DEFAULT_HEARTBEAT_INTERVAL_MS = 30 * 60_000;
/** Shorter intervals burn tokens on empty check-ins; longer ones go unnoticed for a day. */
export const MIN_HEARTBEAT_INTERVAL_MS = 5 * 60_000;
export const MAX_HEARTBEAT_INTERVAL_MS = 24 * 60 * 60_000;
/** EW: a heartbeat run that takes longer than this is stuck; Temporal times it out. */
export const HEARTBEAT_RUN_TIMEOUT_MS = 30 * 60_000;
/** A failed heartbeat LLM call is retried 3 times (4 attempts: 3 s, 6 s, 12 s). */
export const HEARTBEAT_MAX_RETRIES = 3;
export const HEARTBEAT_RETRY_BASE_MS = 3_000;
/** When nothing changed, the LLM call is skipped at most this many times in a row; then a patrol is forced. */
export const HEARTBEAT_MAX_IDLE_SKIPS = 3;
/** The reply that means "routine heartbeat, nothing notable". */
export const HEARTBEAT_OK = 'HEARTBEAT_OK';
/** The consolidation (daily report + dream) runs once a day at this local hour (once/day). */
export const DEFAULT_CONSOLIDATION_HOUR = 23;

/**
 * The only tools a heartbeat may offer (patrol, don't build). Tools that are not built yet are
 * listed so that they are allowed as soon as they are registered. `edit_agent_file` is the second design's addition:
 * its identity files are updated by the agent in its own check-ins ("1 file edit per idle tick").
 */
export const HEARTBEAT_TOOL_WHITELIST: readonly string[] = [
  'task_list',
  'task_update',
  'task_get',
  'task_note',
  'task_create',
  'file_read',
  'agent_send_message',
  'requirement_propose',
  'requirement_list',
  'memory_save',
  'memory_search',
  'memory_update',
  'update_notebook',
  'update_working_memory',
  'goal_create',
  'goal_update',
  'goal_status',
  'discover_tools',
  'notify_user',
  'request_user_approval',
  'recall_activity',
  'package_list',
  'package_install',
  'edit_agent_file',
  // The reference code adds task_comment: a check-in discusses a task in its thread.
  'task_comment',
];

/** Managers additionally get these in their heartbeat. */
export const HEARTBEAT_MANAGER_TOOLS: readonly string[] = [
  'task_board_health',
  'task_cleanup_duplicates',
  'task_assign',
  'team_status',
  'deliverable_create',
  'deliverable_search',
];

export function isHeartbeatTool(name: string, options: { manager?: boolean } = {}): boolean {
  return (
    HEARTBEAT_TOOL_WHITELIST.includes(name) || (options.manager === true && HEARTBEAT_MANAGER_TOOLS.includes(name))
  );
}

export interface IdleState {
  /** Fingerprint of tasks, mailbox and goals recorded by the previous heartbeat, if any. */
  fingerprint?: string;
  /** How many heartbeats in a row were skipped before this one. */
  skippedInRow: number;
}

/**
 * When the fingerprint is unchanged since the last heartbeat, skip the LLM call,
 * at most `HEARTBEAT_MAX_IDLE_SKIPS` times in a row; the next one patrols anyway.
 */
export function idleSkipDecision(
  previous: IdleState | undefined,
  fingerprint: string,
): { skip: boolean; skippedInRow: number } {
  if (!previous?.fingerprint || previous.fingerprint !== fingerprint) return { skip: false, skippedInRow: 0 };
  if (previous.skippedInRow >= HEARTBEAT_MAX_IDLE_SKIPS) return { skip: false, skippedInRow: 0 };
  return { skip: true, skippedInRow: previous.skippedInRow + 1 };
}

/** A reply that is (only) HEARTBEAT_OK: the model found nothing notable. */
export function isHeartbeatOk(text: string): boolean {
  const t = text.trim();
  return t === HEARTBEAT_OK || t.startsWith(HEARTBEAT_OK) || t.endsWith(HEARTBEAT_OK);
}

export function clampHeartbeatInterval(ms: number): number {
  if (!Number.isFinite(ms)) throw new Error(`heartbeat interval must be a number of milliseconds, got ${ms}`);
  if (ms < MIN_HEARTBEAT_INTERVAL_MS || ms > MAX_HEARTBEAT_INTERVAL_MS) {
    throw new Error(
      `heartbeat interval must be between ${MIN_HEARTBEAT_INTERVAL_MS / 60_000} minutes and ${MAX_HEARTBEAT_INTERVAL_MS / 3_600_000} hours, got ${ms} ms`,
    );
  }
  return ms;
}

/**
 * A stable phase within the interval for an agent (the first tick is random in [0, interval)),
 * so many agents on the same interval do not all call the LLM at the same second.
 */
export function heartbeatPhaseMs(agentId: string, intervalMs: number): number {
  let h = 2166136261;
  for (let i = 0; i < agentId.length; i++) h = Math.imul(h ^ agentId.charCodeAt(i), 16777619) >>> 0;
  return Math.floor(((h / 2 ** 32) * intervalMs) / 1000) * 1000;
}
