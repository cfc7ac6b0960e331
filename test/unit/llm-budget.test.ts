import { ApplicationFailure } from '@temporalio/common';
import {
  BUDGET_EXCEEDED_REASON,
  BUDGET_EXCEEDED_TYPE,
  BUDGET_THRESHOLD_PERCENTS,
  budgetExceededFailure,
  budgetPeriodStart,
  checkBudget,
  crossedThresholds,
  estimateCallCostUsd,
  estimateCallTokens,
  RESPONSE_TOKEN_RESERVE,
} from '../../activities/llm/budget';

describe('pre-flight estimate (seed D2 §5)', () => {
  it('is system + user + 1,500 reserved for the answer', () => {
    expect(RESPONSE_TOKEN_RESERVE).toBe(1_500);
    expect(estimateCallTokens(8_000, 2_000)).toBe(11_500);
    expect(estimateCallTokens(0, 0)).toBe(1_500);
  });

  it('costs the prompt at the input price and the reserve at the output price', () => {
    // (8,000 + 2,000) × $3 + 1,500 × $15, per million.
    expect(estimateCallCostUsd(8_000, 2_000, 'claude-sonnet-4-5')).toBeCloseTo(0.0525, 10);
    expect(estimateCallCostUsd(8_000, 2_000, 'demo-offline')).toBe(0);
    // A prompt past GPT-5.4's 272K threshold is priced in the long-prompt band: $5 in, $22.50 out.
    expect(estimateCallCostUsd(250_000, 30_000, 'gpt-5.4')).toBeCloseTo((280_000 * 5 + 1_500 * 22.5) / 1e6, 12);
  });
});

describe('checkBudget', () => {
  it('passes when the estimate fits in what remains', () => {
    expect(checkBudget({ unit: 'usd', spent: 4, limit: 5, estimate: 0.5, allowOverage: false })).toEqual({
      ok: true,
      remaining: 1,
      overage: false,
    });
    // Exactly the remainder still fits.
    expect(checkBudget({ unit: 'usd', spent: 4, limit: 5, estimate: 1, allowOverage: false }).ok).toBe(true);
  });

  it('blocks when the estimate would exceed what remains and overage is not allowed', () => {
    expect(checkBudget({ unit: 'usd', spent: 4.5, limit: 5, estimate: 0.6, allowOverage: false })).toEqual({
      ok: false,
      reason: 'Budget exceeded',
      unit: 'usd',
      spent: 4.5,
      limit: 5,
      estimate: 0.6,
      remaining: 0.5,
    });
    expect(
      checkBudget({ unit: 'tokens', spent: 99_000, limit: 100_000, estimate: 11_500, allowOverage: false }).ok,
    ).toBe(false);
    expect(checkBudget({ unit: 'usd', spent: 6, limit: 5, estimate: 0.01, allowOverage: false }).ok).toBe(false);
    expect(checkBudget({ unit: 'usd', spent: 0, limit: 0, estimate: 0.01, allowOverage: false }).ok).toBe(false);
  });

  it('lets the call through with allowOverage, flagged as overage', () => {
    expect(checkBudget({ unit: 'usd', spent: 4.5, limit: 5, estimate: 0.6, allowOverage: true })).toEqual({
      ok: true,
      remaining: 0.5,
      overage: true,
    });
  });

  it('passes everything when no budget is set', () => {
    expect(checkBudget({ unit: 'usd', spent: 1e9, limit: null, estimate: 1, allowOverage: false })).toEqual({
      ok: true,
      remaining: null,
      overage: false,
    });
    expect(checkBudget({ unit: 'usd', spent: 1e9, limit: undefined, estimate: 1, allowOverage: false }).ok).toBe(true);
  });
});

describe('budgetExceededFailure', () => {
  it('is non-retryable, typed BudgetExceeded, message starting "Budget exceeded"', () => {
    const blocked = checkBudget({ unit: 'usd', spent: 4.5, limit: 5, estimate: 0.6, allowOverage: false });
    if (blocked.ok) throw new Error('expected a block');
    const failure = budgetExceededFailure(blocked, { agentId: 'agent-1', period: 'month' });
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(BUDGET_EXCEEDED_TYPE).toBe('BudgetExceeded');
    expect(BUDGET_EXCEEDED_REASON).toBe('Budget exceeded');
    expect(failure.type).toBe('BudgetExceeded');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toBe(
      'Budget exceeded: this call may need up to $0.6000 but only $0.5000 of the $5.0000 per month budget remains ($4.5000 spent)',
    );
    expect(failure.details).toEqual([
      { agentId: 'agent-1', period: 'month', unit: 'usd', spent: 4.5, limit: 5, estimate: 0.6 },
    ]);
  });

  it('speaks tokens for a token budget and never shows a negative remainder', () => {
    const blocked = checkBudget({
      unit: 'tokens',
      spent: 120_000,
      limit: 100_000,
      estimate: 11_500,
      allowOverage: false,
    });
    if (blocked.ok) throw new Error('expected a block');
    expect(budgetExceededFailure(blocked).message).toBe(
      'Budget exceeded: this call may need up to 11,500 tokens but only 0 tokens of the 100,000 tokens budget remains (120,000 tokens spent)',
    );
  });
});

describe('crossedThresholds', () => {
  it('pins the thresholds', () => {
    expect(BUDGET_THRESHOLD_PERCENTS).toEqual([75, 90, 100]);
  });

  it('reports each threshold crossed by this call, lowest first', () => {
    expect(crossedThresholds(70, 76, 100)).toEqual([75]);
    expect(crossedThresholds(70, 95, 100)).toEqual([75, 90]);
    expect(crossedThresholds(10, 150, 100)).toEqual([75, 90, 100]);
    expect(crossedThresholds(95, 100, 100)).toEqual([100]);
  });

  it('counts landing exactly on a threshold as crossing it, and does not fire it again', () => {
    expect(crossedThresholds(74.99, 75, 100)).toEqual([75]);
    expect(crossedThresholds(75, 80, 100)).toEqual([]);
    expect(crossedThresholds(100, 120, 100)).toEqual([]);
  });

  it('reports nothing without a budget or without new spending', () => {
    expect(crossedThresholds(0, 200, null)).toEqual([]);
    expect(crossedThresholds(0, 200, 0)).toEqual([]);
    expect(crossedThresholds(80, 80, 100)).toEqual([]);
  });

  it('works for dollar budgets', () => {
    expect(crossedThresholds(3.7, 3.76, 5)).toEqual([75]);
  });
});

describe('budgetPeriodStart', () => {
  // Wednesday 2026-03-18 14:37:12.345 UTC
  const now = Date.UTC(2026, 2, 18, 14, 37, 12, 345);
  it.each([
    ['hour', Date.UTC(2026, 2, 18, 14)],
    ['day', Date.UTC(2026, 2, 18)],
    ['week', Date.UTC(2026, 2, 16)],
    ['month', Date.UTC(2026, 2, 1)],
    ['lifetime', 0],
  ] as const)('%s', (period, start) => {
    expect(budgetPeriodStart(period, now)).toBe(start);
  });

  it('starts a week on Monday even on Sunday', () => {
    expect(budgetPeriodStart('week', Date.UTC(2026, 2, 22, 23))).toBe(Date.UTC(2026, 2, 16));
    expect(budgetPeriodStart('week', Date.UTC(2026, 2, 16, 0))).toBe(Date.UTC(2026, 2, 16));
  });
});
