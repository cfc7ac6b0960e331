/**
 * Turns whatever a provider SDK throws into an `ApplicationFailure` with a stable `type` and an
 * explicit retry decision, so Temporal's retry policy (the only retry layer: SDK retries are off)
 * does the right thing:
 *
 * - retried: 408, 409, 429, 5xx, 529, connection failures and timeouts; a `retry-after-ms` or
 *   `retry-after` header becomes `nextRetryDelay`;
 * - not retried: 400, 401, 402 (billing), 403, 404, 422 and other 4xx, with a message naming the
 *   provider, model, HTTP status and the provider's own explanation;
 * - cancellation (the activity's abort signal firing) is not an error to classify: it returns
 *   `undefined` and the caller rethrows the original error unchanged.
 */
import {
  APIConnectionError as AnthropicConnectionError,
  APIConnectionTimeoutError as AnthropicConnectionTimeoutError,
  APIError as AnthropicApiError,
  APIUserAbortError as AnthropicUserAbortError,
} from '@anthropic-ai/sdk';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import {
  APIConnectionError as OpenAiConnectionError,
  APIConnectionTimeoutError as OpenAiConnectionTimeoutError,
  APIError as OpenAiApiError,
  APIUserAbortError as OpenAiUserAbortError,
} from 'openai';
import type { ProviderKind } from './types';
import { LlmFailureType } from '../../workflows/failure-types';

export { LlmFailureType } from '../../workflows/failure-types';

export type LlmFailureTypeName = (typeof LlmFailureType)[keyof typeof LlmFailureType];

/** Failure types Temporal should retry. */
export const RETRYABLE_LLM_FAILURE_TYPES: readonly LlmFailureTypeName[] = [
  LlmFailureType.RateLimited,
  LlmFailureType.Overloaded,
  LlmFailureType.ServerError,
  LlmFailureType.NetworkError,
  LlmFailureType.Timeout,
  LlmFailureType.Conflict,
  LlmFailureType.ProviderError,
];

/** Failure types that retrying cannot fix; also usable as a retry policy's `nonRetryableErrorTypes`. */
export const NON_RETRYABLE_LLM_FAILURE_TYPES: readonly LlmFailureTypeName[] = [
  LlmFailureType.AuthError,
  LlmFailureType.PermissionDenied,
  LlmFailureType.BillingError,
  LlmFailureType.NotFound,
  LlmFailureType.BadRequest,
  LlmFailureType.ConfigError,
];

/**
 * Longest `retry-after` honoured as `nextRetryDelay`. A larger value (a misconfigured proxy saying
 * "come back tomorrow") is clamped so a task is not parked for hours; Temporal retries again after.
 */
export const MAX_RETRY_AFTER_MS = 15 * 60_000;

/** The one small object in `ApplicationFailure.details` of every LLM failure. */
export interface LlmFailureDetails {
  provider: string;
  model: string;
  /** HTTP status; absent for network errors and timeouts. */
  status?: number;
  /** The provider's error category, e.g. `authentication_error`, `insufficient_quota`. */
  errorType?: string;
  /** The provider's request id, for support tickets. */
  requestId?: string;
}

export interface LlmErrorContext {
  /** Configured provider name, e.g. `anthropic`. */
  provider: string;
  model: string;
  /** Provider kind, for the "check ANTHROPIC_API_KEY" hint; guessed from the name when absent. */
  kind?: ProviderKind;
  /** Clock for HTTP-date `retry-after` values. */
  now?: () => number;
}

type HeaderSource = { get(name: string): string | null } | Record<string, string | undefined> | null | undefined;

function readHeader(headers: HeaderSource, name: string): string | undefined {
  if (!headers) return undefined;
  if (typeof (headers as { get?: unknown }).get === 'function') {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  }
  const record = headers as Record<string, string | undefined>;
  const key = Object.keys(record).find((k) => k.toLowerCase() === name);
  return key === undefined ? undefined : record[key];
}

/**
 * Milliseconds the provider asked us to wait: `retry-after-ms` (OpenAI, Anthropic) first, then
 * `retry-after` as seconds or as an HTTP date. `undefined` when absent, unparseable or not in the future.
 */
