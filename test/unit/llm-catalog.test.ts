import {
  DEFAULT_MAX_OUTPUT_TOKENS,
  DEFAULT_TIER_MODELS,
  DEMO_MODEL_ID,
  lookupModel,
  MODEL_CATALOG,
  normalizeModelId,
  resolveMaxTokens,
  UNKNOWN_MODEL_CONTEXT_WINDOW,
  UNKNOWN_MODEL_PRICES,
} from '../../activities/llm/catalog';
import { addUsage, costUsd } from '../../activities/llm/cost';

describe('lookupModel', () => {
  it('finds catalogued models with their numbers', () => {
    expect(lookupModel('claude-sonnet-4-5')).toEqual({
      id: 'claude-sonnet-4-5',
      kind: 'anthropic',
      contextWindow: 200_000,
      maxOutput: 64_000,
      prices: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
      tier: 'standard',
      known: true,
    });
    expect(lookupModel('claude-opus-4-6')).toMatchObject({
      contextWindow: 1_000_000,
      maxOutput: 128_000,
      prices: { input: 5, output: 25 },
      tier: 'premium',
    });
    expect(lookupModel('claude-haiku-4-5')).toMatchObject({
      prices: { input: 1, output: 5, cacheRead: 0.1, cacheWrite: 1.25 },
      tier: 'cheap',
    });
    expect(lookupModel('gpt-4o')).toMatchObject({
      kind: 'openai',
      contextWindow: 128_000,
      maxOutput: 16_384,
      prices: { input: 2.5, output: 10, cacheRead: 1.25, cacheWrite: 2.5 },
    });
    expect(lookupModel('gpt-4o-mini')).toMatchObject({ prices: { input: 0.15, output: 0.6 }, tier: 'cheap' });
    expect(lookupModel('gpt-4.1')).toMatchObject({ contextWindow: 1_047_576, maxOutput: 32_768 });
    expect(lookupModel('gpt-5')).toMatchObject({
      contextWindow: 400_000,
      maxOutput: 128_000,
      prices: { input: 1.25, output: 10, cacheRead: 0.125 },
    });
  });

  it('has the current generation (November 2026 list prices)', () => {
    expect(lookupModel('claude-opus-5-5')).toMatchObject({
      contextWindow: 1_000_000,
      maxOutput: 128_000,
      prices: { input: 4, output: 20, cacheRead: 0.2, cacheWrite: 5 },
      tier: 'premium',
    });
    expect(lookupModel('claude-sonnet-5-5')).toMatchObject({
      contextWindow: 1_000_000,
      maxOutput: 128_000,
      prices: { input: 2, output: 10, cacheRead: 0.1, cacheWrite: 2.5 },
      tier: 'standard',
    });
    expect(lookupModel('claude-haiku-5-5')).toMatchObject({
      prices: { input: 0.1, output: 0.5, cacheRead: 0.01, cacheWrite: 0.125 },
      longPrompt: {
        promptTokensAbove: 100_000,
        prices: { input: 0.5, output: 2.5, cacheRead: 0.05, cacheWrite: 0.625 },
      },
      tier: 'cheap',
    });
    expect(lookupModel('claude-sonnet-4-6')).toMatchObject({
      contextWindow: 1_000_000,
      maxOutput: 128_000,
      prices: { input: 3, output: 15 },
    });
    expect(lookupModel('gpt-5.5')).toMatchObject({
      contextWindow: 1_050_000,
      maxOutput: 128_000,
      prices: { input: 5, output: 30, cacheRead: 0.5, cacheWrite: 5 },
      longPrompt: { promptTokensAbove: 272_000, prices: { input: 10, output: 45, cacheRead: 1 } },
      tier: 'premium',
    });
    expect(lookupModel('gpt-5.4')).toMatchObject({
      prices: { input: 2.5, output: 15, cacheRead: 0.25 },
      tier: 'standard',
    });
    expect(lookupModel('gpt-5.4-mini-2026-03-17')).toMatchObject({
      id: 'gpt-5.4-mini',
      contextWindow: 400_000,
      prices: { input: 0.75, output: 4.5, cacheRead: 0.075 },
    });
    expect(lookupModel('gpt-5.4-nano')).toMatchObject({ prices: { input: 0.2, output: 1.25, cacheRead: 0.02 } });
  });

  it('has the offline demo model: free, 200K window', () => {
    expect(DEMO_MODEL_ID).toBe('demo-offline');
    expect(lookupModel('demo-offline')).toMatchObject({
      kind: 'demo',
      contextWindow: 200_000,
      prices: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
      known: true,
    });
  });

  it.each([
    ['claude-sonnet-4-5-20250929', 'claude-sonnet-4-5'],
    ['claude-sonnet-4-20250514', 'claude-sonnet-4'],
    ['claude-sonnet-4-0', 'claude-sonnet-4'],
    ['claude-opus-4-1-20250805', 'claude-opus-4-1'],
    ['claude-haiku-4-5-20251001', 'claude-haiku-4-5'],
    ['claude-sonnet-4-6-20260514', 'claude-sonnet-4-6'],
    ['claude-sonnet-4-5@20250929', 'claude-sonnet-4-5'],
    ['anthropic/claude-sonnet-4-5', 'claude-sonnet-4-5'],
    ['gpt-4o-2024-08-06', 'gpt-4o'],
    ['gpt-4o-mini-2024-07-18', 'gpt-4o-mini'],
    ['gpt-4.1-2025-04-14', 'gpt-4.1'],
    ['gpt-5-mini-2025-08-07', 'gpt-5-mini'],
    ['Claude-Haiku-4-5', 'claude-haiku-4-5'],
  ])('tolerates %s → %s', (asked, canonical) => {
    const info = lookupModel(asked);
    expect(info.known).toBe(true);
    expect(info.id).toBe(canonical);
  });

  it('does not guess a family member for an unknown model', () => {
    expect(normalizeModelId('claude-opus-4-1-20250805')).toBe('claude-opus-4-1');
    expect(lookupModel('gpt-5.9').known).toBe(false);
    expect(lookupModel('claude-opus-4-9').known).toBe(false);
  });

  it('gives an unknown model conservative defaults, flagged known: false', () => {
    expect(UNKNOWN_MODEL_CONTEXT_WINDOW).toBe(64_000);
    expect(DEFAULT_MAX_OUTPUT_TOKENS).toBe(4_096);
    expect(lookupModel('llama3.1:8b')).toEqual({
      id: 'llama3.1:8b',
      kind: 'openai-compatible',
      contextWindow: 64_000,
      maxOutput: 4_096,
      prices: { ...UNKNOWN_MODEL_PRICES },
      tier: 'standard',
      known: false,
    });
    expect(lookupModel('claude-9-mystery').kind).toBe('anthropic');
    expect(lookupModel('o9-preview').kind).toBe('openai');
  });

  it('returns copies that callers cannot use to corrupt the catalogue', () => {
    const info = lookupModel('gpt-4o');
    info.prices.input = 999;
    expect(lookupModel('gpt-4o').prices.input).toBe(2.5);
    expect(MODEL_CATALOG.get('gpt-4o')?.prices.input).toBe(2.5);
  });

  it('names a catalogued default model for every tier of every standard provider kind', () => {
    for (const models of Object.values(DEFAULT_TIER_MODELS)) {
      for (const model of Object.values(models)) expect(lookupModel(model).known).toBe(true);
    }
  });
});

