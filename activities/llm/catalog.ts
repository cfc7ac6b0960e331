/**
 * Model catalogue: context window, output cap, list prices and complexity tier per model.
 *
 * Pure data and lookups (no SDK imports), so workflows may import it for budget arithmetic.
 *
 * Prices are USD per million tokens: the providers' public list prices for standard (not batch,
 * not priority) requests, as shown on platform.claude.com/docs/en/about-claude/pricing and
 * OpenAI's API pricing page in November 2026 (Sonnet 5.5's cache-read price as cut on 2026-10-07).
 * Models the providers have since moved to "legacy" keep their last list price. Anthropic cache
 * writes are the 5-minute (ephemeral) price, which is what `cache_control: ephemeral` buys.
 * Not modelled: Claude Fable / Mythos (limited availability), `-pro` variants, batch discounts,
 * data-residency surcharges.
 */
import type { ProviderKind } from './types';

export type ModelTier = 'cheap' | 'standard' | 'premium';

/** USD per million tokens. */
export interface ModelPrices {
  /** Uncached input tokens. */
  input: number;
  output: number;
  /** Input tokens served from the prompt cache. */
  cacheRead: number;
  /** Input tokens written to the prompt cache (Anthropic: 5-minute ephemeral cache). */
  cacheWrite: number;
}

/** A second price band for calls whose prompt is long (e.g. GPT-5.4 above 272K tokens). */
export interface LongPromptPricing {
  /** The band applies to the whole call when input + cache-read + cache-write tokens exceed this. */
  promptTokensAbove: number;
  prices: ModelPrices;
}

export interface ModelInfo {
  /** Canonical catalogue id, or the id as asked for when the model is unknown. */
  id: string;
  kind: ProviderKind;
  contextWindow: number;
  /** Largest `max_tokens` the model accepts. */
  maxOutput: number;
  prices: ModelPrices;
  longPrompt?: LongPromptPricing;
  tier: ModelTier;
  /** False when the id is not in the catalogue and every number above is a conservative default. */
  known: boolean;
}

type CatalogEntry = Omit<ModelInfo, 'known'> & { aliases?: readonly string[] };

/** Prices are quoted per million tokens. */
export const TOKENS_PER_MILLION = 1_000_000;

function round6(n: number): number {
  return Math.round(n * TOKENS_PER_MILLION) / TOKENS_PER_MILLION;
}

/** Anthropic's standard cache prices: a 5-minute write costs 1.25× input, a hit 0.1× input. */
export const ANTHROPIC_CACHE_WRITE_MULTIPLIER = 1.25;
export const ANTHROPIC_CACHE_READ_MULTIPLIER = 0.1;
/** A write with the 1-hour lifetime (`ttl: '1h'`) costs twice the input price. */
export const ANTHROPIC_CACHE_WRITE_1H_MULTIPLIER = 2;

function anthropicPrices(
  input: number,
  output: number,
  cacheRead = round6(input * ANTHROPIC_CACHE_READ_MULTIPLIER),
): ModelPrices {
  return { input, output, cacheRead, cacheWrite: round6(input * ANTHROPIC_CACHE_WRITE_MULTIPLIER) };
}

/**
 * OpenAI caches prompts implicitly: a hit has its own price and there is no write surcharge (its
 * usage never reports cache writes), so a write costs the plain input price.
 */
function openAiPrices(input: number, output: number, cachedInput: number): ModelPrices {
  return { input, output, cacheRead: cachedInput, cacheWrite: input };
}

/** GPT-5.4 / 5.5: prompts above 272K tokens cost 2× input (cached too) and 1.5× output for the whole call. */
const OPENAI_LONG_PROMPT_ABOVE = 272_000;
const OPENAI_LONG_INPUT_MULTIPLIER = 2;
const OPENAI_LONG_OUTPUT_MULTIPLIER = 1.5;

function openAiLongPrompt(base: ModelPrices): LongPromptPricing {
  return {
    promptTokensAbove: OPENAI_LONG_PROMPT_ABOVE,
    prices: openAiPrices(
      round6(base.input * OPENAI_LONG_INPUT_MULTIPLIER),
      round6(base.output * OPENAI_LONG_OUTPUT_MULTIPLIER),
      round6(base.cacheRead * OPENAI_LONG_INPUT_MULTIPLIER),
    ),
  };
}