export function parseRetryAfterMs(headers: HeaderSource, now: number = Date.now()): number | undefined {
  const ms = readHeader(headers, 'retry-after-ms');
  if (ms !== undefined && ms.trim() !== '') {
    const value = Number(ms);
    if (Number.isFinite(value) && value > 0) return Math.ceil(value);
  }
  const retryAfter = readHeader(headers, 'retry-after')?.trim();
  if (!retryAfter) return undefined;
  if (/^\d+(\.\d+)?$/.test(retryAfter)) {
    const seconds = Number(retryAfter);
    return seconds > 0 ? Math.ceil(seconds * 1000) : undefined;
  }
  const at = Date.parse(retryAfter);
  if (Number.isNaN(at) || at <= now) return undefined;
  return at - now;
}

/** True for an aborted request or a cancelled activity: never retried, never a fallback trigger. */
export function isCancellation(err: unknown): boolean {
  if (err instanceof CancelledFailure) return true;
  if (err instanceof AnthropicUserAbortError) return true;
  if (err instanceof OpenAiUserAbortError) return !isTimeoutReason((err as { cause?: unknown }).cause);
  if (typeof err === 'object' && err !== null && (err as { name?: unknown }).name === 'AbortError') return true;
  return false;
}

/** `AbortSignal.timeout()` aborts with a `TimeoutError`: that is a timeout, not a cancellation. */
function isTimeoutReason(reason: unknown): boolean {
  return typeof reason === 'object' && reason !== null && (reason as { name?: unknown }).name === 'TimeoutError';
}

