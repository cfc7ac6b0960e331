/**
 * Every stable `ApplicationFailure.type` (and client error `type`) the product throws or matches on,
 * in one registry that workflows, activities, the client and the API import. Callers in any language
 * branch on these strings, so a value never changes once released; add new ones here, never as a
 * literal at the throw site (`test/unit/failure-types.test.ts` fails on one).
 */
export const FailureType = {
  /** An agent id that names no agent. */
  UnknownAgent: 'UnknownAgent',
  /** A task id that names no task. */
  UnknownTask: 'UnknownTask',
  /** A task workflow's input is malformed (missing agent id, a title needed to create the task, a bad priority…). */
  InvalidTaskInput: 'InvalidTaskInput',
  /** The task id already belongs to another agent, or that task already ended: a task id runs once. */
  TaskConflict: 'TaskConflict',
  /** The workflow asked for a move the task state machine forbids (a bug, never retried). */
  InvalidTaskTransition: 'InvalidTaskTransition',
  /** A malformed or stale human decision sent by update (rejected by its validator). */
  InvalidDecision: 'InvalidDecision',
  /** A budget decision the validator refused. */
  InvalidBudgetDecision: 'InvalidBudgetDecision',
  /** A sub-agent failed (details: `[{ usage }]`, what it spent). */
  SubagentFailed: 'SubagentFailed',
  /** A round stopped by a human's budget decision (never retried). */
  BudgetStopped: 'BudgetStopped',
  /** An LLM call the budget guard blocked (never retried). */
  BudgetExceeded: 'BudgetExceeded',
  /** A mailbox delivery the agent refused: nothing was stored. */
  InvalidDelivery: 'InvalidDelivery',
  /** A group that does not exist, or a sender or recipient that is not a member of it. */
  InvalidGroup: 'InvalidGroup',
  /** The client's wrapper for a refused delivery (the agent's reason is its cause). */
  DeliveryRejected: 'DeliveryRejected',
  /** An approval hand-on the validator refused (not pending, not an allowed approver, to oneself…). */
  InvalidDelegation: 'InvalidDelegation',
  /** A fork that cannot be made from what was asked (unknown task, a step past the end, bad overrides). */
  InvalidFork: 'InvalidFork',
  /** An eval workflow's input is malformed. */
  InvalidEval: 'InvalidEval',
  /**
   * A local step that stopped because its round was asked to stop (a pause or a cancel recorded in
   * PostgreSQL): the round then waits for the cancellation itself. Never retried.
   */
  RoundStopRequested: 'RoundStopRequested',
  /** Temporal's own type for an update that reached a run which ended before handling it. */
  UnprocessedUpdate: 'UnprocessedUpdate',
} as const;

export type FailureTypeName = (typeof FailureType)[keyof typeof FailureType];

/** Stable `ApplicationFailure.type` values for LLM failures; workflows and retry policies match on these. */
export const LlmFailureType = {
  /** 429: too many requests or tokens per minute. Retryable. */
  RateLimited: 'LlmRateLimited',
  /** 529 / `overloaded_error`: the provider is shedding load. Retryable. */
  Overloaded: 'LlmOverloaded',
  /** Other 5xx (and 499). Retryable. */
  ServerError: 'LlmServerError',
  /** Connection refused / reset, DNS failure. Retryable. */
  NetworkError: 'LlmNetworkError',
  /** Request timed out (client-side timeout or 408). Retryable. */
  Timeout: 'LlmTimeout',
  /** 409: a conflicting concurrent request. Retryable. */
  Conflict: 'LlmConflict',
  /** 401: the API key is missing, wrong or revoked. Not retryable. */
  AuthError: 'LlmAuthError',
  /** 403: the key may not use this model or region. Not retryable. */
  PermissionDenied: 'LlmPermissionDenied',
  /** 402 / `billing_error` / `insufficient_quota` / credit balance too low. Not retryable. */
  BillingError: 'LlmBillingError',
  /** 404: no such model (or a wrong base URL). Not retryable. */
  NotFound: 'LlmNotFound',
  /** 400, 413, 422 and other 4xx: the request itself is invalid. Not retryable. */
  BadRequest: 'LlmBadRequest',
  /** An error the classifier does not recognise (e.g. a malformed stream). Retryable. */
  ProviderError: 'LlmProviderError',
  /** The router was asked for a model or provider that is not configured. Not retryable. */
  ConfigError: 'LlmConfigError',
} as const;
