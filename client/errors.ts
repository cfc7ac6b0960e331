/** The client library's errors, in one module that every client file can import without a cycle. */
import { FailureType } from '../workflows/failure-types';

/** The message of the innermost cause: a validator's "no round … is running" rather than "Workflow Update failed". */
export function innermostMessage(error: Error): string {
  let e: Error = error;
  while (e.cause instanceof Error) e = e.cause;
  return e.message;
}

/** The failure type of the innermost cause (e.g. `UnprocessedUpdate`). */
export function innermostType(error: Error): string | undefined {
  let e: Error = error;
  while (e.cause instanceof Error) e = e.cause;
  return (e as { type?: string }).type;
}

export class UnknownAgentError extends Error {
  readonly type = FailureType.UnknownAgent;
  constructor(readonly agentId: string) {
    super(`unknown agent ${JSON.stringify(agentId)}: create it first with upsertAgent / upsertAgentFromFolder`);
    this.name = 'UnknownAgentError';
  }
}

/** A delivery the agent refused (bad input, unknown task …): nothing was stored. */
export class DeliveryRejectedError extends Error {
  readonly type = FailureType.DeliveryRejected;
  constructor(
    message: string,
    override readonly cause?: unknown,
  ) {
    super(message);
    this.name = 'DeliveryRejectedError';
  }
}

/** A task's input that cannot start a task (what is wrong is in the message); nothing was started. */
export class InvalidTaskInputError extends Error {
  readonly type = FailureType.InvalidTaskInput;
  constructor(message: string) {
    super(message);
    this.name = 'InvalidTaskInputError';
  }
}
