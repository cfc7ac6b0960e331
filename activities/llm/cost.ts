/**
 * Cost of a call from its token usage and the catalogue's list prices.
 *
 * Pure (no SDK imports), so workflows may import it.
 *
 * Usage convention (both adapters must follow it): `inputTokens` counts only the *uncached* input,
 * as Anthropic reports it; cache reads and cache writes are counted separately. OpenAI reports
 * `prompt_tokens` including `cached_tokens`, so its adapter subtracts them.
 */
import {
  ANTHROPIC_CACHE_WRITE_1H_MULTIPLIER,
  ANTHROPIC_CACHE_WRITE_MULTIPLIER,
  lookupModel,
  pricesForPrompt,
  TOKENS_PER_MILLION,
  type ModelInfo,
} from './catalog';
import type { Usage } from './types';

/**
 * USD for one call's usage at the model's list prices (an unknown model uses the catalogue's
 * conservative prices). Per call, because a long prompt can move the whole call into a dearer band:
 * sum the costs of calls, not the usages.
 */
export function costUsd(usage: Usage, model: string | ModelInfo): number {
  const info = typeof model === 'string' ? lookupModel(model) : model;
  const prices = pricesForPrompt(info, usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens);
  // Prices are per million tokens, so this sum is USD × 1,000,000.
  const usdTimesMillion =
    usage.inputTokens * prices.input +
    usage.outputTokens * prices.output +
    usage.cacheReadTokens * prices.cacheRead +
    usage.cacheWriteTokens * prices.cacheWrite +
    oneHourWriteSurcharge(usage, prices.input);
  return usdTimesMillion / TOKENS_PER_MILLION;
}

/** The catalogue prices every cache write at the 5-minute rate; 1-hour writes cost the difference more. */
function oneHourWriteSurcharge(usage: Usage, inputPrice: number): number {
  const oneHour = Math.min(usage.cacheWrite1hTokens ?? 0, usage.cacheWriteTokens);
  return oneHour * inputPrice * (ANTHROPIC_CACHE_WRITE_1H_MULTIPLIER - ANTHROPIC_CACHE_WRITE_MULTIPLIER);
}

/** Sum of two usages (e.g. accumulating a task's usage across calls). */
export function addUsage(a: Usage, b: Usage): Usage {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cacheReadTokens: a.cacheReadTokens + b.cacheReadTokens,
    cacheWriteTokens: a.cacheWriteTokens + b.cacheWriteTokens,
  };
}
