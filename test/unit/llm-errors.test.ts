import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import * as AnthropicSdk from '@anthropic-ai/sdk';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import * as OpenAiSdk from 'openai';
import {
  classifyProviderError,
  isCancellation,
  LlmFailureType,
  llmFailureDetails,
  MAX_RETRY_AFTER_MS,
  NON_RETRYABLE_LLM_FAILURE_TYPES,
  parseRetryAfterMs,
  RETRYABLE_LLM_FAILURE_TYPES,
} from '../../activities/llm/errors';

const anthropicCtx = { provider: 'anthropic', model: 'claude-sonnet-4-5', kind: 'anthropic' as const };
const openaiCtx = { provider: 'openai', model: 'gpt-4.1', kind: 'openai' as const };

/** A real Anthropic SDK error, built the way the SDK builds it from an HTTP error response. */
function anthropicError(status: number, type: string, message: string, headers: Record<string, string> = {}) {
  return AnthropicSdk.APIError.generate(
    status,
    { type: 'error', error: { type, message } },
    undefined,
    new Headers({ 'request-id': 'req_011', ...headers }),
  );
}

/** A real OpenAI SDK error, built the way the SDK builds it from an HTTP error response. */
function openaiError(
  status: number,
  type: string,
  code: string | null,
  message: string,
  headers: Record<string, string> = {},
) {
  return OpenAiSdk.APIError.generate(
    status,
    { error: { message, type, code, param: null } },
    undefined,
    new Headers({ 'x-request-id': 'req_abc', ...headers }),
  );
}

function classify(err: unknown, ctx: Parameters<typeof classifyProviderError>[1] = anthropicCtx): ApplicationFailure {
  const failure = classifyProviderError(err, ctx);
  if (!failure) throw new Error('expected a failure, got a cancellation');
  return failure;
}

describe('failure type constants', () => {
  it('are stable strings, split into retryable and non-retryable', () => {
    expect(LlmFailureType).toEqual({
      RateLimited: 'LlmRateLimited',
      Overloaded: 'LlmOverloaded',
      ServerError: 'LlmServerError',
      NetworkError: 'LlmNetworkError',
      Timeout: 'LlmTimeout',
      Conflict: 'LlmConflict',
      AuthError: 'LlmAuthError',
      PermissionDenied: 'LlmPermissionDenied',
      BillingError: 'LlmBillingError',
      NotFound: 'LlmNotFound',
      BadRequest: 'LlmBadRequest',
      ProviderError: 'LlmProviderError',
      ConfigError: 'LlmConfigError',
    });
    const all = [...RETRYABLE_LLM_FAILURE_TYPES, ...NON_RETRYABLE_LLM_FAILURE_TYPES].sort();
    expect(all).toEqual(Object.values(LlmFailureType).sort());
  });
});

