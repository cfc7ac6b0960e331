/**
 * Circuit breaker per `provider:model`, kept in the worker process's memory: each
 * worker learns on its own that a model is failing and stops sending it traffic for a while. It is
 * deliberately not workflow state; losing it on restart only costs one or two failed calls.
 *
 * - 2 consecutive transient failures (5xx, 529, network, timeout) → open for 5 minutes.
 * - A rate limit (429) → open for 30 seconds at once: the provider has told us to back off.
 * - An auth or billing failure (401 / 402 / 403) → the whole provider is open for 30 minutes at
 *   once: the same key fails for every model.
 * - An unknown model (404) → that model is open for 30 minutes at once.
 * - When the window ends the circuit is half-open: one trial request may go; its success closes the
 *   circuit, its failure reopens it for a full window.
 * - A success closes the model's circuit and the provider's.
 */

/** Consecutive transient failures that open a circuit. */
export const CIRCUIT_OPEN_AFTER_FAILURES = 2;
/** How long transient failures keep a circuit open ("degraded for 5 min"). */
export const CIRCUIT_OPEN_MS = 5 * 60_000;
/** How long an auth or billing failure keeps the provider open: a human must fix the key or account. */
export const CIRCUIT_AUTH_OPEN_MS = 30 * 60_000;
/** How long a rate limit keeps a circuit open (`LLM_CIRCUIT_RESET_RATE_LIMIT_MS`): limits are per minute. */
export const CIRCUIT_RATE_LIMIT_OPEN_MS = 30_000;
/** How long a 404 "no such model" keeps the model open: a model name does not start existing within minutes. */
export const CIRCUIT_MODEL_UNAVAILABLE_OPEN_MS = 30 * 60_000;
/**
 * After this long without an outcome a half-open trial is presumed lost (e.g. its worker task was
 * dropped) and another request may try; without it a leaked trial would block the model forever.
 */
export const CIRCUIT_TRIAL_LEASE_MS = 5 * 60_000;

export type BreakerFailureKind = 'transient' | 'rate_limit' | 'auth' | 'model_unavailable';

export type CircuitState = 'closed' | 'open' | 'half_open';

export interface CircuitSnapshot {
  state: CircuitState;
  /** When an open circuit becomes half-open (epoch ms); set for open and half-open circuits. */
  openUntil?: number;
  /** The failure that opened it. */
  reason?: BreakerFailureKind;
  /** Whether the provider-wide circuit (auth/billing) is what is open. */
  providerWide?: boolean;
  consecutiveFailures: number;
}

export interface CircuitBreakerOptions {
  now?: () => number;
}

interface Entry {
  consecutiveFailures: number;
  openUntil?: number;
  reason?: BreakerFailureKind;
  /** When the current half-open trial started, if one is in flight. */
  trialStartedAt?: number;
}

const WINDOW_MS: Readonly<Record<BreakerFailureKind, number>> = {
  transient: CIRCUIT_OPEN_MS,
  rate_limit: CIRCUIT_RATE_LIMIT_OPEN_MS,
  auth: CIRCUIT_AUTH_OPEN_MS,
  model_unavailable: CIRCUIT_MODEL_UNAVAILABLE_OPEN_MS,
};

/** The breaker key of a provider and model, e.g. `anthropic:claude-sonnet-4-5`. */
export function circuitKey(provider: string, model: string): string {
  return `${provider}:${model}`;
}

export class CircuitBreaker {
  private readonly now: () => number;
  private readonly models = new Map<string, Entry>();
  /** Provider-wide circuits, opened by auth and billing failures. */
  private readonly providers = new Map<string, Entry>();

  constructor(options: CircuitBreakerOptions = {}) {
    this.now = options.now ?? Date.now;
  }

