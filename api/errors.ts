/**
 * Every failure leaves the API as `{ error: { code, message } }` with a status a client can act on.
 * Internal errors are logged and answered with a generic message: no stack trace reaches a client.
 */
import { InvalidAgentError } from '../activities/store/agents';
import {
  InvalidAnnouncementError,
  InvalidOrganisationError,
  UnknownOrganisationError,
} from '../activities/store/organisations';
import { InvalidSkillError } from '../activities/store/skills';
import { apiAnswerOf, TaskGraphError } from '../client';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export const errorBody = (error: ApiError) => ({ error: { code: error.code, message: error.message } });

/** Fastify's own error codes, mapped to ours. */
const FASTIFY_ERRORS: Record<string, { status: number; code: string; message: (e: Error) => string }> = {
  FST_ERR_CTP_BODY_TOO_LARGE: {
    status: 413,
    code: 'payload_too_large',
    message: () => 'the request body is larger than this API accepts',
  },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    status: 415,
    code: 'unsupported_media_type',
    message: () => 'send the body as application/json',
  },
  FST_ERR_CTP_EMPTY_JSON_BODY: {
    status: 400,
    code: 'malformed_json',
    message: () => 'the body is empty but Content-Type says application/json; send a JSON object',
  },
  FST_ERR_CTP_INVALID_JSON_BODY: {
    status: 400,
    code: 'malformed_json',
    message: (e) => `the body is not valid JSON (${e.message})`,
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: {
    status: 400,
    code: 'invalid_request',
    message: () => 'Content-Length does not match the body',
  },
};

/** Where a request's unexpected failure was logged, so the answer can send the reader there. */
export interface FailureLog {
  requestId: string;
  /** E.g. "the API process's standard error". */
  where: string;
}

/**
 * The ApiError a failure is answered with. An unexpected one (500) names the request id it was logged
 * under and where that log is, when `log` says.
 */
export function toApiError(error: unknown, log?: FailureLog): ApiError {
  if (error instanceof ApiError) return error;
  const e = error as Error & { code?: string; statusCode?: number };
  const known = e.code ? FASTIFY_ERRORS[e.code] : undefined;
  if (known) return new ApiError(known.status, known.code, known.message(e));
  // Fastify's JSON parser reports SyntaxError with status 400.
  if (e instanceof SyntaxError && e.statusCode === 400)
    return new ApiError(400, 'malformed_json', `the body is not valid JSON (${e.message})`);
  // The client's refusals and Temporal's (one mapping, shared with the CLI).
  const answer = apiAnswerOf(error);
  if (answer) return new ApiError(answer.status, answer.code, answer.message);
  if (error instanceof UnknownOrganisationError) return new ApiError(404, 'organisation_not_found', error.message);
  // The stores' own validation (what a folder and a request share): its words name every problem.
  if (
    error instanceof InvalidAgentError ||
    error instanceof InvalidOrganisationError ||
    error instanceof InvalidSkillError ||
    error instanceof InvalidAnnouncementError
  ) {
    return new ApiError(400, 'invalid_request', error.message);
  }
  if (error instanceof TaskGraphError) {
    if (error.code === 'unknown-agent') return new ApiError(404, 'agent_not_found', error.message);
    return new ApiError(
      error.code === 'forbidden' ? 403 : error.code === 'invalid-state' ? 409 : 400,
      'invalid_request',
      error.message,
    );
  }
  if (e.statusCode !== undefined && e.statusCode >= 400 && e.statusCode < 500)
    return new ApiError(e.statusCode, 'invalid_request', e.message);
  const whereLogged = log
    ? `the error is logged on ${log.where} with reqId ${log.requestId}`
    : 'the error is in its log';
  return new ApiError(500, 'internal', `the server failed to handle this request; ${whereLogged}`);
}