describe('resolveMaxTokens (seed D1 F1)', () => {
  it('explicit value wins', () => {
    expect(resolveMaxTokens(1_000, 'claude-sonnet-4-5')).toBe(1_000);
    expect(resolveMaxTokens(512, 'unknown-model')).toBe(512);
  });
  it('then the catalogue output cap', () => {
    expect(resolveMaxTokens(undefined, 'claude-sonnet-4-5-20250929')).toBe(64_000);
    expect(resolveMaxTokens(undefined, 'claude-opus-4-6')).toBe(128_000);
    expect(resolveMaxTokens(undefined, lookupModel('gpt-4o'))).toBe(16_384);
  });
  it('then the provider default of 4096', () => {
    expect(resolveMaxTokens(undefined, 'mistral-large')).toBe(4_096);
    expect(resolveMaxTokens(0, 'mistral-large')).toBe(4_096);
    expect(resolveMaxTokens(Number.NaN, 'mistral-large')).toBe(4_096);
  });
});

describe('costUsd', () => {
  const usage = { inputTokens: 10_000, outputTokens: 2_000, cacheReadTokens: 50_000, cacheWriteTokens: 5_000 };

  it('prices every token kind for a known model', () => {
    // 10k × $3 + 2k × $15 + 50k × $0.30 + 5k × $3.75, per million.
    expect(costUsd(usage, 'claude-sonnet-4-5-20250929')).toBeCloseTo(0.09375, 10);
    expect(
      costUsd({ inputTokens: 1_000_000, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 }, 'gpt-4o'),
    ).toBeCloseTo(2.5, 10);
    expect(
      costUsd(
        { inputTokens: 0, outputTokens: 1_000_000, cacheReadTokens: 1_000_000, cacheWriteTokens: 0 },
        'gpt-4o-mini',
      ),
    ).toBeCloseTo(0.675, 10);
  });

  it('moves the whole call into the long-prompt band when the prompt is long', () => {
    // 100,000 prompt tokens is still the short band for Haiku 5.5; 100,001 is not.
    const short = { inputTokens: 90_000, outputTokens: 1_000, cacheReadTokens: 10_000, cacheWriteTokens: 0 };
    expect(costUsd(short, 'claude-haiku-5-5')).toBeCloseTo((90_000 * 0.1 + 1_000 * 0.5 + 10_000 * 0.01) / 1e6, 12);
    const long = { ...short, inputTokens: 90_001 };
    expect(costUsd(long, 'claude-haiku-5-5')).toBeCloseTo((90_001 * 0.5 + 1_000 * 2.5 + 10_000 * 0.05) / 1e6, 12);
    const gptLong = { inputTokens: 300_000, outputTokens: 1_000, cacheReadTokens: 0, cacheWriteTokens: 0 };
    expect(costUsd(gptLong, 'gpt-5.4')).toBeCloseTo((300_000 * 5 + 1_000 * 22.5) / 1e6, 12);
  });

  it('is zero for the demo model', () => {
    expect(costUsd(usage, 'demo-offline')).toBe(0);
  });

  it('uses the conservative prices for an unknown model', () => {
    expect(costUsd(usage, 'some-local-model')).toBeCloseTo(costUsd(usage, 'claude-sonnet-4-5'), 10);
  });

  it('addUsage sums field by field', () => {
    expect(addUsage(usage, usage)).toEqual({
      inputTokens: 20_000,
      outputTokens: 4_000,
      cacheReadTokens: 100_000,
      cacheWriteTokens: 10_000,
    });
  });
});
