/**
 * Budget guard: a pre-flight check before each LLM call and
 * threshold events after it. Pure functions, no I/O and no SDK imports, so the workflow can decide
 * with them too; the caller loads what was spent and records the events.
 *
 * What the budget is: an amount of money (the guard compares estimated cents)
 * owned by an agent, spent over a budget period (hour, day, week, month, or never resetting), not a
 * per-run allowance. Before a call we take an upper bound of its cost: the assembled system message
 * plus the user message plus 1,500 tokens reserved for the answer. If that would exceed what remains
 * of the period's cap and overage is not allowed, the run fails with 'Budget exceeded'. A token cap
 * works the same way for deployments that budget tokens rather than dollars.
 */
import { ApplicationFailure } from '@temporalio/common';
import { lookupModel, pricesForPrompt, TOKENS_PER_MILLION, type ModelInfo } from './catalog';
import { FailureType } from '../../workflows/failure-types';

/** Tokens reserved for the model's answer in the pre-flight estimate. */
export const RESPONSE_TOKEN_RESERVE = 1_500;

/** Budget-usage percentages that emit a threshold event, each once per period. */
export const BUDGET_THRESHOLD_PERCENTS = [75, 90, 100] as const;
export type BudgetThresholdPercent = (typeof BUDGET_THRESHOLD_PERCENTS)[number];

/** The run's error message when the guard blocks it (`errorMessage='Budget exceeded'`). */
export const BUDGET_EXCEEDED_REASON = 'Budget exceeded';
/** `ApplicationFailure.type` of a blocked call; never retried. */
export const BUDGET_EXCEEDED_TYPE = FailureType.BudgetExceeded;

export type BudgetUnit = 'usd' | 'tokens';

/** How often the cap resets; `lifetime` never does (an "unlimited" interval). */
export type BudgetPeriod = 'hour' | 'day' | 'week' | 'month' | 'lifetime';

/** Upper-bound token count of a call: system + user + the answer reserve. */
export function estimateCallTokens(systemTokens: number, userTokens: number): number {
  return systemTokens + userTokens + RESPONSE_TOKEN_RESERVE;
}

/**
 * Upper-bound cost of a call in USD: the whole prompt at the uncached input price (cache hits only
 * make it cheaper) plus the answer reserve at the output price.
 */
export function estimateCallCostUsd(systemTokens: number, userTokens: number, model: string | ModelInfo): number {
  const info = typeof model === 'string' ? lookupModel(model) : model;
  const prices = pricesForPrompt(info, systemTokens + userTokens);
  return ((systemTokens + userTokens) * prices.input + RESPONSE_TOKEN_RESERVE * prices.output) / TOKENS_PER_MILLION;
}

export interface BudgetCheckInput {
  unit: BudgetUnit;
  /** Already spent in the current period. */
  spent: number;
  /** The period's cap; `null` or `undefined` means no budget is set. */
  limit: number | null | undefined;
  /** Upper-bound estimate of this call (`estimateCallCostUsd` or `estimateCallTokens`). */
  estimate: number;
  /** Let the call through even when it may cross the cap. */
  allowOverage: boolean;
}

export type BudgetCheckResult =
  | {
      ok: true;
      /** Left before this call; `null` without a budget. */
      remaining: number | null;
      /** True when the call may take spending past the cap (only possible with `allowOverage`). */
      overage: boolean;
    }
  | {
      ok: false;
      reason: typeof BUDGET_EXCEEDED_REASON;
      unit: BudgetUnit;
      spent: number;
      limit: number;
      estimate: number;
      remaining: number;
    };

/** Pre-flight check: blocks when the estimate exceeds what remains and overage is not allowed. */
export function checkBudget(input: BudgetCheckInput): BudgetCheckResult {
  const { unit, spent, limit, estimate, allowOverage } = input;
  if (limit === null || limit === undefined) return { ok: true, remaining: null, overage: false };
  const remaining = limit - spent;
  const fits = estimate <= remaining;
  if (fits) return { ok: true, remaining, overage: false };
  if (allowOverage) return { ok: true, remaining, overage: true };
  return { ok: false, reason: BUDGET_EXCEEDED_REASON, unit, spent, limit, estimate, remaining };
}

function formatAmount(unit: BudgetUnit, amount: number): string {
  if (unit === 'tokens') return `${Math.round(amount).toLocaleString('en-US')} tokens`;
  // Sub-cent amounts are common for single calls; 4 decimals keep them visible.
  return `$${amount.toFixed(4)}`;
}

/** The non-retryable failure for a blocked call; its message starts with "Budget exceeded". */
export function budgetExceededFailure(
  blocked: Extract<BudgetCheckResult, { ok: false }>,
  context: { agentId?: string; period?: BudgetPeriod } = {},
): ApplicationFailure {
  const { unit, spent, limit, estimate, remaining } = blocked;
  const period = context.period && context.period !== 'lifetime' ? ` per ${context.period}` : '';
  const message =
    `${BUDGET_EXCEEDED_REASON}: this call may need up to ${formatAmount(unit, estimate)} but only ` +
    `${formatAmount(unit, Math.max(0, remaining))} of the ${formatAmount(unit, limit)}${period} budget remains ` +
    `(${formatAmount(unit, spent)} spent)`;
  return ApplicationFailure.create({
    type: BUDGET_EXCEEDED_TYPE,
    message,
    nonRetryable: true,
    details: [{ ...context, unit, spent, limit, estimate }],
  });
}

/**
 * The thresholds (75 / 90 / 100 % of `limit`) that spending crossed going from `before` to `after`,
 * lowest first. A threshold is crossed when `before` was below it and `after` is at or above it, so
 * each fires once per period as long as `before` is the period's spending before this call.
 */
export function crossedThresholds(
  before: number,
  after: number,
  limit: number | null | undefined,
): BudgetThresholdPercent[] {
  if (limit === null || limit === undefined || limit <= 0 || after <= before) return [];
  return BUDGET_THRESHOLD_PERCENTS.filter((percent) => {
    const level = (limit * percent) / 100;
    return before < level && after >= level;
  });
}

/** Milliseconds in a day, for the weekly period. */
const DAY_MS = 86_400_000;
/** `Date.getUTCDay()` of Monday: budget weeks start on Monday (ISO 8601). */
const MONDAY = 1;
/** Days in a week, to wrap Sunday (0) behind Monday. */
const DAYS_PER_WEEK = 7;

/**
 * Start (epoch ms, UTC) of the budget period containing `now`: the caller sums spending since then.
 * Periods are calendar-aligned in UTC; `lifetime` starts at the epoch.
 */
export function budgetPeriodStart(period: BudgetPeriod, now: number): number {
  const d = new Date(now);
  switch (period) {
    case 'hour':
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), d.getUTCHours());
    case 'day':
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
    case 'week': {
      const midnight = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
      const daysSinceMonday = (d.getUTCDay() - MONDAY + DAYS_PER_WEEK) % DAYS_PER_WEEK;
      return midnight - daysSinceMonday * DAY_MS;
    }
    case 'month':
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
    case 'lifetime':
      return 0;
  }
}