  /** The circuit as a request to `provider`/`model` would see it now. */
  snapshot(provider: string, model: string): CircuitSnapshot {
    const now = this.now();
    const modelEntry = this.models.get(circuitKey(provider, model));
    const providerEntry = this.providers.get(provider);
    const consecutiveFailures = modelEntry?.consecutiveFailures ?? 0;
    const providerState = stateOf(providerEntry, now);
    const modelState = stateOf(modelEntry, now);
    for (const state of ['open', 'half_open'] as const) {
      const useProvider =
        providerState === state &&
        (modelState !== state || (providerEntry!.openUntil ?? 0) >= (modelEntry!.openUntil ?? 0));
      if (useProvider)
        return {
          state,
          openUntil: providerEntry!.openUntil,
          reason: providerEntry!.reason,
          providerWide: true,
          consecutiveFailures,
        };
      if (modelState === state)
        return { state, openUntil: modelEntry!.openUntil, reason: modelEntry!.reason, consecutiveFailures };
    }
    return { state: 'closed', consecutiveFailures };
  }

  /**
   * Whether a request may go to `provider`/`model` now. Closed: yes. Open: no. Half-open: yes for
   * exactly one caller (the trial), which must then report `recordSuccess`, `recordFailure` or `release`.
   */
  tryAcquire(provider: string, model: string): boolean {
    const now = this.now();
    const entries = [this.providers.get(provider), this.models.get(circuitKey(provider, model))];
    if (entries.some((entry) => stateOf(entry, now) === 'open')) return false;
    const halfOpen = entries.filter((entry): entry is Entry => stateOf(entry, now) === 'half_open');
    const trialRunning = halfOpen.some(
      (entry) => entry.trialStartedAt !== undefined && now - entry.trialStartedAt < CIRCUIT_TRIAL_LEASE_MS,
    );
    if (trialRunning) return false;
    for (const entry of halfOpen) entry.trialStartedAt = now;
    return true;
  }

  /** The provider answered: close the model's circuit and the provider's. */
  recordSuccess(provider: string, model: string): void {
    this.models.delete(circuitKey(provider, model));
    this.providers.delete(provider);
  }

  /** The call failed in a way that says something about the provider's health. */
  recordFailure(provider: string, model: string, kind: BreakerFailureKind): void {
    const now = this.now();
    if (kind === 'auth') {
      const entry = this.providers.get(provider) ?? { consecutiveFailures: 0 };
      entry.consecutiveFailures += 1;
      open(entry, kind, now);
      this.providers.set(provider, entry);
      this.release(provider, model);
      return;
    }
    const key = circuitKey(provider, model);
    const entry = this.models.get(key) ?? { consecutiveFailures: 0 };
    const wasTripped = entry.openUntil !== undefined;
    entry.consecutiveFailures += 1;
    entry.trialStartedAt = undefined;
    if (kind !== 'transient' || wasTripped || entry.consecutiveFailures >= CIRCUIT_OPEN_AFTER_FAILURES)
      open(entry, kind, now);
    this.models.set(key, entry);
    // The provider-wide circuit (if any) stays as it is; only its trial is handed back.
    const providerEntry = this.providers.get(provider);
    if (providerEntry) providerEntry.trialStartedAt = undefined;
  }

  /** The call ended without a verdict on the provider (aborted, or the request itself was invalid): free a half-open trial. */
  release(provider: string, model: string): void {
    const modelEntry = this.models.get(circuitKey(provider, model));
    if (modelEntry) modelEntry.trialStartedAt = undefined;
    const providerEntry = this.providers.get(provider);
    if (providerEntry) providerEntry.trialStartedAt = undefined;
  }

  /** Forget everything (tests, or an operator after fixing a key). */
  reset(): void {
    this.models.clear();
    this.providers.clear();
  }
}

function stateOf(entry: Entry | undefined, now: number): CircuitState {
  if (entry?.openUntil === undefined) return 'closed';
  return now < entry.openUntil ? 'open' : 'half_open';
}

/** Opens for the kind's full window from now, never shortening a longer window already running. */
function open(entry: Entry, kind: BreakerFailureKind, now: number): void {
  const until = now + WINDOW_MS[kind];
  const current = entry.openUntil !== undefined && entry.openUntil > now ? entry.openUntil : undefined;
  if (current === undefined || until >= current) {
    entry.openUntil = until;
    entry.reason = kind;
  }
  entry.trialStartedAt = undefined;
}
