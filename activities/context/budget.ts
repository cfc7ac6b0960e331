/**
 * Token budget arithmetic. Pure and import-free apart from the limits, so a
 * workflow can use it as well as the prepare-messages activity.
 */
import {
  BUDGET_PREFLIGHT_RESPONSE_RESERVE_TOKENS,
  DEFAULT_CONTEXT_WINDOW_TOKENS,
  DEFAULT_MAX_OUTPUT_TOKENS,
  MAX_OUTPUT_WINDOW_FRACTION,
  PER_MESSAGE_CAP_BUDGET_DIVISOR,
  PER_MESSAGE_CAP_MIN_TOKENS,
  SAFETY_MARGIN_MAX_TOKENS,
  SAFETY_MARGIN_WINDOW_FRACTION,
} from './limits';

export interface TokenBudgetInput {
  /** The model's context window; a non-positive value means "unknown" (then 64K is assumed). */
  contextWindow: number;
  /** The model's own max output; a non-positive value means "unknown" (then 16,384 is assumed). */
  modelMaxOutput: number;
  systemTokens: number;
  toolTokens: number;
}

export interface TokenBudget {
  contextWindow: number;
  /** min(model max output, 40% of the window): what the call may generate. */
  maxOutputTokens: number;
  /** min(15% of the window, 30K): headroom for estimation error. */
  safetyMargin: number;
  /** window − system − tools − max output − margin; may be ≤ 0 when the prompt alone overflows. */
  messageBudget: number;
}

/**
 * Example: Claude Sonnet 4 (200K window, 64K output), 9K system, 3K tools →
 * maxOutput = min(64K, 80K) = 64K, margin = min(30K, 30K) = 30K, messages = 200K − 9K − 3K − 64K − 30K = 94K.
 */
export function computeTokenBudget(input: TokenBudgetInput): TokenBudget {
  const contextWindow = positiveOr(input.contextWindow, DEFAULT_CONTEXT_WINDOW_TOKENS);
  const modelMaxOutput = positiveOr(input.modelMaxOutput, DEFAULT_MAX_OUTPUT_TOKENS);
  const maxOutputTokens = Math.min(modelMaxOutput, Math.floor(contextWindow * MAX_OUTPUT_WINDOW_FRACTION));
  const safetyMargin = Math.min(Math.floor(contextWindow * SAFETY_MARGIN_WINDOW_FRACTION), SAFETY_MARGIN_MAX_TOKENS);
  const messageBudget =
    contextWindow - Math.max(0, input.systemTokens) - Math.max(0, input.toolTokens) - maxOutputTokens - safetyMargin;
  return { contextWindow, maxOutputTokens, safetyMargin, messageBudget };
}

/** No single message may exceed max(2000, budget / 8) tokens. */
export function perMessageCap(messageBudget: number): number {
  return Math.max(PER_MESSAGE_CAP_MIN_TOKENS, Math.floor(messageBudget / PER_MESSAGE_CAP_BUDGET_DIVISOR));
}

/** Upper bound of a run's tokens for the budget pre-flight (system + user + 1,500 for the reply). */
export function preflightTokenUpperBound(systemTokens: number, userTokens: number): number {
  return systemTokens + userTokens + BUDGET_PREFLIGHT_RESPONSE_RESERVE_TOKENS;
}

function positiveOr(value: number, fallback: number): number {
  return Number.isFinite(value) && value > 0 ? Math.floor(value) : fallback;
}
