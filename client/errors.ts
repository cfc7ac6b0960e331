/** The client library's errors, in one module that every client file can import without a cycle. */
import { WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
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

/** A budget decision the task refused (no round running, not "raise"/"stop", a raise not above the spend). */
export class BudgetDecisionRejectedError extends Error {
  readonly type = FailureType.InvalidBudgetDecision;
  constructor(
    message: string,
    override readonly cause?: unknown,
  ) {
    super(message);
    this.name = 'BudgetDecisionRejectedError';
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

/**
 * A request about a task that the task cannot take (it has ended, is not in review, does not exist,
 * the approval request is unknown or decided). `status` and `code` are the HTTP API's answer for the
 * same refusal, so the API, the MCP endpoint and the CLI give it in the same words.
 */
export class TaskRefusedError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'TaskRefusedError';
  }
}

/** The task has ended: `what` ("cancellation", "a pause") would go nowhere. */
export const taskFinished = (taskId: string, state: string, what: string): TaskRefusedError =>
  new TaskRefusedError(409, 'task_finished', `task ${taskId} is ${state}; it no longer takes ${what}`);

/** A review decision for a task that is not waiting for one. */
export const notInReview = (taskId: string, state: string): TaskRefusedError =>
  new TaskRefusedError(409, 'not_in_review', `task ${taskId} is ${state}, not waiting for review`);

/** No such task (the same words as the API's 404). */
export const unknownTask = (taskId: string): TaskRefusedError =>
  new TaskRefusedError(404, 'task_not_found', `no task ${JSON.stringify(taskId)}`);

/** No such approval request. */
export const unknownApprovalRequest = (requestId: string): TaskRefusedError =>
  new TaskRefusedError(404, 'approval_not_found', `no approval request ${JSON.stringify(requestId)}`);

/** An approval request that was already decided (or expired). */
export const approvalDecided = (requestId: string, status: string): TaskRefusedError =>
  new TaskRefusedError(409, 'approval_decided', `approval request ${requestId} is already ${status}`);

/** What the HTTP API answers for a failure: its status, its code and its words. */
export interface ApiAnswer {
  status: number;
  code: string;
  message: string;
}

/**
 * The API's answer for a failure of the client library or of Temporal under it; undefined for a
 * failure the API does not name (it answers 500 and logs it). One mapping: `api/errors.ts` answers
 * requests with it and the CLI prints it, so both say the same thing.
 */
export function apiAnswerOf(error: unknown): ApiAnswer | undefined {
  if (error instanceof TaskRefusedError) return { status: error.status, code: error.code, message: error.message };
  if (error instanceof UnknownAgentError) return { status: 404, code: 'agent_not_found', message: error.message };
  if (error instanceof InvalidTaskInputError) return { status: 400, code: 'invalid_request', message: error.message };
  if (error instanceof DeliveryRejectedError) return { status: 400, code: 'invalid_request', message: error.message };
  if (error instanceof BudgetDecisionRejectedError)
    return { status: 409, code: 'invalid_budget_decision', message: error.message };
  if (error instanceof WorkflowUpdateFailedError) {
    // The update's validator refused it (unknown or already-decided request): its words are the message.
    const cause = (error.cause as { message?: string } | undefined)?.message ?? error.message;
    return { status: 409, code: 'update_rejected', message: cause };
  }
  if (error instanceof WorkflowNotFoundError)
    return { status: 409, code: 'task_not_running', message: 'the task has no running workflow any more' };
  return undefined;
}