describe('classification by HTTP status (Anthropic SDK errors)', () => {
  const table: Array<[number, string, string, boolean, unknown]> = [
    [400, 'invalid_request_error', LlmFailureType.BadRequest, false, AnthropicSdk.BadRequestError],
    [401, 'authentication_error', LlmFailureType.AuthError, false, AnthropicSdk.AuthenticationError],
    [402, 'billing_error', LlmFailureType.BillingError, false, AnthropicSdk.PaymentRequiredError],
    [403, 'permission_error', LlmFailureType.PermissionDenied, false, AnthropicSdk.PermissionDeniedError],
    [404, 'not_found_error', LlmFailureType.NotFound, false, AnthropicSdk.NotFoundError],
    [408, 'timeout_error', LlmFailureType.Timeout, true, AnthropicSdk.RequestTimeoutError],
    [409, 'conflict_error', LlmFailureType.Conflict, true, AnthropicSdk.ConflictError],
    [413, 'request_too_large', LlmFailureType.BadRequest, false, AnthropicSdk.ContentTooLargeError],
    [422, 'invalid_request_error', LlmFailureType.BadRequest, false, AnthropicSdk.UnprocessableEntityError],
    [429, 'rate_limit_error', LlmFailureType.RateLimited, true, AnthropicSdk.RateLimitError],
    [500, 'api_error', LlmFailureType.ServerError, true, AnthropicSdk.InternalServerError],
    [502, 'api_error', LlmFailureType.ServerError, true, AnthropicSdk.InternalServerError],
    [503, 'api_error', LlmFailureType.ServerError, true, AnthropicSdk.ServiceUnavailableError],
    [504, 'timeout_error', LlmFailureType.ServerError, true, AnthropicSdk.GatewayTimeoutError],
    [529, 'overloaded_error', LlmFailureType.Overloaded, true, AnthropicSdk.OverloadedError],
  ];
  it.each(table)('%i %s → %s (retryable %s)', (status, type, expected, retryable, sdkClass) => {
    const err = anthropicError(status, type, 'provider says no');
    expect(err).toBeInstanceOf(sdkClass as new (...args: never[]) => unknown);
    const failure = classify(err);
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure.type).toBe(expected);
    expect(failure.nonRetryable).toBe(!retryable);
    expect(failure.message).toContain('anthropic');
    expect(failure.message).toContain(String(status));
    expect(failure.message).toContain('provider says no');
    expect(failure.details).toEqual([
      { provider: 'anthropic', model: 'claude-sonnet-4-5', status, errorType: type, requestId: 'req_011' },
    ]);
    expect(failure.cause).toBe(err);
  });

  it('names the key to fix on 401', () => {
    const failure = classify(anthropicError(401, 'authentication_error', 'invalid x-api-key'));
    expect(failure.message).toBe(
      'anthropic rejected the API key (401 authentication_error): invalid x-api-key — check ANTHROPIC_API_KEY',
    );
  });

  it('names the model on 404', () => {
    const failure = classify(anthropicError(404, 'not_found_error', 'model: claude-nope'), {
      provider: 'anthropic',
      model: 'claude-nope',
    });
    expect(failure.message).toBe(
      "anthropic does not know model claude-nope (404 not_found_error): model: claude-nope — check the model name and the provider's base URL",
    );
  });

  it('treats a too-low credit balance (a 400) as billing', () => {
    const failure = classify(
      anthropicError(
        400,
        'invalid_request_error',
        'Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.',
      ),
    );
    expect(failure.type).toBe(LlmFailureType.BillingError);
    expect(failure.nonRetryable).toBe(true);
  });

  it('infers the status of an error event inside a stream from its type', () => {
    // The SDK throws this for an SSE `error` event that arrives after the 200.
    const streamed = new AnthropicSdk.APIError(
      undefined,
      { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } },
      undefined,
      new Headers(),
      'overloaded_error',
    );
    const failure = classify(streamed);
    expect(failure.type).toBe(LlmFailureType.Overloaded);
    expect(failure.nonRetryable).toBe(false);
    expect(llmFailureDetails(failure)).toMatchObject({ status: 529, errorType: 'overloaded_error' });
  });
});

