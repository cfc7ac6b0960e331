/**
 * LLM router: picks a provider and model for a call by complexity tier, skips
 * those whose circuit is open, and falls back along the tier's chain when a provider fails.
 *
 * It runs inside an activity. It never retries the same candidate: Temporal's retry policy owns
 * retries, and the failure it throws says whether and when to retry.
 */
import { ApplicationFailure } from '@temporalio/common';
import { DEFAULT_TIER_MODELS, lookupModel, resolveMaxTokens, type ModelTier } from './catalog';
import { CircuitBreaker, type BreakerFailureKind } from './circuit-breaker';
import { classifyProviderError, isCancellation, LlmFailureType, type LlmFailureTypeName } from './errors';
import type { ChatCallbacks, ChatRequest, ChatResult, LlmProvider, ProviderConfig } from './types';
import { storableDeep, storableText } from '../security/binary';

export type { ModelTier } from './catalog';

export const MODEL_TIERS: readonly ModelTier[] = ['cheap', 'standard', 'premium'];

/** Tier used when a call names neither a tier nor a model: agents run at "medium" complexity unless a call says otherwise. */
export const DEFAULT_TIER: ModelTier = 'standard';

export interface RouteCandidate {
  /** Name of a configured provider (a key of `providers`). */
  provider: string;
  model: string;
}

export type TierChains = Record<ModelTier, RouteCandidate[]>;

export interface LlmRouterOptions {
  providers: Map<string, LlmProvider>;
  /** Per tier, the candidates in the order to try them. */
  tiers: TierChains;
  /** Shared per worker process so every activity sees the same circuit state. */
  breaker?: CircuitBreaker;
  now?: () => number;
}

export type RouterChatRequest = Omit<ChatRequest, 'model' | 'maxTokens'> & { maxTokens?: number };

export interface RouteTarget {
  /** Complexity tier whose chain to walk; default `standard`. */
  tier?: ModelTier;
  /** A model to try first (e.g. the agent's configured model), before the tier's chain. */
  model?: string;
  /** The provider serving `model`, or, without `model`, the provider whose tier candidates go first. */
  provider?: string;
}

export interface RouteAttempt {
  provider: string;
  model: string;
  /** The failure's message; absent for the attempt that answered. */
  error?: string;
  /** The failure's `type`, e.g. `LlmOverloaded`. */
  errorType?: string;
  /** True when no request was sent because the circuit was open. */
  skipped?: boolean;
}

export type RoutedChatResult = ChatResult & { attempts: RouteAttempt[] };

/** How each failure type affects the breaker (undefined: no verdict on the provider's health). */
const BREAKER_KIND: Readonly<Record<LlmFailureTypeName, BreakerFailureKind | undefined>> = {
  LlmRateLimited: 'rate_limit',
  LlmOverloaded: 'transient',
  LlmServerError: 'transient',
  LlmNetworkError: 'transient',
  LlmTimeout: 'transient',
  LlmConflict: 'transient',
  LlmProviderError: 'transient',
  LlmAuthError: 'auth',
  LlmPermissionDenied: 'auth',
  LlmBillingError: 'auth',
  LlmNotFound: 'model_unavailable',
  // The request itself is invalid; the provider is fine.
  LlmBadRequest: undefined,
  LlmConfigError: undefined,
};

/** Failure types after which another candidate is worth trying: everything provider-side. */
const FALLS_THROUGH: ReadonlySet<string> = new Set<string>(
  Object.entries(BREAKER_KIND)
    .filter(([, kind]) => kind !== undefined)
    .map(([type]) => type),
);

/** Whether a failure of this type is the provider's (so the next candidate may succeed) rather than the request's. */
export function isProviderSideFailure(type: string | null | undefined): boolean {
  return type !== null && type !== undefined && FALLS_THROUGH.has(type);
}

function configError(message: string): ApplicationFailure {
  return ApplicationFailure.create({ type: LlmFailureType.ConfigError, message, nonRetryable: true });
}

export class LlmRouter {
  readonly providers: ReadonlyMap<string, LlmProvider>;
  readonly tiers: Readonly<TierChains>;
  readonly breaker: CircuitBreaker;
  private readonly now: () => number;

  constructor(options: LlmRouterOptions) {
    this.providers = options.providers;
    this.tiers = options.tiers;
    this.now = options.now ?? Date.now;
    this.breaker = options.breaker ?? new CircuitBreaker({ now: this.now });
    for (const tier of MODEL_TIERS) {
      for (const candidate of options.tiers[tier]) {
        if (!options.providers.has(candidate.provider)) {
          throw new Error(
            `tier "${tier}" names provider "${candidate.provider}", which is not configured (configured: ${[...options.providers.keys()].join(', ') || 'none'})`,
          );
        }
      }
    }
  }

