import { Context } from '@temporalio/activity';

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
