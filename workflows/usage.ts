/**
 * Token and cost totals, the one unit every part of the contract counts spend in. Its own module so the
 * task and sub-agent contracts can both use it without importing each other; `contract.ts` re-exports it.
 */
export interface UsageTotals {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  costUsd: number;
}

export const ZERO_USAGE_TOTALS: UsageTotals = {
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  costUsd: 0,
};