  /**
   * Builds the providers through `createProvider` (the adapters' factory) and a router over them.
   * Without `tiers`, uses `defaultTierChains(configs)`.
   */
  static fromConfig(
    configs: readonly ProviderConfig[],
    createProvider: (config: ProviderConfig) => LlmProvider,
    options: Omit<LlmRouterOptions, 'providers' | 'tiers'> & { tiers?: TierChains } = {},
  ): LlmRouter {
    const providers = new Map<string, LlmProvider>();
    for (const config of configs) {
      if (providers.has(config.name)) throw new Error(`provider "${config.name}" is configured twice`);
      providers.set(config.name, createProvider(config));
    }
    return new LlmRouter({ ...options, providers, tiers: options.tiers ?? defaultTierChains(configs) });
  }

  /** The candidates for a target, in order: the explicit model or provider first, then the tier's chain. */
  candidates(target: RouteTarget): RouteCandidate[] {
    const chain = this.tiers[target.tier ?? DEFAULT_TIER];
    const first: RouteCandidate[] = [];
    if (target.provider !== undefined && !this.providers.has(target.provider)) {
      throw configError(
        `no LLM provider named "${target.provider}" is configured (configured: ${[...this.providers.keys()].join(', ') || 'none'})`,
      );
    }
    if (target.model !== undefined) {
      const provider = target.provider ?? this.providerForModel(target.model);
      if (provider === undefined) {
        throw configError(
          `no configured LLM provider serves model "${target.model}"; name the provider explicitly or add one of kind "${lookupModel(target.model).kind}"`,
        );
      }
      first.push({ provider, model: target.model });
    } else if (target.provider !== undefined) {
      first.push(...chain.filter((c) => c.provider === target.provider));
      if (first.length === 0) {
        throw configError(
          `provider "${target.provider}" has no model in tier "${target.tier ?? DEFAULT_TIER}"; name a model explicitly`,
        );
      }
    }
    const seen = new Set<string>();
    return [...first, ...chain].filter((c) => {
      const key = `${c.provider}\u0000${c.model}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
  }

  /**
   * Sends the request to the first healthy candidate and falls back along the chain on a
   * provider-side failure. Throws:
   * - the original error, unchanged, when the call was cancelled (no fallback);
   * - the classified failure at once when the request itself is invalid (400/422: no fallback);
   * - when every candidate failed: the last retryable failure if any (a later Temporal attempt may
   *   succeed; the breaker then skips the broken candidates), else the last failure; its message
   *   lists every attempt.
   */
  async chat(
    request: RouterChatRequest,
    target: RouteTarget = {},
    callbacks?: ChatCallbacks,
  ): Promise<RoutedChatResult> {
    const candidates = this.candidates(target);
    if (candidates.length === 0) throw configError(`no LLM candidates for tier "${target.tier ?? DEFAULT_TIER}"`);
    const attempts: RouteAttempt[] = [];
    const failures: ApplicationFailure[] = [];
    let sent = 0;

    for (const candidate of candidates) {
      if (!this.breaker.tryAcquire(candidate.provider, candidate.model)) {
        attempts.push({ ...candidate, skipped: true, error: describeOpenCircuit(this.breaker, candidate) });
        continue;
      }
      sent += 1;
      const outcome = await this.attempt(candidate, request, callbacks, attempts);
      if (outcome.result) return { ...outcome.result, attempts };
      failures.push(outcome.failure);
      if (!isProviderSideFailure(outcome.failure.type)) throw withAttempts(outcome.failure, attempts);
    }

    if (sent === 0) {
      // Every circuit is open: rather than fail without asking anyone, try the one that reopens soonest.
      const soonest = [...candidates].sort((a, b) => openUntil(this.breaker, a) - openUntil(this.breaker, b))[0]!;
      const outcome = await this.attempt(soonest, request, callbacks, attempts);
      if (outcome.result) return { ...outcome.result, attempts };
      failures.push(outcome.failure);
    }

    const retryable = failures.filter((f) => !f.nonRetryable);
    const chosen = retryable.at(-1) ?? failures.at(-1)!;
    throw withAttempts(chosen, attempts);
  }

  /** One request to one candidate; records the outcome in the breaker and `attempts`. Rethrows cancellation. */
  private async attempt(
    candidate: RouteCandidate,
    request: RouterChatRequest,
    callbacks: ChatCallbacks | undefined,
    attempts: RouteAttempt[],
  ): Promise<{ result: ChatResult; failure?: undefined } | { result?: undefined; failure: ApplicationFailure }> {
    const { provider: providerName, model } = candidate;
    const provider = this.providers.get(providerName)!;
    const { maxTokens, ...rest } = request;
    callbacks?.onAttemptStart?.({ index: attempts.filter((a) => !a.skipped).length, provider: providerName, model });
    try {
      const result = await provider.chat({ ...rest, model, maxTokens: resolveMaxTokens(maxTokens, model) }, callbacks);
      this.breaker.recordSuccess(providerName, model);
      attempts.push({ provider: providerName, model });
      return { result: { ...result, content: storableContent(result.content) } };
    } catch (err) {
      const failure =
        callbacks?.signal?.aborted || isCancellation(err)
          ? undefined
          : classifyProviderError(err, { provider: providerName, model, kind: provider.kind, now: this.now });
      if (failure === undefined) {
        this.breaker.release(providerName, model);
        throw err;
      }
      const kind = BREAKER_KIND[failure.type as LlmFailureTypeName];
      if (kind === undefined) this.breaker.release(providerName, model);
      else this.breaker.recordFailure(providerName, model, kind);
      attempts.push({ provider: providerName, model, error: failure.message, errorType: failure.type ?? undefined });
      return { failure };
    }
  }

  /** The provider for an explicitly named model: one whose tier chains list it, else the first of the catalogue's kind. */
  private providerForModel(model: string): string | undefined {
    for (const tier of MODEL_TIERS) {
      const listed = this.tiers[tier].find((c) => c.model === model);
      if (listed) return listed.provider;
    }
    const { kind } = lookupModel(model);
    for (const [name, provider] of this.providers) if (provider.kind === kind) return name;
    return undefined;
  }
}

function describeOpenCircuit(breaker: CircuitBreaker, candidate: RouteCandidate): string {
  const snapshot = breaker.snapshot(candidate.provider, candidate.model);
  const scope = snapshot.providerWide ? `provider ${candidate.provider}` : 'circuit';
  if (snapshot.state === 'half_open') return `${scope} half-open, trial request in flight (${snapshot.reason})`;
  const until = snapshot.openUntil !== undefined ? ` until ${new Date(snapshot.openUntil).toISOString()}` : '';
  return `${scope} open${until} (${snapshot.reason})`;
}

function openUntil(breaker: CircuitBreaker, candidate: RouteCandidate): number {
  return breaker.snapshot(candidate.provider, candidate.model).openUntil ?? 0;
}

/** A copy of `failure` whose message lists every attempt (kept as is when only one request was made and nothing was skipped). */
function withAttempts(failure: ApplicationFailure, attempts: readonly RouteAttempt[]): ApplicationFailure {
  if (attempts.length <= 1) return failure;
  const list = attempts
    .map((a) => `${a.provider}/${a.model}: ${a.skipped ? 'skipped, ' : ''}${a.error ?? 'ok'}`)
    .join('; ');
  return ApplicationFailure.create({
    type: failure.type ?? undefined,
    message: `${failure.message} [attempts: ${list}]`,
    nonRetryable: failure.nonRetryable ?? false,
    details: failure.details ?? undefined,
    nextRetryDelay: failure.nextRetryDelay ?? undefined,
    cause: failure.cause,
  });
}

/**
 * Tier chains from configuration alone: the first configured provider is the default
 * and covers every tier; the others follow as fallbacks in configuration order. Each provider kind
 * contributes its `DEFAULT_TIER_MODELS`; `openai-compatible` servers have no standard model names
 * and must be given explicit tiers.
 */
export function defaultTierChains(configs: readonly ProviderConfig[]): TierChains {
  const chains: TierChains = { cheap: [], standard: [], premium: [] };
  for (const config of configs) {
    const models = DEFAULT_TIER_MODELS[config.kind];
    if (!models) continue;
    for (const tier of MODEL_TIERS) chains[tier].push({ provider: config.name, model: models[tier] });
  }
  return chains;
}

/** A reply's text and tool arguments as they can be stored and sent back (see `storableText`). */
function storableContent(content: ChatResult['content']): ChatResult['content'] {
  return content.map((block) =>
    block.type === 'text'
      ? { ...block, text: storableText(block.text) }
      : { ...block, name: storableText(block.name), input: storableDeep(block.input) },
  );
}