describe('classification by HTTP status (OpenAI SDK errors)', () => {
  const table: Array<[number, string, string | null, string, boolean, unknown]> = [
    [400, 'invalid_request_error', null, LlmFailureType.BadRequest, false, OpenAiSdk.BadRequestError],
    [401, 'invalid_request_error', 'invalid_api_key', LlmFailureType.AuthError, false, OpenAiSdk.AuthenticationError],
    [
      403,
      'invalid_request_error',
      'unsupported_country_region_territory',
      LlmFailureType.PermissionDenied,
      false,
      OpenAiSdk.PermissionDeniedError,
    ],
    [404, 'invalid_request_error', 'model_not_found', LlmFailureType.NotFound, false, OpenAiSdk.NotFoundError],
    [409, 'invalid_request_error', null, LlmFailureType.Conflict, true, OpenAiSdk.ConflictError],
    [422, 'invalid_request_error', null, LlmFailureType.BadRequest, false, OpenAiSdk.UnprocessableEntityError],
    [429, 'requests', 'rate_limit_exceeded', LlmFailureType.RateLimited, true, OpenAiSdk.RateLimitError],
    [500, 'server_error', null, LlmFailureType.ServerError, true, OpenAiSdk.InternalServerError],
    [503, 'server_error', null, LlmFailureType.ServerError, true, OpenAiSdk.InternalServerError],
  ];
  it.each(table)('%i %s/%s → %s (retryable %s)', (status, type, code, expected, retryable, sdkClass) => {
    const err = openaiError(status, type, code, 'openai says no');
    expect(err).toBeInstanceOf(sdkClass as new (...args: never[]) => unknown);
    const failure = classify(err, openaiCtx);
    expect(failure.type).toBe(expected);
    expect(failure.nonRetryable).toBe(!retryable);
    expect(failure.message).toContain('openai says no');
    expect(failure.details).toEqual([
      { provider: 'openai', model: 'gpt-4.1', status, errorType: type, requestId: 'req_abc' },
    ]);
  });

  it('names OPENAI_API_KEY on 401', () => {
    const failure = classify(
      openaiError(401, 'invalid_request_error', 'invalid_api_key', 'Incorrect API key provided: sk-xx.'),
      openaiCtx,
    );
    expect(failure.message).toBe(
      'openai rejected the API key (401 invalid_request_error): Incorrect API key provided: sk-xx. — check OPENAI_API_KEY',
    );
  });

  it('names the provider for an OpenAI-compatible server', () => {
    const failure = classify(openaiError(401, 'invalid_request_error', null, 'bad token'), {
      provider: 'openrouter',
      model: 'x/y',
      kind: 'openai-compatible',
    });
    expect(failure.message).toContain('check the API key configured for provider "openrouter"');
  });

  it('treats a 429 insufficient_quota as billing, not a rate limit', () => {
    const failure = classify(
      openaiError(
        429,
        'insufficient_quota',
        'insufficient_quota',
        'You exceeded your current quota, please check your plan and billing details.',
        { 'retry-after': '20' },
      ),
      openaiCtx,
    );
    expect(failure.type).toBe(LlmFailureType.BillingError);
    expect(failure.nonRetryable).toBe(true);
    expect(failure.nextRetryDelay).toBeUndefined();
  });

  it('classifies an error inside a stream', () => {
    const streamed = new OpenAiSdk.APIError(
      undefined,
      { message: 'The server had an error', type: 'server_error' },
      undefined,
      new Headers(),
    );
    const failure = classify(streamed, openaiCtx);
    expect(failure.type).toBe(LlmFailureType.ServerError);
    expect(llmFailureDetails(failure)?.status).toBe(500);
  });
});

