/**
 * How the worker and the API stop on SIGTERM or SIGINT: they close what they opened, one step at a
 * time, and exit within STOP_GRACE_MS whatever happens. A step still running at the deadline (an
 * activity that ignores its cancellation, an OTLP collector that never answers) is named in the log
 * and abandoned, so an orchestrator never has to kill the process.
 */
import type { Server } from 'node:http';

/**
 * What docs/operations.md promises: a process exits this soon after SIGTERM or SIGINT. It covers the
 * worker's 10 s activity drain (`shutdownGraceTime` in create-worker.ts) plus closing, and stays inside
 * Kubernetes' default 30 s termination grace period.
 */
export const STOP_GRACE_MS = 15_000;
/** The process exits by itself this long after the signal, whatever is still closing: a second inside the promise. */
export const STOP_DEADLINE_MS = STOP_GRACE_MS - 1_000;

/** One thing to close: what the log calls it while waiting ("closing the metrics server"), and how. */
export type CloseStep = readonly [what: string, close: () => unknown];

export interface StopDeadline {
  /** Names what the stop is waiting for now: the line logged if the deadline passes says it. */
  waitingFor(what: string): void;
}

/**
 * Starts the clock at the stop signal. At `afterMs` it calls `onExpired` with what the stop was
 * still waiting for and exits with status 0: the process was asked to stop, and it has. The timer
 * does not keep the process alive.
 */
export function armStopDeadline(
  onExpired: (waitingFor: string, afterMs: number) => void,
  {
    afterMs = STOP_DEADLINE_MS,
    exit = (code: number) => process.exit(code),
  }: { afterMs?: number; exit?: (code: number) => void } = {},
): StopDeadline {
  let current = 'the stop to begin';
  setTimeout(() => {
    onExpired(current, afterMs);
    exit(0);
  }, afterMs).unref();
  return { waitingFor: (what) => (current = what) };
}

/**
 * Runs each step in turn. A step that fails is reported and the next still runs: one broken exporter
 * must not leave the database pool or a listening port open.
 */
export async function closeInOrder(
  steps: readonly CloseStep[],
  { deadline, onError }: { deadline?: StopDeadline; onError: (what: string, error: unknown) => void },
): Promise<void> {
  for (const [what, close] of steps) {
    deadline?.waitingFor(what);
    try {
      await close();
    } catch (error) {
      onError(what, error);
    }
  }
}

/** Stops listening and ends open keep-alive connections (a scraper's or a probe's), so the close completes. */
export async function closeServer(server: Server): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  await closed;
}
