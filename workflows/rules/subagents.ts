/**
 * Sub-agents: the limits, how a spawn's iteration allowance and a parent's remaining
 * budget are shared among its children, and the text the parent's tool call gets back. Pure; used by
 * the round workflow, the sub-agent workflow, the tools and the tests.
 */

/** At most this many sub-agents run at once from one call; more is a tool error and nothing starts. */
export const SUBAGENT_MAX_PARALLEL = 10;
/** LLM retries of a sub-agent's step after the first attempt: 1 + 2 = 3 attempts. */
export const SUBAGENT_MAX_LLM_RETRIES = 2;
/** First retry delay of a sub-agent's LLM step, doubling after. */
export const SUBAGENT_RETRY_BASE_MS = 2_000;
/** The task as the parent's result and the UI show it. */
export const SUBAGENT_TASK_PREVIEW_CHARS = 500;
/** A sub-agent's last reasoning text when it stops at its iteration cap (the "thinking" preview). */
export const SUBAGENT_THINKING_PREVIEW_CHARS = 1_000;
/** A finished sub-agent's answer as the parent's tool result carries it. */
export const SUBAGENT_RESULT_PREVIEW_CHARS = 500;
/** A failed sub-agent's error as the parent's tool result carries it. */
export const SUBAGENT_ERROR_PREVIEW_CHARS = 500;
/** The whole aggregated result of one spawn call, as one tool-result entry (the log entry). */
export const SUBAGENT_LOG_ENTRY_CHARS = 10_000;
/** Tool iterations of all sub-agents of one call together (the reference code's aggregate cap). */
export const SUBAGENT_MAX_AGGREGATE_ITERATIONS = 100;
/** Tool iterations of one sub-agent at most, even alone: as many as a heartbeat gets. */
export const SUBAGENT_MAX_TOOL_ITERATIONS = 30;
/**
 * Task plus context of one sub-agent, in characters: both travel in the child workflow's input, so ten
 * of them stay far below Temporal's 2 MB payload limit (and its 256 KB warning).
 */
export const SUBAGENT_BRIEF_MAX_CHARS = 10_000;

/** Each child's share of the aggregate iteration allowance (at least 1, at most the single cap). */
export function subagentIterationCap(children: number): number {
  return Math.max(
    1,
    Math.min(SUBAGENT_MAX_TOOL_ITERATIONS, Math.floor(SUBAGENT_MAX_AGGREGATE_ITERATIONS / Math.max(1, children))),
  );
}

/** What one sub-agent is asked to do. */
export interface SubagentBrief {
  task: string;
  context?: string;
}

/** The briefs of a validated spawn call (`spawn_subagent` or `spawn_subagents`), in order. */
export function subagentBriefs(tool: string, args: unknown): SubagentBrief[] {
  const list =
    tool === 'spawn_subagents' ? (args as { subagents: SubagentBrief[] }).subagents : [args as SubagentBrief];
  return list.map((b) => ({ task: b.task, ...(b.context?.trim() ? { context: b.context } : {}) }));
}

/** One child's outcome as the parent's tool result reports it. */
export type SubagentReport =
  | {
      workflowId: string;
      task: string;
      status: 'completed';
      result: string;
      iterations: number;
      capped: boolean;
      costUsd: number;
    }
  | { workflowId: string; task: string; status: 'failed' | 'stopped'; error: string; costUsd: number };

export function preview(text: string, max: number): string {
  const t = text.trim();
  return t.length <= max ? t : `${t.slice(0, max - 1)}…`;
}

// ---- the cost governor down the tree -------------------------------------------------------------

/** Spend of one node of a task's tree (the round or one sub-agent), by workflow id. */
export interface BudgetNode {
  workflowId: string;
  spentUsd: number;
  /** The node's own cap: the tree's limit for the round, a share of what remained for a child. */
  limitUsd: number | null;
  state: 'running' | 'held' | 'completed' | 'failed' | 'stopped';
}

/** Shares of the remaining budget the parent keeps when it hands shares to children: it must still read their results and finish. */
export const PARENT_RESERVED_SHARES = 1;

/**
 * Each of `children` sub-agents may spend an equal share of what the tree has left, one share kept for
 * the parent, so together they can never take the tree past its limit. Without a limit there is no
 * share (null).
 */
export function childBudgetShare(limitUsd: number | null, treeSpentUsd: number, children: number): number | null {
  if (limitUsd === null) return null;
  return Math.max(0, limitUsd - treeSpentUsd) / (Math.max(0, children) + PARENT_RESERVED_SHARES);
}

/** Total spend of the tree: the round's own calls plus every sub-agent's. */
export function treeSpentUsd(nodes: readonly BudgetNode[]): number {
  return nodes.reduce((sum, n) => sum + n.spentUsd, 0);
}

/** True when the tree has reached its limit: no node may start another LLM call until a human decides. */
export function budgetReached(limitUsd: number | null, spentUsd: number): boolean {
  return limitUsd !== null && spentUsd >= limitUsd;
}

/**
 * A tree report once its round has ended: a node the report still shows running or held ended with the
 * round (`outcome`), so a finished round is never listed as running. The spend is unchanged.
 */
export function settleBudgetReport<T extends { held: boolean; nodes: readonly BudgetNode[] }>(
  report: T,
  outcome: 'completed' | 'failed' | 'stopped',
): T {
  return {
    ...report,
    held: false,
    nodes: report.nodes.map((n) => (n.state === 'running' || n.state === 'held' ? { ...n, state: outcome } : n)),
  };
}

/**
 * What the running round's tree has spent: its own calls and its sub-agents' as they spend (the round's
 * own usage counts the sub-agents only once they have all answered). A report with a cost budget also
 * carries the earlier rounds as a node named `earlierNodeId`; that part is not this round's.
 */
export function roundTreeCostUsd(
  report: { spentUsd: number; nodes: readonly BudgetNode[] },
  earlierNodeId: string,
): number {
  const earlier = report.nodes.find((n) => n.workflowId === earlierNodeId)?.spentUsd ?? 0;
  return Math.max(0, report.spentUsd - earlier);
}

/** A round's usage with its cost raised to what its tree has spent so far (see `roundTreeCostUsd`). */
export function withTreeCost<T extends { costUsd: number }>(
  usage: T,
  report: { spentUsd: number; nodes: readonly BudgetNode[] } | undefined,
  earlierNodeId: string,
): T {
  if (!report) return usage;
  return {
    ...usage,
    costUsd: Math.max(usage.costUsd, Math.round(roundTreeCostUsd(report, earlierNodeId) * 1e6) / 1e6),
  };
}