/** Claude Haiku 5.5 is priced in two bands split at a 100K-token prompt. */
const HAIKU_55_LONG_PROMPT_ABOVE = 100_000;

/** 1M tokens: the window of Claude 4.6 and later, and of the GPT-5.4 / 5.5 flagships (1.05M). */
const ONE_MILLION_WINDOW = 1_000_000;
const GPT54_WINDOW = 1_050_000;
/** 200K tokens: the window of Claude 4.5 and earlier. */
const CLAUDE_200K_WINDOW = 200_000;
/** 128K tokens: the output cap of Claude 4.6+ and the GPT-5 family. */
const OUTPUT_128K = 128_000;
/** 64K tokens: the output cap of Sonnet 4 / 4.5, Haiku 4.5 and Opus 4.5. */
const OUTPUT_64K = 64_000;
/** 32K tokens: the output cap of Opus 4 and 4.1. */
const OUTPUT_32K = 32_000;
/** 400K tokens: the GPT-5 / 5.4-mini / 5.4-nano window. */
const GPT5_WINDOW = 400_000;
/** 1,047,576 tokens: the GPT-4.1 family's window. */
const GPT41_WINDOW = 1_047_576;
/** 32,768 tokens: the GPT-4.1 family's output cap. */
const GPT41_OUTPUT = 32_768;
/** 128K tokens: the GPT-4o family's window. */
const GPT4O_WINDOW = 128_000;
/** 16,384 tokens: the GPT-4o family's output cap. */
const GPT4O_OUTPUT = 16_384;
/** 200K tokens: the o-series reasoning models' window. */
const O_SERIES_WINDOW = 200_000;
/** 100K tokens: the o-series reasoning models' output cap. */
const O_SERIES_OUTPUT = 100_000;

/** The offline demo model answers from a script: a Claude-sized window so prompts never compress oddly. */
const DEMO_WINDOW = 200_000;
/** The offline demo model's output cap; it never writes long answers. */
const DEMO_OUTPUT = 8_192;

/** The id of the built-in offline demo model used when no provider is configured. */
export const DEMO_MODEL_ID = 'demo-offline';

const FREE: ModelPrices = Object.freeze({ input: 0, output: 0, cacheRead: 0, cacheWrite: 0 });

const GPT55 = openAiPrices(5, 30, 0.5);
const GPT54 = openAiPrices(2.5, 15, 0.25);

