/**
 * The spend of a task's budget tree over time, per part of the tree: the task's own rounds, each of its
 * sub-agents, each subtask's subtree (along `budget_parent_id`), against the budget. Pure; the chart is
 * spend-chart.ts.
 */
import type { RunRecords, SpendRecord } from '../activities/store/run-records';
import { taskWorkflowId } from '../workflows/contract';
import type { BudgetNode } from '../workflows/rules/subagents';
import { groupBy, subagentWorkflow } from './run-viewer-calls';

export interface SpendSeries {
  /** What the series counts: the task's own calls, a sub-agent's, a subtask's subtree. */
  label: string;
  /** Cumulative spend after each call. */
  points: Array<{ at: Date; totalUsd: number }>;
  spentUsd: number;
  /** Its own cap or grant, when it has one. */
  limitUsd: number | null;
}

export interface SpendView {
  limitUsd: number | null;
  spentUsd: number;
  series: SpendSeries[];
  /** The whole tree's cumulative spend. */
  total: Array<{ at: Date; totalUsd: number }>;
}

/** The budget as the task's workflow reports it (limit, per-node caps), when it answered. */
export interface BudgetFacts {
  limitUsd: number | null;
  nodes: readonly BudgetNode[];
}

export function spendView(records: RunRecords, budget?: BudgetFacts): SpendView {
  const root = records.task.id;
  const parentOf = new Map(records.tree.map((t) => [t.id, t.budgetParentId]));
  /** The direct child of the root a task's subtree hangs from (the root for its own calls). */
  const branchOf = (taskId: string): string => {
    let id = taskId;
    for (let depth = 0; depth < records.tree.length; depth++) {
      const parent = parentOf.get(id);
      if (!parent || parent === root || id === root) return id;
      id = parent;
    }
    return id;
  };
  const caps = new Map((budget?.nodes ?? []).map((n) => [n.workflowId, n.limitUsd]));
  const seriesKey = (s: SpendRecord): string => {
    const branch = branchOf(s.taskId);
    if (branch !== root) return `task:${branch}`;
    const sub = s.sessionId ? subagentWorkflow(s.sessionId) : undefined;
    return sub ? `sub:${sub}` : 'own';
  };
  const grouped = groupBy(records.spend, seriesKey);
  const series: SpendSeries[] = [...grouped.entries()].map(([key, rows]) => {
    let total = 0;
    const points = rows.map((r) => ({ at: r.at, totalUsd: (total += r.costUsd) }));
    const [kind, id] = [key.slice(0, key.indexOf(':')), key.slice(key.indexOf(':') + 1)];
    const task = records.tree.find((t) => t.id === id);
    return {
      label:
        key === 'own'
          ? 'this task (its rounds)'
          : kind === 'sub'
            ? `sub-agent ${id.slice(taskWorkflowId(root).length + 1)}`
            : `subtask ${task?.title ?? id} (${id})`,
      points,
      spentUsd: total,
      limitUsd: kind === 'sub' ? (caps.get(id) ?? null) : kind === 'task' ? (task?.grantedUsd ?? null) : null,
    };
  });
  series.sort((a, b) => (a.label.startsWith('this task') ? -1 : b.label.startsWith('this task') ? 1 : 0));
  let total = 0;
  const all = records.spend.map((r) => ({ at: r.at, totalUsd: (total += r.costUsd) }));
  return {
    limitUsd: budget?.limitUsd ?? records.task.cost_budget_usd ?? null,
    spentUsd: total,
    series,
    total: all,
  };
}