describe('retry-after', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');

  it('parses seconds, fractional seconds, HTTP dates and retry-after-ms', () => {
    expect(parseRetryAfterMs(new Headers({ 'retry-after': '7' }), now)).toBe(7_000);
    expect(parseRetryAfterMs(new Headers({ 'retry-after': '1.5' }), now)).toBe(1_500);
    expect(parseRetryAfterMs(new Headers({ 'retry-after': 'Thu, 01 Jan 2026 00:00:30 GMT' }), now)).toBe(30_000);
    expect(parseRetryAfterMs(new Headers({ 'retry-after-ms': '250' }), now)).toBe(250);
    expect(parseRetryAfterMs({ 'Retry-After': '3' }, now)).toBe(3_000);
  });

  it('prefers retry-after-ms over retry-after', () => {
    expect(parseRetryAfterMs(new Headers({ 'retry-after-ms': '1500', 'retry-after': '9' }), now)).toBe(1_500);
  });

  it('ignores absent, past, zero and garbage values', () => {
    expect(parseRetryAfterMs(undefined, now)).toBeUndefined();
    expect(parseRetryAfterMs(new Headers(), now)).toBeUndefined();
    expect(parseRetryAfterMs(new Headers({ 'retry-after': '0' }), now)).toBeUndefined();
    expect(parseRetryAfterMs(new Headers({ 'retry-after': 'Wed, 31 Dec 2025 23:59:00 GMT' }), now)).toBeUndefined();
    expect(parseRetryAfterMs(new Headers({ 'retry-after': 'soon' }), now)).toBeUndefined();
    expect(parseRetryAfterMs(new Headers({ 'retry-after-ms': 'x', 'retry-after': '2' }), now)).toBe(2_000);
  });

  it('becomes nextRetryDelay of a retryable failure', () => {
    const failure = classify(anthropicError(429, 'rate_limit_error', 'slow down', { 'retry-after': '12' }));
    expect(failure.nextRetryDelay).toBe(12_000);
    expect(failure.message).toContain('retry after 12s');
    const overloaded = classify(anthropicError(529, 'overloaded_error', 'Overloaded', { 'retry-after-ms': '2500' }));
    expect(overloaded.nextRetryDelay).toBe(2_500);
  });

  it('uses the context clock for HTTP dates', () => {
    const failure = classifyProviderError(
      openaiError(503, 'server_error', null, 'busy', { 'retry-after': 'Thu, 01 Jan 2026 00:01:00 GMT' }),
      { ...openaiCtx, now: () => now },
    );
    expect(failure?.nextRetryDelay).toBe(60_000);
  });

  it('is clamped to MAX_RETRY_AFTER_MS (15 min)', () => {
    expect(MAX_RETRY_AFTER_MS).toBe(15 * 60_000);
    const failure = classify(anthropicError(429, 'rate_limit_error', 'tomorrow', { 'retry-after': '86400' }));
    expect(failure.nextRetryDelay).toBe(MAX_RETRY_AFTER_MS);
  });

  it('is not set on non-retryable failures', () => {
    const failure = classify(anthropicError(401, 'authentication_error', 'nope', { 'retry-after': '5' }));
    expect(failure.nextRetryDelay).toBeUndefined();
  });

  it('is absent when the provider sent none', () => {
    expect(classify(anthropicError(500, 'api_error', 'oops')).nextRetryDelay).toBeUndefined();
  });
});

describe('network errors and timeouts', () => {
  function refused(): Error {
    // What undici throws when nothing listens: TypeError('fetch failed') caused by a coded system error.
    return new TypeError('fetch failed', {
      cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' }),
    });
  }

  it('APIConnectionError (both SDKs) → LlmNetworkError, retryable, with the cause', () => {
    for (const err of [
      new AnthropicSdk.APIConnectionError({ cause: refused() }),
      new OpenAiSdk.APIConnectionError({ cause: refused() }),
    ]) {
      const failure = classify(err);
      expect(failure.type).toBe(LlmFailureType.NetworkError);
      expect(failure.nonRetryable).toBe(false);
      expect(failure.message).toContain('could not reach anthropic for claude-sonnet-4-5');
      expect(failure.message).toContain('ECONNREFUSED');
      expect(failure.details).toEqual([{ provider: 'anthropic', model: 'claude-sonnet-4-5' }]);
    }
  });

  it('connection reset mid-stream → LlmNetworkError', () => {
    const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    expect(classify(reset).type).toBe(LlmFailureType.NetworkError);
    expect(classify(new Error('socket hang up')).type).toBe(LlmFailureType.NetworkError);
  });

  it('APIConnectionTimeoutError (both SDKs) → LlmTimeout, retryable', () => {
    for (const err of [new AnthropicSdk.APIConnectionTimeoutError(), new OpenAiSdk.APIConnectionTimeoutError()]) {
      const failure = classify(err);
      expect(failure.type).toBe(LlmFailureType.Timeout);
      expect(failure.nonRetryable).toBe(false);
    }
  });

  it('a connect timeout code → LlmTimeout', () => {
    const err = new AnthropicSdk.APIConnectionError({
      cause: Object.assign(new Error('Connect Timeout Error'), { code: 'UND_ERR_CONNECT_TIMEOUT' }),
    });
    expect(classify(err).type).toBe(LlmFailureType.Timeout);
  });

  it("OpenAI's abort error caused by AbortSignal.timeout() is a timeout, not a cancellation", () => {
    const err = new OpenAiSdk.APIUserAbortError();
    // As the SDK's _makeUserAbortError does with the caller signal's reason.
    Object.defineProperty(err, 'cause', { value: new DOMException('The operation timed out.', 'TimeoutError') });
    expect(isCancellation(err)).toBe(false);
    expect(classify(err).type).toBe(LlmFailureType.Timeout);
  });
});