const ENTRIES: readonly CatalogEntry[] = [
  // Anthropic, current
  {
    id: 'claude-opus-5-5',
    kind: 'anthropic',
    contextWindow: ONE_MILLION_WINDOW,
    maxOutput: OUTPUT_128K,
    prices: anthropicPrices(4, 20, 0.2),
    tier: 'premium',
  },
  {
    id: 'claude-sonnet-5-5',
    kind: 'anthropic',
    contextWindow: ONE_MILLION_WINDOW,
    maxOutput: OUTPUT_128K,
    prices: anthropicPrices(2, 10, 0.1),
    tier: 'standard',
  },
  {
    id: 'claude-haiku-5-5',
    kind: 'anthropic',
    contextWindow: ONE_MILLION_WINDOW,
    maxOutput: OUTPUT_128K,
    prices: anthropicPrices(0.1, 0.5),
    longPrompt: { promptTokensAbove: HAIKU_55_LONG_PROMPT_ABOVE, prices: anthropicPrices(0.5, 2.5) },
    tier: 'cheap',
  },
  // Anthropic, legacy but available
  {
    id: 'claude-opus-5',
    kind: 'anthropic',
    contextWindow: ONE_MILLION_WINDOW,
    maxOutput: OUTPUT_128K,
    prices: anthropicPrices(5, 25),
    tier: 'premium',
  },
  {
    id: 'claude-opus-4-8',
    kind: 'anthropic',
    contextWindow: ONE_MILLION_WINDOW,
    maxOutput: OUTPUT_128K,
    prices: anthropicPrices(5, 25),
    tier: 'premium',
  },
  {
    id: 'claude-opus-4-7',
    kind: 'anthropic',
    contextWindow: ONE_MILLION_WINDOW,
    maxOutput: OUTPUT_128K,
    prices: anthropicPrices(5, 25),
    tier: 'premium',
  },
  {
    id: 'claude-opus-4-6',
    kind: 'anthropic',
    contextWindow: ONE_MILLION_WINDOW,
    maxOutput: OUTPUT_128K,
    prices: anthropicPrices(5, 25),
    tier: 'premium',
  },
  {
    id: 'claude-opus-4-5',
    kind: 'anthropic',
    contextWindow: CLAUDE_200K_WINDOW,
    maxOutput: OUTPUT_64K,
    prices: anthropicPrices(5, 25),
    tier: 'premium',
  },
  {
    id: 'claude-opus-4-1',
    kind: 'anthropic',
    contextWindow: CLAUDE_200K_WINDOW,
    maxOutput: OUTPUT_32K,
    prices: anthropicPrices(15, 75),
    tier: 'premium',
  },
  {
    id: 'claude-opus-4',
    kind: 'anthropic',
    contextWindow: CLAUDE_200K_WINDOW,
    maxOutput: OUTPUT_32K,
    prices: anthropicPrices(15, 75),
    tier: 'premium',
    aliases: ['claude-opus-4-0'],
  },
  {
    id: 'claude-sonnet-5',
    kind: 'anthropic',
    contextWindow: ONE_MILLION_WINDOW,
    maxOutput: OUTPUT_128K,
    prices: anthropicPrices(2, 10),
    tier: 'standard',
  },
  {
    id: 'claude-sonnet-4-6',
    kind: 'anthropic',
    contextWindow: ONE_MILLION_WINDOW,
    maxOutput: OUTPUT_128K,
    prices: anthropicPrices(3, 15),
    tier: 'standard',
  },
  {
    id: 'claude-sonnet-4-5',
    kind: 'anthropic',
    contextWindow: CLAUDE_200K_WINDOW,
    maxOutput: OUTPUT_64K,
    prices: anthropicPrices(3, 15),
    tier: 'standard',
  },
  {
    id: 'claude-sonnet-4',
    kind: 'anthropic',
    contextWindow: CLAUDE_200K_WINDOW,
    maxOutput: OUTPUT_64K,
    prices: anthropicPrices(3, 15),
    tier: 'standard',
    aliases: ['claude-sonnet-4-0'],
  },
  {
    id: 'claude-haiku-4-5',
    kind: 'anthropic',
    contextWindow: CLAUDE_200K_WINDOW,
    maxOutput: OUTPUT_64K,
    prices: anthropicPrices(1, 5),
    tier: 'cheap',
  },

  // OpenAI, current
  {
    id: 'gpt-5.5',
    kind: 'openai',
    contextWindow: GPT54_WINDOW,
    maxOutput: OUTPUT_128K,
    prices: GPT55,
    longPrompt: openAiLongPrompt(GPT55),
    tier: 'premium',
  },
  {
    id: 'gpt-5.4',
    kind: 'openai',
    contextWindow: GPT54_WINDOW,
    maxOutput: OUTPUT_128K,
    prices: GPT54,
    longPrompt: openAiLongPrompt(GPT54),
    tier: 'standard',
  },
  {
    id: 'gpt-5.4-mini',
    kind: 'openai',
    contextWindow: GPT5_WINDOW,
    maxOutput: OUTPUT_128K,
    prices: openAiPrices(0.75, 4.5, 0.075),
    tier: 'cheap',
  },
  {
    id: 'gpt-5.4-nano',
    kind: 'openai',
    contextWindow: GPT5_WINDOW,
    maxOutput: OUTPUT_128K,
    prices: openAiPrices(0.2, 1.25, 0.02),
    tier: 'cheap',
  },
  // OpenAI, earlier generations (last list prices)
  {
    id: 'gpt-5.1',
    kind: 'openai',
    contextWindow: GPT5_WINDOW,
    maxOutput: OUTPUT_128K,
    prices: openAiPrices(1.25, 10, 0.125),
    tier: 'standard',
  },
  {
    id: 'gpt-5',
    kind: 'openai',
    contextWindow: GPT5_WINDOW,
    maxOutput: OUTPUT_128K,
    prices: openAiPrices(1.25, 10, 0.125),
    tier: 'standard',
  },
  {
    id: 'gpt-5-mini',
    kind: 'openai',
    contextWindow: GPT5_WINDOW,
    maxOutput: OUTPUT_128K,
    prices: openAiPrices(0.25, 2, 0.025),
    tier: 'cheap',
  },
  {
    id: 'gpt-5-nano',
    kind: 'openai',
    contextWindow: GPT5_WINDOW,
    maxOutput: OUTPUT_128K,
    prices: openAiPrices(0.05, 0.4, 0.005),
    tier: 'cheap',
  },
  {
    id: 'gpt-4.1',
    kind: 'openai',
    contextWindow: GPT41_WINDOW,
    maxOutput: GPT41_OUTPUT,
    prices: openAiPrices(2, 8, 0.5),
    tier: 'standard',
  },
  {
    id: 'gpt-4.1-mini',
    kind: 'openai',
    contextWindow: GPT41_WINDOW,
    maxOutput: GPT41_OUTPUT,
    prices: openAiPrices(0.4, 1.6, 0.1),
    tier: 'cheap',
  },
  {
    id: 'gpt-4.1-nano',
    kind: 'openai',
    contextWindow: GPT41_WINDOW,
    maxOutput: GPT41_OUTPUT,
    prices: openAiPrices(0.1, 0.4, 0.025),
    tier: 'cheap',
  },
  {
    id: 'gpt-4o',
    kind: 'openai',
    contextWindow: GPT4O_WINDOW,
    maxOutput: GPT4O_OUTPUT,
    prices: openAiPrices(2.5, 10, 1.25),
    tier: 'standard',
  },
  {
    id: 'gpt-4o-mini',
    kind: 'openai',
    contextWindow: GPT4O_WINDOW,
    maxOutput: GPT4O_OUTPUT,
    prices: openAiPrices(0.15, 0.6, 0.075),
    tier: 'cheap',
  },
  {
    id: 'o3',
    kind: 'openai',
    contextWindow: O_SERIES_WINDOW,
    maxOutput: O_SERIES_OUTPUT,
    prices: openAiPrices(2, 8, 0.5),
    tier: 'premium',
  },
  {
    id: 'o4-mini',
    kind: 'openai',
    contextWindow: O_SERIES_WINDOW,
    maxOutput: O_SERIES_OUTPUT,
    prices: openAiPrices(1.1, 4.4, 0.275),
    tier: 'standard',
  },

  // Built-in offline demo
  { id: DEMO_MODEL_ID, kind: 'demo', contextWindow: DEMO_WINDOW, maxOutput: DEMO_OUTPUT, prices: FREE, tier: 'cheap' },
];

