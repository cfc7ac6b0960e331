import type { ToolResultImage } from '../llm/types';
import type { ToolContext, ToolSpec } from './types';

/**
 * When a tool call's work can have begun, and what this process knows of the calls it began.
 *
 * The ledger's `started` row means "its effect may have happened": a retry that finds it never runs a
 * side-effecting call again. So the row must not be written before work that can fail without any
 * effect. A tool whose run reads the database before its effect (shell_execute judges the command
 * again and reads the workspace's known remotes) says so with `startsItsOwnEffect`, and calls
 * `effectBegins(ctx)` right before its first effect: only then is its `started` row written. A
 * database outage before that point leaves no row, and the retry runs the call, once.
 *
 * What this process began is also remembered in memory until its result is stored: when the result's
 * write fails (the database went away after the command ran), a retry in this process stores the
 * real result instead of reporting the call as interrupted.
 */

const ownStarts = new WeakSet<ToolSpec>();

/** Declares that `spec.run` calls `effectBegins(ctx)` before its first effect (see above). */
export function startsItsOwnEffect<T extends ToolSpec>(spec: T): T {
  ownStarts.add(spec);
  return spec;
}

export function marksItsOwnStart(spec: ToolSpec): boolean {
  return ownStarts.has(spec);
}

const beginnings = new WeakMap<object, () => Promise<void>>();

/**
 * Records that the call's effect begins now (its ledger `started` row), for a tool declared with
 * `startsItsOwnEffect`. Throws when the row cannot be written: the tool must then not start its effect.
 * A no-op outside the ledger (a tool run directly, as in unit tests).
 */
export async function effectBegins(ctx: ToolContext): Promise<void> {
  await beginnings.get(ctx)?.();
}

/** The ledger's side of `effectBegins`: `begin` runs when the tool run with `ctx` reaches its effect. */
export function onEffectBegins(ctx: ToolContext, begin: () => Promise<void>): void {
  beginnings.set(ctx, begin);
}

/**
 * Another execution of the call wrote its `started` row first (an earlier attempt still running): this
 * one must not run it. Thrown out of the activity, so its retry reads what that execution recorded.
 */
export class CallBegunElsewhereError extends Error {
  constructor(toolCallId: string) {
    super(`tool call ${toolCallId} was begun by another execution; it is not run twice`);
    this.name = 'CallBegunElsewhereError';
  }
}

/** A call's outcome as its run produced it, ready to be stored (again, after a failed write). */
export interface RanOutcome {
  /** Redacted, NUL-escaped text (`safeToolText`), not yet offloaded. */
  text: string;
  isError: boolean;
  redactions: number;
  images: ToolResultImage[];
}

type LocalRecord =
  /** Its `started` row's write failed: the row may exist, but this process began nothing. */
  { state: 'not-begun' } | { state: 'running'; settled: Promise<void> } | { state: 'ran'; outcome: RanOutcome };

/**
 * How many calls whose result was not stored yet are remembered: a call is forgotten once its result
 * is stored, so the map holds only calls cut off by an outage (or never retried, as when their task
 * was cancelled meanwhile); past this the oldest are forgotten and read as unknown.
 */
export const REMEMBERED_UNSTORED_CALLS = 10_000;

/** What this process knows of calls whose `started` row it wrote and whose result it has not stored yet. */
class LocalCalls {
  private readonly records = new Map<string, LocalRecord>();

  notBegun(key: string): void {
    this.set(key, { state: 'not-begun' });
  }

  /** The run begins; returns what to call with its outcome (undefined: cut off, outcome unknown). */
  running(key: string): (outcome: RanOutcome | undefined) => void {
    let settle!: () => void;
    this.set(key, { state: 'running', settled: new Promise<void>((r) => (settle = r)) });
    return (outcome) => {
      if (outcome) this.set(key, { state: 'ran', outcome });
      else this.records.delete(key);
      settle();
    };
  }

  /** The record of a call, once any run of it in this process has settled (`signal` stops the wait). */
  async settled(key: string, signal: AbortSignal): Promise<Exclude<LocalRecord, { state: 'running' }> | undefined> {
    for (;;) {
      const record = this.records.get(key);
      if (record?.state !== 'running') return record;
      const aborted = new Promise<never>((_, reject) => {
        if (signal.aborted) reject(signal.reason);
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
      await Promise.race([record.settled, aborted]);
    }
  }

  /** The call's result is stored: nothing to remember. */
  forget(key: string): void {
    this.records.delete(key);
  }

  private set(key: string, record: LocalRecord): void {
    this.records.delete(key);
    this.records.set(key, record);
    if (this.records.size > REMEMBERED_UNSTORED_CALLS) this.records.delete(this.records.keys().next().value!);
  }
}

export const localCalls = new LocalCalls();

export function localCallKey(sessionId: string, toolCallId: string): string {
  return `${sessionId}\0${toolCallId}`;
}

/** SQLSTATE classes and codes of a database that is unreachable or going away (not of a bad statement). */
const UNAVAILABLE_SQLSTATES = /^(08|57P0[1-3]$|53300$)/;
const UNAVAILABLE_SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH']);

/**
 * The error says PostgreSQL could not be reached or dropped the connection (the outage kind, gone on
 * a retry), as opposed to a statement that fails every time.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (UNAVAILABLE_SOCKET_CODES.has(code) || UNAVAILABLE_SQLSTATES.test(code))) return true;
  return /^Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error/.test(
    error.message,
  );
}
