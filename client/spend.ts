/**
 * What a task has spent, as the usage rows (`llm_calls`) record it: the one source of every view of
 * spend (status, budget, usage; the API and the MCP endpoint read them through the client). A row is
 * written with each provider call, so the rows are never behind. The workflows keep their own running
 * figures to decide when a tree holds; those lag (a sub-agent reports by signal, a round's last
 * progress is not re-sent when it ends, a cancelled round's usage never returns), so no view shows them.
 */
import type { Kysely } from 'kysely';
import { usageTotals } from '../activities/llm/usage';
import { budgetTreeCostUsd } from '../activities/store/task-budget';
import type { Database } from '../schema/database';
import type { TaskStatus, UsageTotals } from '../workflows/contract';
import type { BudgetReport } from '../workflows/subagent-contract';

export interface RecordedSpend {
  /** The task's own calls, its sub-agents' included: `/usage`, and the status's `usage`. */
  usage: UsageTotals;
  /**
   * What the task's budget counts: `usage` plus the calls of every task created under its budget
   * (`tasks.budget_parent_id`, see activities/store/task-budget.ts). Equal to `usage.costUsd` for a task
   * that created none.
   */
  budgetCostUsd: number;
}

export async function recordedSpend(db: Kysely<Database>, taskId: string): Promise<RecordedSpend> {
  const [{ calls: _calls, ...usage }, budgetCostUsd] = await Promise.all([
    usageTotals(db, { taskId }),
    budgetTreeCostUsd(db, taskId),
  ]);
  return { usage, budgetCostUsd };
}

/** A budget report with the recorded spend as its total (its nodes, limit and hold as the workflow reported them). */
export function withRecordedBudgetSpend(report: BudgetReport, spend: RecordedSpend): BudgetReport {
  return { ...report, spentUsd: spend.budgetCostUsd };
}

/** A status whose usage, and whose budget's total, are the recorded ones. */
export function withRecordedSpend(status: TaskStatus, spend: RecordedSpend): TaskStatus {
  return {
    ...status,
    usage: spend.usage,
    ...(status.budget ? { budget: withRecordedBudgetSpend(status.budget, spend) } : {}),
  };
}