describe('cancellation and pass-through', () => {
  it('returns undefined for aborts so they propagate unchanged', () => {
    expect(classifyProviderError(new AnthropicSdk.APIUserAbortError(), anthropicCtx)).toBeUndefined();
    expect(classifyProviderError(new OpenAiSdk.APIUserAbortError(), openaiCtx)).toBeUndefined();
    expect(
      classifyProviderError(new DOMException('This operation was aborted', 'AbortError'), anthropicCtx),
    ).toBeUndefined();
    expect(classifyProviderError(new CancelledFailure('Activity cancelled'), anthropicCtx)).toBeUndefined();
  });

  it('returns an already classified ApplicationFailure as is', () => {
    const existing = ApplicationFailure.nonRetryable('already decided', 'LlmBadRequest');
    expect(classifyProviderError(existing, anthropicCtx)).toBe(existing);
  });

  it('an unrecognised error → LlmProviderError, retryable', () => {
    const failure = classify(new SyntaxError('Error reading response: malformed server-sent event JSON.'));
    expect(failure.type).toBe(LlmFailureType.ProviderError);
    expect(failure.nonRetryable).toBe(false);
    expect(failure.message).toBe(
      'anthropic call to claude-sonnet-4-5 failed: Error reading response: malformed server-sent event JSON.',
    );
  });
});