/** Every catalogued model by canonical id. */
export const MODEL_CATALOG: ReadonlyMap<string, Readonly<ModelInfo>> = new Map(
  ENTRIES.map(({ aliases: _aliases, ...entry }) => [entry.id, Object.freeze({ ...entry, known: true })]),
);

const BY_NAME: ReadonlyMap<string, Readonly<ModelInfo>> = new Map(
  ENTRIES.flatMap((entry) => {
    const info = MODEL_CATALOG.get(entry.id)!;
    return [entry.id, ...(entry.aliases ?? [])].map((name) => [name, info] as const);
  }),
);

/** Context window assumed for an unknown model: small enough that compression starts early. */
export const UNKNOWN_MODEL_CONTEXT_WINDOW = 64_000;
/** Output cap assumed for an unknown model: the provider default, which every server accepts. */
export const DEFAULT_MAX_OUTPUT_TOKENS = 4_096;
/**
 * Prices assumed for an unknown model: a mid-range hosted model ($3 in / $15 out), so budgets still
 * bite rather than treating an unpriced model as free. Callers see `known: false` and can say so.
 */
export const UNKNOWN_MODEL_PRICES: Readonly<ModelPrices> = Object.freeze(anthropicPrices(3, 15));

/** `-20250929` (Anthropic) or `-2024-08-06` (OpenAI) snapshot suffixes. */
const DATE_SUFFIX = /-(?:\d{8}|\d{4}-\d{2}-\d{2})$/;
/** `@20250929` (Vertex AI) snapshot suffixes. */
const AT_SUFFIX = /@[\w.-]+$/;
/** `-latest` rolling aliases. */
const LATEST_SUFFIX = /-latest$/;