/** Error codes (Node / undici) meaning the connection failed: retry, maybe elsewhere. */
const NETWORK_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
]);
/** Error codes meaning the connection or response timed out. */
const TIMEOUT_ERROR_CODES = new Set([
  'ETIMEDOUT',
  'ESOCKETTIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);
/** Messages of network failures that carry no code (the usual socket and DNS failure texts). */
const NETWORK_ERROR_MESSAGE = /fetch failed|socket hang up|getaddrinfo|network error|dns/i;
/** How deep to follow `cause` chains looking for a network error code. */
const MAX_CAUSE_DEPTH = 5;

type NetworkCause = { kind: 'network' | 'timeout'; detail: string };

/** The errors of a `cause` chain, outermost first. */
function causeChain(err: unknown): Array<{ code?: unknown; message?: unknown; name?: unknown }> {
  const chain: Array<{ code?: unknown; message?: unknown; name?: unknown }> = [];
  let current: unknown = err;
  while (chain.length < MAX_CAUSE_DEPTH && typeof current === 'object' && current !== null) {
    chain.push(current as { code?: unknown; message?: unknown; name?: unknown });
    current = (current as { cause?: unknown }).cause;
  }
  return chain;
}

/** A network failure or timeout anywhere in the cause chain; a system error code beats a vague message. */
function findNetworkCause(err: unknown): NetworkCause | undefined {
  const chain = causeChain(err);
  for (const link of chain) {
    const text = typeof link.message === 'string' ? link.message : '';
    if (typeof link.code === 'string') {
      if (TIMEOUT_ERROR_CODES.has(link.code)) return { kind: 'timeout', detail: text || link.code };
      if (NETWORK_ERROR_CODES.has(link.code))
        return { kind: 'network', detail: text.includes(link.code) ? text : `${link.code} ${text}`.trim() };
    }
    if (isTimeoutReason(link)) return { kind: 'timeout', detail: text || 'timed out' };
  }
  for (const link of chain) {
    if (typeof link.message === 'string' && NETWORK_ERROR_MESSAGE.test(link.message))
      return { kind: 'network', detail: link.message };
  }
  return undefined;
}

/** What an HTTP error from either SDK says, in one shape. */
interface HttpErrorInfo {
  status: number | undefined;
  errorType: string | undefined;
  code: string | undefined;
  providerMessage: string;
  headers: HeaderSource;
  requestId: string | undefined;
}

function nonEmpty(value: unknown): string | undefined {
  return typeof value === 'string' && value.trim() !== '' ? value : undefined;
}

function readHttpError(err: unknown): HttpErrorInfo | undefined {
  if (err instanceof AnthropicApiError) {
    return {
      status: err.status,
      errorType: nonEmpty(err.type),
      code: nonEmpty(err.errorCode),
      providerMessage: nonEmpty(err.apiMessage) ?? err.message,
      headers: err.headers,
      requestId: nonEmpty(err.requestID),
    };
  }
  if (err instanceof OpenAiApiError) {
    const body = err.error as { message?: unknown } | undefined;
    return {
      status: err.status,
      errorType: nonEmpty(err.type),
      code: nonEmpty(err.code),
      providerMessage: nonEmpty(body?.message) ?? err.message,
      headers: err.headers,
      requestId: nonEmpty(err.requestID),
    };
  }
  // An adapter for another OpenAI-compatible client may throw its own error with a numeric status.
  if (err instanceof Error && typeof (err as { status?: unknown }).status === 'number') {
    const { status, headers } = err as Error & { status: number; headers?: HeaderSource };
    return {
      status,
      errorType: undefined,
      code: undefined,
      providerMessage: err.message,
      headers,
      requestId: undefined,
    };
  }
  return undefined;
}

/**
 * An error event inside a stream arrives after a 200, so the SDK's error has no status: infer it
 * from the provider's error type (Anthropic's types, OpenAI's types and codes).
 */
const STATUS_BY_ERROR_TYPE: Readonly<Record<string, number>> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  rate_limit_error: 429,
  rate_limit_exceeded: 429,
  insufficient_quota: 402,
  api_error: 500,
  server_error: 500,
  timeout_error: 504,
  overloaded_error: 529,
};
/** A streamed error of unknown type is most likely the server failing mid-answer. */
const UNKNOWN_STREAM_ERROR_STATUS = 500;

/** Anthropic's "overloaded" status. */
const HTTP_OVERLOADED = 529;
/** Nginx's "client closed request": the connection dropped, not our request's fault. */
const HTTP_CLIENT_CLOSED = 499;

/** Billing failures hide behind 400 / 403 / 429 on some providers (OpenAI's 429 `insufficient_quota`). */
const BILLING_ERROR_TYPES = new Set(['billing_error', 'insufficient_quota']);
const BILLING_MESSAGE =
  /credit balance|insufficient[ _](balance|quota|credit|funds)|exceeded your current quota|billing/i;

function isBilling(info: HttpErrorInfo, status: number): boolean {
  if (status === 402) return true;
  if (BILLING_ERROR_TYPES.has(info.errorType ?? '') || BILLING_ERROR_TYPES.has(info.code ?? '')) return true;
  return (status === 400 || status === 403 || status === 429) && BILLING_MESSAGE.test(info.providerMessage);
}

function apiKeyHint(ctx: LlmErrorContext): string {
  const kind = ctx.kind ?? (ctx.provider === 'anthropic' || ctx.provider === 'openai' ? ctx.provider : undefined);
  if (kind === 'anthropic') return 'check ANTHROPIC_API_KEY';
  if (kind === 'openai') return 'check OPENAI_API_KEY';
  return `check the API key configured for provider "${ctx.provider}"`;
}

function formatDelay(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${(ms / 1000).toFixed(1)}s`;
}

function make(
  type: LlmFailureTypeName,
  message: string,
  retryable: boolean,
  details: LlmFailureDetails,
  cause: unknown,
  nextRetryDelayMs?: number,
): ApplicationFailure {
  return ApplicationFailure.create({
    type,
    message,
    nonRetryable: !retryable,
    details: [details],
    cause: cause instanceof Error ? cause : undefined,
    nextRetryDelay:
      retryable && nextRetryDelayMs !== undefined ? Math.min(nextRetryDelayMs, MAX_RETRY_AFTER_MS) : undefined,
  });
}

function fromHttpError(info: HttpErrorInfo, err: unknown, ctx: LlmErrorContext, now: number): ApplicationFailure {
  const { provider, model } = ctx;
  const status =
    info.status ??
    STATUS_BY_ERROR_TYPE[info.errorType ?? ''] ??
    STATUS_BY_ERROR_TYPE[info.code ?? ''] ??
    UNKNOWN_STREAM_ERROR_STATUS;
  const label = [status, info.errorType ?? info.code].filter((part) => part !== undefined).join(' ');
  const said = info.providerMessage;
  const details: LlmFailureDetails = { provider, model, status };
  if (info.errorType ?? info.code) details.errorType = info.errorType ?? info.code;
  if (info.requestId) details.requestId = info.requestId;
  const retryAfter = parseRetryAfterMs(info.headers, now);
  const waitNote =
    retryAfter !== undefined ? `; retry after ${formatDelay(Math.min(retryAfter, MAX_RETRY_AFTER_MS))}` : '';
  const T = LlmFailureType;

  if (isBilling(info, status)) {
    return make(
      T.BillingError,
      `${provider} refused ${model} for billing reasons (${label}): ${said} — check the account's credit balance or plan`,
      false,
      details,
      err,
    );
  }
  switch (status) {
    case 401:
      return make(
        T.AuthError,
        `${provider} rejected the API key (${label}): ${said} — ${apiKeyHint(ctx)}`,
        false,
        details,
        err,
      );
    case 403:
      return make(
        T.PermissionDenied,
        `${provider} denied access to ${model} (${label}): ${said} — the API key may not use this model, organisation or region`,
        false,
        details,
        err,
      );
    case 404:
      return make(
        T.NotFound,
        `${provider} does not know model ${model} (${label}): ${said} — check the model name and the provider's base URL`,
        false,
        details,
        err,
      );
    case 408:
      return make(
        T.Timeout,
        `${provider} timed out the request to ${model} (${label}): ${said}${waitNote}`,
        true,
        details,
        err,
        retryAfter,
      );
    case 409:
      return make(
        T.Conflict,
        `${provider} reported a conflict for ${model} (${label}): ${said}${waitNote}`,
        true,
        details,
        err,
        retryAfter,
      );
    case 429:
      return make(
        T.RateLimited,
        `${provider} rate-limited requests to ${model} (${label}): ${said}${waitNote}`,
        true,
        details,
        err,
        retryAfter,
      );
    case HTTP_CLIENT_CLOSED:
      return make(
        T.ServerError,
        `${provider} closed the request to ${model} (${label}): ${said}${waitNote}`,
        true,
        details,
        err,
        retryAfter,
      );
  }
  if (status === HTTP_OVERLOADED || info.errorType === 'overloaded_error') {
    return make(
      T.Overloaded,
      `${provider} is overloaded and refused ${model} (${label}): ${said}${waitNote}`,
      true,
      details,
      err,
      retryAfter,
    );
  }
  if (status >= 500) {
    return make(
      T.ServerError,
      `${provider} failed serving ${model} (${label}): ${said}${waitNote}`,
      true,
      details,
      err,
      retryAfter,
    );
  }
  return make(
    T.BadRequest,
    `${provider} rejected the request to ${model} as invalid (${label}): ${said}`,
    false,
    details,
    err,
  );
}

