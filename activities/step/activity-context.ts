import { Context } from '@temporalio/activity';
import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The running activity's context, or undefined when the step runs outside an activity (the in-process
 * bench and direct unit calls): without it the step neither heartbeats nor listens for cancellation.
 */
export function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}

/**
 * Heartbeats the running activity. A local activity has no heartbeat (its workflow task's timeout
 * notices a dead worker), so there the call is skipped.
 */
export function heartbeat(ctx: Context | undefined, details?: unknown): void {
  if (ctx && !ctx.info.isLocal) ctx.heartbeat(details);
}

/** The stop signal of the step running in this async context (a local step's recorded stop request). */
const stopSignals = new AsyncLocalStorage<AbortSignal>();

/**
 * What the step's provider calls and tools listen to: the activity's cancellation and, in a local step,
 * its round's stop request (a local activity learns of a cancellation only when its workflow task ends).
 */
export function cancellationSignal(ctx: Context | undefined): AbortSignal | undefined {
  const stop = stopSignals.getStore();
  const own = ctx?.cancellationSignal;
  if (!stop) return own;
  return own ? AbortSignal.any([own, stop]) : stop;
}

/** Runs `work` with `stop` as an extra cancellation signal for everything it calls. */
export function withStopSignal<T>(stop: AbortSignal, work: () => Promise<T>): Promise<T> {
  return stopSignals.run(stop, work);
}