/** The catalogue name an id refers to: lower-cased, router prefix (`anthropic/`) and snapshot suffix removed. */
export function normalizeModelId(id: string): string {
  let name = id.trim().toLowerCase();
  const slash = name.lastIndexOf('/');
  if (slash >= 0) name = name.slice(slash + 1);
  return name.replace(AT_SUFFIX, '').replace(LATEST_SUFFIX, '').replace(DATE_SUFFIX, '');
}

/** The provider kind an unknown model id most likely belongs to (used only for defaults). */
function guessKind(name: string): ProviderKind {
  if (name.startsWith('claude')) return 'anthropic';
  if (/^(gpt|o\d|chatgpt)/.test(name)) return 'openai';
  return 'openai-compatible';
}

/**
 * Catalogue entry for a model id. Tolerates snapshot suffixes (`claude-sonnet-4-5-20250929`,
 * `gpt-4o-2024-08-06`, `claude-sonnet-4-5@20250929`), `-latest`, and router prefixes
 * (`anthropic/claude-sonnet-4-5`). An unknown model gets conservative defaults and `known: false`.
 * The result's `id` is the catalogue id for a known model and the id as given otherwise.
 */
export function lookupModel(id: string): ModelInfo {
  const name = normalizeModelId(id);
  const found = BY_NAME.get(name) ?? BY_NAME.get(id.trim().toLowerCase());
  if (found) {
    const copy: ModelInfo = { ...found, prices: { ...found.prices } };
    if (found.longPrompt) copy.longPrompt = { ...found.longPrompt, prices: { ...found.longPrompt.prices } };
    return copy;
  }
  return {
    id,
    kind: guessKind(name),
    contextWindow: UNKNOWN_MODEL_CONTEXT_WINDOW,
    maxOutput: DEFAULT_MAX_OUTPUT_TOKENS,
    prices: { ...UNKNOWN_MODEL_PRICES },
    tier: 'standard',
    known: false,
  };
}

/**
 * `max_tokens` for a request: an explicit positive value wins; else the catalogue's
 * output cap for a known model; else the provider default of 4096.
 */
export function resolveMaxTokens(explicit: number | undefined, model: string | ModelInfo): number {
  if (explicit !== undefined && Number.isFinite(explicit) && explicit > 0) return Math.floor(explicit);
  const info = typeof model === 'string' ? lookupModel(model) : model;
  return info.known ? info.maxOutput : DEFAULT_MAX_OUTPUT_TOKENS;
}

/**
 * The model each provider kind serves per tier when the configuration names none. `openai-compatible`
 * servers (Ollama, vLLM, OpenRouter) have no standard model names, so they must be configured.
 */
export const DEFAULT_TIER_MODELS: Readonly<Partial<Record<ProviderKind, Readonly<Record<ModelTier, string>>>>> = {
  anthropic: { cheap: 'claude-haiku-5-5', standard: 'claude-sonnet-5-5', premium: 'claude-opus-5-5' },
  openai: { cheap: 'gpt-5.4-mini', standard: 'gpt-5.4', premium: 'gpt-5.5' },
  demo: { cheap: DEMO_MODEL_ID, standard: DEMO_MODEL_ID, premium: DEMO_MODEL_ID },
};

/** The prices that apply to one call whose prompt (input + cache read + cache write) has this many tokens. */
export function pricesForPrompt(model: ModelInfo, promptTokens: number): ModelPrices {
  return model.longPrompt && promptTokens > model.longPrompt.promptTokensAbove ? model.longPrompt.prices : model.prices;
}