describe('errors thrown by the real SDK clients over HTTP', () => {
  // A throwaway local server: each test sets how it answers. (The scripted fake-provider server for
  // adapter tests lives in test/fake-llm; this only checks that genuinely thrown errors classify.)
  let respond: (req: IncomingMessage, res: ServerResponse) => void = () => undefined;
  let server: Server;
  let baseURL = '';

  beforeAll(async () => {
    const http = await import('node:http');
    server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => respond(req, res));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    baseURL = `http://127.0.0.1:${address.port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  function json(status: number, body: unknown, headers: Record<string, string> = {}) {
    respond = (_req, res) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(body));
    };
  }

  const anthropic = () => new AnthropicSdk.Anthropic({ apiKey: 'sk-ant-test', baseURL, maxRetries: 0 });
  const openai = () => new OpenAiSdk.OpenAI({ apiKey: 'sk-test', baseURL: `${baseURL}/v1`, maxRetries: 0 });
  const message = { model: 'claude-sonnet-5-5', max_tokens: 16, messages: [{ role: 'user' as const, content: 'hi' }] };
  const completion = { model: 'gpt-4.1', messages: [{ role: 'user' as const, content: 'hi' }] };

  async function thrown(promise: Promise<unknown>): Promise<unknown> {
    try {
      await promise;
    } catch (err) {
      return err;
    }
    throw new Error('expected the SDK call to throw');
  }

  it('Anthropic 401', async () => {
    json(
      401,
      { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } },
      { 'request-id': 'req_live' },
    );
    const failure = classify(await thrown(anthropic().messages.create(message)), {
      ...anthropicCtx,
      model: 'claude-sonnet-5-5',
    });
    expect(failure.message).toBe(
      'anthropic rejected the API key (401 authentication_error): invalid x-api-key — check ANTHROPIC_API_KEY',
    );
    expect(failure.details).toEqual([
      {
        provider: 'anthropic',
        model: 'claude-sonnet-5-5',
        status: 401,
        errorType: 'authentication_error',
        requestId: 'req_live',
      },
    ]);
  });

  it('Anthropic 429 with retry-after', async () => {
    json(
      429,
      {
        type: 'error',
        error: {
          type: 'rate_limit_error',
          message: 'Number of request tokens has exceeded your per-minute rate limit',
        },
      },
      { 'retry-after': '17' },
    );
    const failure = classify(await thrown(anthropic().messages.create(message)));
    expect(failure.type).toBe(LlmFailureType.RateLimited);
    expect(failure.nextRetryDelay).toBe(17_000);
  });

  it('Anthropic 529', async () => {
    json(529, { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
    const failure = classify(await thrown(anthropic().messages.create(message)));
    expect(failure.type).toBe(LlmFailureType.Overloaded);
    expect(failure.nonRetryable).toBe(false);
  });

  it('Anthropic error event in the middle of a stream', async () => {
    respond = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(
        'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-5-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}\n\n',
      );
      res.end('event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n');
    };
    const err = await thrown(
      (async () => {
        const stream = await anthropic().messages.create({ ...message, stream: true });
        for await (const _event of stream) {
          // drain
        }
      })(),
    );
    const failure = classify(err);
    expect(failure.type).toBe(LlmFailureType.Overloaded);
    expect(llmFailureDetails(failure)?.status).toBe(529);
  });

  it('OpenAI 429 insufficient_quota is billing; 404 model_not_found is not-found', async () => {
    json(429, {
      error: {
        message: 'You exceeded your current quota, please check your plan and billing details.',
        type: 'insufficient_quota',
        code: 'insufficient_quota',
        param: null,
      },
    });
    expect(classify(await thrown(openai().chat.completions.create(completion)), openaiCtx).type).toBe(
      LlmFailureType.BillingError,
    );
    json(404, {
      error: {
        message: 'The model `gpt-4.1` does not exist or you do not have access to it.',
        type: 'invalid_request_error',
        code: 'model_not_found',
        param: null,
      },
    });
    const notFound = classify(await thrown(openai().chat.completions.create(completion)), openaiCtx);
    expect(notFound.type).toBe(LlmFailureType.NotFound);
    expect(notFound.message).toContain('The model `gpt-4.1` does not exist');
  });

  it('SDK timeout → LlmTimeout', async () => {
    respond = () => undefined; // never answers
    const err = await thrown(anthropic().messages.create(message, { timeout: 100 }));
    expect(classify(err).type).toBe(LlmFailureType.Timeout);
    server.closeAllConnections();
  });

  it('connection refused → LlmNetworkError', async () => {
    const http = await import('node:http');
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const address = closed.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const client = new OpenAiSdk.OpenAI({
      apiKey: 'sk-test',
      baseURL: `http://127.0.0.1:${address.port}/v1`,
      maxRetries: 0,
    });
    const failure = classify(await thrown(client.chat.completions.create(completion)), openaiCtx);
    expect(failure.type).toBe(LlmFailureType.NetworkError);
    expect(failure.message).toContain('ECONNREFUSED');
  });

  it('abort via the signal → cancellation (undefined)', async () => {
    respond = () => undefined; // never answers
    const controller = new AbortController();
    const pending = thrown(anthropic().messages.create(message, { signal: controller.signal }));
    setTimeout(() => controller.abort(), 20);
    expect(classifyProviderError(await pending, anthropicCtx)).toBeUndefined();
    server.closeAllConnections();
  });
});