function errorText(err: unknown): string {
  if (err instanceof Error) return err.message;
  return typeof err === 'string' ? err : (JSON.stringify(err) ?? String(err));
}

/**
 * The `ApplicationFailure` to throw for an error from a provider call, or `undefined` when the
 * error is a cancellation (abort) that must propagate unchanged. An `ApplicationFailure` that is
 * already classified is returned as is.
 */
export function classifyProviderError(err: unknown, ctx: LlmErrorContext): ApplicationFailure | undefined {
  if (err instanceof ApplicationFailure) return err;
  if (isCancellation(err)) return undefined;
  const { provider, model } = ctx;
  const now = ctx.now?.() ?? Date.now();
  const details: LlmFailureDetails = { provider, model };

  const isSdkTimeout =
    err instanceof AnthropicConnectionTimeoutError ||
    err instanceof OpenAiConnectionTimeoutError ||
    (err instanceof OpenAiUserAbortError && isTimeoutReason((err as { cause?: unknown }).cause));
  if (isSdkTimeout) {
    return make(
      LlmFailureType.Timeout,
      `${provider} request for ${model} timed out: ${errorText(err)}`,
      true,
      details,
      err,
    );
  }
  if (err instanceof AnthropicConnectionError || err instanceof OpenAiConnectionError) {
    const cause = findNetworkCause((err as { cause?: unknown }).cause);
    if (cause?.kind === 'timeout') {
      return make(
        LlmFailureType.Timeout,
        `${provider} request for ${model} timed out: ${cause.detail}`,
        true,
        details,
        err,
      );
    }
    const why = cause ? `${errorText(err)} (${cause.detail})` : errorText(err);
    return make(LlmFailureType.NetworkError, `could not reach ${provider} for ${model}: ${why}`, true, details, err);
  }

  const http = readHttpError(err);
  if (http) return fromHttpError(http, err, ctx, now);

  const network = findNetworkCause(err);
  if (network?.kind === 'timeout') {
    return make(
      LlmFailureType.Timeout,
      `${provider} request for ${model} timed out: ${network.detail}`,
      true,
      details,
      err,
    );
  }
  if (network) {
    return make(
      LlmFailureType.NetworkError,
      `could not reach ${provider} for ${model}: ${network.detail}`,
      true,
      details,
      err,
    );
  }
  return make(
    LlmFailureType.ProviderError,
    `${provider} call to ${model} failed: ${errorText(err)}`,
    true,
    details,
    err,
  );
}

/** The `LlmFailureDetails` of a failure produced here, if any. */
export function llmFailureDetails(failure: ApplicationFailure): LlmFailureDetails | undefined {
  const first = failure.details?.[0];
  if (typeof first === 'object' && first !== null && 'provider' in first && 'model' in first)
    return first as LlmFailureDetails;
  return undefined;
}
