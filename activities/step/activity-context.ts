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
