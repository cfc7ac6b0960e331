import { sql, type Kysely } from 'kysely';
import type { Database } from '../schema/database';

/**
 * The worker's view of its dependencies, for logs and a health endpoint (`/healthz`).
 *
 *   const health = new DependencyHealth({ probes: { postgres: …, temporal: … }, onChange: log });
 *   health.start();
 *   health.snapshot(); // { status: 'ok', postgres: { state: 'up', since, … }, temporal: { … } }
 *
 * Each dependency is probed every HEALTH_PROBE_INTERVAL_MS and can also be reported down at once
 * (a pool `'error'` event); every change of state is passed to `onChange` (the worker logs it).
 */
export type DependencyName = 'postgres' | 'temporal';
export type DependencyState = 'starting' | 'up' | 'down';

export interface DependencyStatus {
  state: DependencyState;
  /** ISO time of the last change of state. */
  since: string;
  /** ISO time of the last probe, successful or not. */
  checkedAt?: string;
  /** Why it is down (the last error), while it is. */
  lastError?: string;
}

export interface HealthSnapshot {
  /** `ok` when every dependency is up; `degraded` otherwise (the worker keeps running and retries). */
  status: 'ok' | 'degraded';
  postgres: DependencyStatus;
  temporal: DependencyStatus;
}

/** Often enough that a restart shows in the logs within seconds; cheap (`select 1`, one RPC). */
export const HEALTH_PROBE_INTERVAL_MS = 5_000;
/** A probe slower than this counts as down: a healthy local dependency answers in milliseconds. */
export const HEALTH_PROBE_TIMEOUT_MS = 3_000;

export type Probe = () => Promise<unknown>;

export interface DependencyHealthOptions {
  probes: Record<DependencyName, Probe>;
  onChange?: (name: DependencyName, status: DependencyStatus) => void;
  intervalMs?: number;
}

export class DependencyHealth {
  private readonly states: Record<DependencyName, DependencyStatus>;
  private timer?: NodeJS.Timeout;

  constructor(private readonly options: DependencyHealthOptions) {
    const since = new Date().toISOString();
    this.states = { postgres: { state: 'starting', since }, temporal: { state: 'starting', since } };
  }

  /** Probes now and then every interval until `stop`. */
  start(): void {
    void this.probeAll();
    this.timer = setInterval(() => void this.probeAll(), this.options.intervalMs ?? HEALTH_PROBE_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** A copy of the current states: safe to serialise as the body of `/healthz`. */
  snapshot(): HealthSnapshot {
    const postgres = { ...this.states.postgres };
    const temporal = { ...this.states.temporal };
    return { status: postgres.state === 'up' && temporal.state === 'up' ? 'ok' : 'degraded', postgres, temporal };
  }

  /** Records an outcome observed elsewhere (a pool `'error'`, a failed poll) without waiting for a probe. */
  report(name: DependencyName, up: boolean, error?: unknown): void {
    const now = new Date().toISOString();
    const previous = this.states[name];
    const state: DependencyState = up ? 'up' : 'down';
    const next: DependencyStatus = {
      state,
      since: previous.state === state ? previous.since : now,
      checkedAt: now,
      ...(up ? {} : { lastError: error instanceof Error ? error.message : String(error ?? 'unknown error') }),
    };
    this.states[name] = next;
    if (previous.state !== state) this.options.onChange?.(name, { ...next });
  }

  async probeAll(): Promise<HealthSnapshot> {
    await Promise.all((Object.keys(this.options.probes) as DependencyName[]).map((name) => this.probe(name)));
    return this.snapshot();
  }

  private async probe(name: DependencyName): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.options.probes[name](),
        new Promise(
          (_, reject) =>
            (timer = setTimeout(
              () => reject(new Error(`no answer within ${HEALTH_PROBE_TIMEOUT_MS} ms`)),
              HEALTH_PROBE_TIMEOUT_MS,
            )),
        ),
      ]);
      this.report(name, true);
    } catch (error) {
      this.report(name, false, error);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** `select 1` through the application's pool. */
export const postgresProbe =
  (db: Kysely<Database>): Probe =>
  async () =>
    sql`select 1`.execute(db);

/** One cheap frontend RPC (`GetSystemInfo`) on the worker's own connection to Temporal. */
export const temporalProbe =
  (connection: { workflowService: { getSystemInfo(request: object): Promise<unknown> } }): Probe =>
  async () =>
    connection.workflowService.getSystemInfo({});
