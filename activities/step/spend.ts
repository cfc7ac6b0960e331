/**
 * What an LLM step spends: its usage as stored, the budget guard before the call, and the
 * threshold events after it.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import type { UsageTotals } from '../../workflows/contract';
import type { ChatResult } from '../llm/types';
import {
  budgetExceededFailure,
  budgetPeriodStart,
  checkBudget,
  crossedThresholds,
  estimateCallCostUsd,
} from '../llm/budget';
import { usageTotals } from '../llm/usage';
import type { AgentConfig } from '../store/agents';
import { addTaskEvent } from '../store/tasks';
import type { LlmStepInput } from './types';

/** `llm_calls.cost_usd` is numeric(14, 6): the cost as PostgreSQL stores it and a read-back would return it. */
const COST_USD_SCALE = 1e6;

export function storedCostUsd(cost: number): number {
  return Number((Math.round(cost * COST_USD_SCALE) / COST_USD_SCALE).toFixed(6));
}

export function usageOf(result: ChatResult): Omit<UsageTotals, 'costUsd'> {
  const { inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens } = result.usage;
  return { inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens };
}

/** A step's usage: its main call plus every auxiliary call (summaries, cognitive preparation) recorded under its key. */
export async function stepUsage(db: Kysely<Database>, sessionId: string, key: string): Promise<UsageTotals> {
  const t = await usageTotals(db, { step: { sessionId, key } });
  return {
    inputTokens: t.inputTokens,
    outputTokens: t.outputTokens,
    cacheReadTokens: t.cacheReadTokens,
    cacheWriteTokens: t.cacheWriteTokens,
    costUsd: t.costUsd,
  };
}

async function spentSince(db: Kysely<Database>, agentId: string, periodStart: number): Promise<number> {
  return (await usageTotals(db, { agentId, since: new Date(periodStart) })).costUsd;
}

/**
 * The budget guard, before any provider request: what the agent spent this period plus this
 * call's estimate (system + messages + 1,500 reserved for the answer) must fit its budget unless
 * overage is allowed. Over budget → a "Budget exceeded" event and a non-retryable failure.
 */
export async function guardBudget(
  db: Kysely<Database>,
  input: LlmStepInput,
  config: AgentConfig,
  systemTokens: number,
  userTokens: number,
  model: string,
): Promise<{ before: number; limit: number; periodStart: number } | undefined> {
  if (config.budgetUsd === undefined) return undefined;
  const period = config.budgetPeriod ?? 'month';
  const periodStart = budgetPeriodStart(period, Date.now());
  const before = await spentSince(db, input.agentId, periodStart);
  const check = checkBudget({
    unit: 'usd',
    spent: before,
    limit: config.budgetUsd,
    estimate: estimateCallCostUsd(systemTokens, userTokens, model),
    allowOverage: config.allowBudgetOverage === true,
  });
  if (!check.ok) {
    const failure = budgetExceededFailure(check, { agentId: input.agentId, period });
    if (input.taskId)
      await addTaskEvent(
        db,
        input.taskId,
        'budget-exceeded',
        { message: failure.message },
        `budget-exceeded:${input.sessionId}:${input.attempt}:${input.turn}`,
      );
    throw failure;
  }
  return { before, limit: config.budgetUsd, periodStart };
}

/** After the call: a task event for each budget threshold (75 / 90 / 100 %) this call crossed. */
export async function recordCrossedThresholds(
  db: Kysely<Database>,
  agentId: string,
  taskId: string,
  spent: { before: number; limit: number; periodStart: number },
): Promise<void> {
  const after = await spentSince(db, agentId, spent.periodStart);
  for (const percent of crossedThresholds(spent.before, after, spent.limit)) {
    await addTaskEvent(
      db,
      taskId,
      'budget-threshold-crossed',
      { percent, limitUsd: spent.limit, spentUsd: after },
      `budget:${spent.periodStart}:${percent}`,
    );
  }
}
