/**
 * Routing logic only: the providers here are a tiny scripted `LlmProvider` that plays back outcomes
 * and records requests. Failures are real SDK error objects. The adapters themselves are exercised
 * through the real SDKs against the fake HTTP server elsewhere.
 */
import * as AnthropicSdk from '@anthropic-ai/sdk';
import { ApplicationFailure } from '@temporalio/common';
import * as OpenAiSdk from 'openai';
import {
  CIRCUIT_AUTH_OPEN_MS,
  CIRCUIT_OPEN_MS,
  CIRCUIT_RATE_LIMIT_OPEN_MS,
  CircuitBreaker,
} from '../../activities/llm/circuit-breaker';
import { LlmFailureType } from '../../activities/llm/errors';
import {
  DEFAULT_TIER,
  defaultTierChains,
  isProviderSideFailure,
  LlmRouter,
  type RouterChatRequest,
  type TierChains,
} from '../../activities/llm/router';
import type {
  ChatCallbacks,
  ChatRequest,
  ChatResult,
  LlmProvider,
  ProviderConfig,
  ProviderKind,
} from '../../activities/llm/types';

type Step = 'ok' | Error | ((request: ChatRequest, callbacks?: ChatCallbacks) => Promise<ChatResult>);

class ScriptedProvider implements LlmProvider {
  readonly requests: ChatRequest[] = [];
  constructor(
    readonly name: string,
    readonly kind: ProviderKind,
    private readonly script: Step[] = [],
  ) {}

  push(...steps: Step[]): this {
    this.script.push(...steps);
    return this;
  }

  async chat(request: ChatRequest, callbacks?: ChatCallbacks): Promise<ChatResult> {
    this.requests.push(request);
    const step = this.script.shift() ?? 'ok';
    if (step instanceof Error) throw step;
    if (typeof step === 'function') return step(request, callbacks);
    return {
      content: [{ type: 'text', text: `${this.name}/${request.model} answered` }],
      stopReason: 'end_turn',
      usage: { inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 },
      model: request.model,
      provider: this.name,
    };
  }
}

function anthropicError(status: number, type: string, message: string, headers: Record<string, string> = {}) {
  return AnthropicSdk.APIError.generate(
    status,
    { type: 'error', error: { type, message } },
    undefined,
    new Headers(headers),
  );
}
function openaiError(status: number, message: string) {
  return OpenAiSdk.APIError.generate(
    status,
    { error: { message, type: 'invalid_request_error', code: null } },
    undefined,
    new Headers(),
  );
}

const request: RouterChatRequest = {
  system: [{ text: 'You are a test.', cacheBreakpoint: true }],
  messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
  tools: [],
};

function setup() {
  const clock = { t: Date.UTC(2026, 0, 1) };
  const anthropic = new ScriptedProvider('anthropic', 'anthropic');
  const openai = new ScriptedProvider('openai', 'openai');
  const tiers: TierChains = {
    cheap: [
      { provider: 'anthropic', model: 'claude-haiku-4-5' },
      { provider: 'openai', model: 'gpt-4o-mini' },
    ],
    standard: [
      { provider: 'anthropic', model: 'claude-sonnet-4-5' },
      { provider: 'openai', model: 'gpt-4.1' },
    ],
    premium: [
      { provider: 'anthropic', model: 'claude-opus-4-5' },
      { provider: 'anthropic', model: 'claude-sonnet-4-5' },
      { provider: 'openai', model: 'gpt-5' },
    ],
  };
  const breaker = new CircuitBreaker({ now: () => clock.t });
  const router = new LlmRouter({
    providers: new Map<string, LlmProvider>([
      ['anthropic', anthropic],
      ['openai', openai],
    ]),
    tiers,
    breaker,
    now: () => clock.t,
  });
  return { clock, anthropic, openai, router, breaker };
}

async function failureOf(promise: Promise<unknown>): Promise<ApplicationFailure> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof ApplicationFailure) return err;
    throw err;
  }
  throw new Error('expected the call to fail');
}

describe('happy path', () => {
  it('uses the first candidate of the tier (standard by default) and resolves max tokens from the catalogue', async () => {
    const { router, anthropic, openai } = setup();
    expect(DEFAULT_TIER).toBe('standard');
    const result = await router.chat(request);
    expect(result.provider).toBe('anthropic');
    expect(result.model).toBe('claude-sonnet-4-5');
    expect(result.attempts).toEqual([{ provider: 'anthropic', model: 'claude-sonnet-4-5' }]);
    expect(anthropic.requests[0]).toMatchObject({
      model: 'claude-sonnet-4-5',
      maxTokens: 64_000,
      system: request.system,
      messages: request.messages,
    });
    expect(openai.requests).toHaveLength(0);
  });

  it('passes an explicit maxTokens through, and uses 4096 for an unknown model', async () => {
    const { router, anthropic, openai } = setup();
    await router.chat({ ...request, maxTokens: 1_234 }, { tier: 'cheap' });
    expect(anthropic.requests[0]).toMatchObject({ model: 'claude-haiku-4-5', maxTokens: 1_234 });
    await router.chat(request, { provider: 'openai', model: 'gpt-private-finetune' });
    expect(openai.requests[0]).toMatchObject({ model: 'gpt-private-finetune', maxTokens: 4_096 });
  });

  it('passes callbacks to the provider', async () => {
    const { router, anthropic } = setup();
    const callbacks: ChatCallbacks = { onTextDelta: () => undefined };
    let seen: ChatCallbacks | undefined;
    anthropic.push(async (req, cb) => {
      seen = cb;
      return {
        content: [],
        stopReason: 'end_turn',
        usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
        model: req.model,
        provider: 'anthropic',
      };
    });
    await router.chat(request, {}, callbacks);
    expect(seen).toBe(callbacks);
  });
});

describe('candidate order', () => {
  it('explicit model first, then the tier chain, without duplicates', () => {
    const { router } = setup();
    expect(router.candidates({ tier: 'premium', model: 'claude-sonnet-4-5' })).toEqual([
      { provider: 'anthropic', model: 'claude-sonnet-4-5' },
      { provider: 'anthropic', model: 'claude-opus-4-5' },
      { provider: 'openai', model: 'gpt-5' },
    ]);
  });

  it("infers an explicit model's provider from the tiers, then from the catalogue's kind", () => {
    const { router } = setup();
    expect(router.candidates({ model: 'gpt-5' })[0]).toEqual({ provider: 'openai', model: 'gpt-5' });
    expect(router.candidates({ model: 'claude-opus-4-1-20250805' })[0]).toEqual({
      provider: 'anthropic',
      model: 'claude-opus-4-1-20250805',
    });
  });

  it('an explicit provider without a model puts its tier candidates first', () => {
    const { router } = setup();
    expect(router.candidates({ provider: 'openai' })).toEqual([
      { provider: 'openai', model: 'gpt-4.1' },
      { provider: 'anthropic', model: 'claude-sonnet-4-5' },
    ]);
  });

  it('rejects an unserved model or unknown provider with a non-retryable LlmConfigError', async () => {
    const { router } = setup();
    const noProvider = await failureOf(router.chat(request, { model: 'llama3.1:8b' }));
    expect(noProvider.type).toBe(LlmFailureType.ConfigError);
    expect(noProvider.nonRetryable).toBe(true);
    expect(noProvider.message).toContain('llama3.1:8b');
    const unknownProvider = await failureOf(router.chat(request, { provider: 'gemini' }));
    expect(unknownProvider.type).toBe(LlmFailureType.ConfigError);
  });
});

describe('fallback', () => {
  it('falls through to the next candidate on a provider-side failure', async () => {
    const { router, anthropic, openai } = setup();
    anthropic.push(anthropicError(529, 'overloaded_error', 'Overloaded'));
    const result = await router.chat(request);
    expect(result.provider).toBe('openai');
    expect(result.model).toBe('gpt-4.1');
    expect(result.attempts).toEqual([
      {
        provider: 'anthropic',
        model: 'claude-sonnet-4-5',
        errorType: 'LlmOverloaded',
        error: expect.stringContaining('529'),
      },
      { provider: 'openai', model: 'gpt-4.1' },
    ]);
    expect(openai.requests[0]?.maxTokens).toBe(32_768);
  });

  it.each([
    ['401 auth', () => anthropicError(401, 'authentication_error', 'invalid x-api-key')],
    ['402 billing', () => anthropicError(402, 'billing_error', 'no credit')],
    ['403 permission', () => anthropicError(403, 'permission_error', 'no access')],
    ['404 unknown model', () => anthropicError(404, 'not_found_error', 'model: claude-sonnet-4-5')],
    ['429 rate limit', () => anthropicError(429, 'rate_limit_error', 'slow down')],
    ['500 server error', () => anthropicError(500, 'api_error', 'oops')],
    [
      'network error',
      () =>
        new AnthropicSdk.APIConnectionError({
          cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
        }),
    ],
    ['timeout', () => new AnthropicSdk.APIConnectionTimeoutError()],
  ])('falls through on %s', async (_label, makeError) => {
    const { router, anthropic } = setup();
    anthropic.push(makeError());
    const result = await router.chat(request);
    expect(result.provider).toBe('openai');
  });

  it.each([
    [400, 'invalid_request_error'],
    [422, 'invalid_request_error'],
  ])('does not fall back on %i: the request itself is bad', async (status, type) => {
    const { router, anthropic, openai, breaker } = setup();
    anthropic.push(anthropicError(status, type, 'messages: roles must alternate'));
    const failure = await failureOf(router.chat(request));
    expect(failure.type).toBe(LlmFailureType.BadRequest);
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toContain('roles must alternate');
    expect(openai.requests).toHaveLength(0);
    // The provider is healthy; nothing recorded against it.
    expect(breaker.snapshot('anthropic', 'claude-sonnet-4-5').consecutiveFailures).toBe(0);
  });

  it('a bad request after a fallback still names every attempt', async () => {
    const { router, anthropic, openai } = setup();
    anthropic.push(anthropicError(503, 'api_error', 'unavailable'));
    openai.push(openaiError(400, "Invalid 'messages'"));
    const failure = await failureOf(router.chat(request));
    expect(failure.type).toBe(LlmFailureType.BadRequest);
    expect(failure.message).toContain('[attempts: anthropic/claude-sonnet-4-5: ');
    expect(failure.message).toContain('openai/gpt-4.1: ');
  });

  it('when every candidate fails, throws the last retryable failure with every attempt in the message', async () => {
    const { router, anthropic, openai } = setup();
    anthropic.push(anthropicError(503, 'api_error', 'unavailable', { 'retry-after': '9' }));
    openai.push(openaiError(401, 'Incorrect API key provided'));
    const failure = await failureOf(router.chat(request));
    // The fallback's key is broken, but the primary may recover: Temporal should retry.
    expect(failure.type).toBe(LlmFailureType.ServerError);
    expect(failure.nonRetryable).toBe(false);
    expect(failure.nextRetryDelay).toBe(9_000);
    expect(failure.message).toMatch(
      /^anthropic failed serving claude-sonnet-4-5 \(503 api_error\): unavailable; retry after 9s \[attempts: /,
    );
    expect(failure.message).toContain('openai/gpt-4.1: openai rejected the API key (401');
    expect(failure.details).toEqual([
      { provider: 'anthropic', model: 'claude-sonnet-4-5', status: 503, errorType: 'api_error' },
    ]);
  });

  it('when every candidate fails for good, throws the last failure, non-retryable', async () => {
    const { router, anthropic, openai } = setup();
    anthropic.push(anthropicError(401, 'authentication_error', 'invalid x-api-key'));
    openai.push(openaiError(404, 'The model `gpt-4.1` does not exist'));
    const failure = await failureOf(router.chat(request));
    expect(failure.type).toBe(LlmFailureType.NotFound);
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toContain('anthropic/claude-sonnet-4-5: anthropic rejected the API key');
  });
});

describe('cancellation', () => {
  it('an abort propagates unchanged, with no fallback', async () => {
    const { router, anthropic, openai, breaker } = setup();
    const abort = new AnthropicSdk.APIUserAbortError();
    anthropic.push(abort);
    await expect(router.chat(request)).rejects.toBe(abort);
    expect(openai.requests).toHaveLength(0);
    expect(breaker.snapshot('anthropic', 'claude-sonnet-4-5').consecutiveFailures).toBe(0);
  });

  it('any error after the signal fired propagates unchanged', async () => {
    const { router, anthropic, openai } = setup();
    const controller = new AbortController();
    const err = new Error('stream closed');
    anthropic.push(async () => {
      controller.abort();
      throw err;
    });
    await expect(router.chat(request, {}, { signal: controller.signal })).rejects.toBe(err);
    expect(openai.requests).toHaveLength(0);
  });
});

describe('circuit breaker integration', () => {
  it('skips a candidate whose circuit opened after 2 failures, then tries it again half-open', async () => {
    const { router, anthropic, openai, clock } = setup();
    anthropic.push(anthropicError(500, 'api_error', 'a'), anthropicError(500, 'api_error', 'b'));
    await router.chat(request);
    await router.chat(request);
    expect(anthropic.requests).toHaveLength(2);

    const third = await router.chat(request);
    expect(anthropic.requests).toHaveLength(2);
    expect(third.provider).toBe('openai');
    expect(third.attempts[0]).toEqual({
      provider: 'anthropic',
      model: 'claude-sonnet-4-5',
      skipped: true,
      error: `circuit open until ${new Date(clock.t + CIRCUIT_OPEN_MS).toISOString()} (transient)`,
    });

    clock.t += CIRCUIT_OPEN_MS;
    const fourth = await router.chat(request);
    expect(fourth.provider).toBe('anthropic');
    expect(anthropic.requests).toHaveLength(3);
    expect(openai.requests).toHaveLength(3);
  });

  it('an auth failure skips every model of that provider for 30 minutes', async () => {
    const { router, anthropic, clock } = setup();
    anthropic.push(anthropicError(401, 'authentication_error', 'invalid x-api-key'));
    await router.chat(request, { tier: 'premium' });
    expect(anthropic.requests.map((r) => r.model)).toEqual(['claude-opus-4-5']);

    const next = await router.chat(request, { tier: 'premium' });
    expect(next.provider).toBe('openai');
    expect(anthropic.requests).toHaveLength(1);
    expect(next.attempts.filter((a) => a.skipped).map((a) => a.model)).toEqual([
      'claude-opus-4-5',
      'claude-sonnet-4-5',
    ]);
    expect(next.attempts[0]?.error).toContain('provider anthropic open until');

    clock.t += CIRCUIT_AUTH_OPEN_MS;
    expect((await router.chat(request, { tier: 'premium' })).provider).toBe('anthropic');
  });

  it('when every circuit is open, tries the one that reopens soonest instead of failing unasked', async () => {
    const { router, anthropic, openai, breaker } = setup();
    breaker.recordFailure('anthropic', 'claude-sonnet-4-5', 'auth');
    breaker.recordFailure('openai', 'gpt-4.1', 'rate_limit');
    const result = await router.chat(request);
    expect(result.provider).toBe('openai');
    expect(anthropic.requests).toHaveLength(0);
    expect(result.attempts.map((a) => [a.provider, a.skipped ?? false])).toEqual([
      ['anthropic', true],
      ['openai', true],
      ['openai', false],
    ]);
    expect(openai.requests).toHaveLength(1);
    expect(breaker.snapshot('openai', 'gpt-4.1').state).toBe('closed');
  });

  it('a failed forced attempt reopens its circuit and is what gets thrown', async () => {
    const { router, openai, breaker, clock } = setup();
    breaker.recordFailure('anthropic', 'claude-sonnet-4-5', 'auth');
    breaker.recordFailure('openai', 'gpt-4.1', 'rate_limit');
    openai.push(openaiError(429, 'Rate limit reached'));
    const failure = await failureOf(router.chat(request));
    expect(failure.type).toBe(LlmFailureType.RateLimited);
    expect(failure.nonRetryable).toBe(false);
    expect(breaker.snapshot('openai', 'gpt-4.1').openUntil).toBe(clock.t + CIRCUIT_RATE_LIMIT_OPEN_MS);
  });
});

describe('construction', () => {
  it('rejects tiers naming an unconfigured provider', () => {
    expect(
      () =>
        new LlmRouter({
          providers: new Map(),
          tiers: { cheap: [{ provider: 'anthropic', model: 'claude-haiku-4-5' }], standard: [], premium: [] },
        }),
    ).toThrow('tier "cheap" names provider "anthropic", which is not configured');
  });

  it('fromConfig builds providers through the injected factory and default tiers (default provider first)', async () => {
    const configs: ProviderConfig[] = [
      { name: 'openai', kind: 'openai', apiKey: 'k1' },
      { name: 'anthropic', kind: 'anthropic', apiKey: 'k2' },
      { name: 'ollama', kind: 'openai-compatible', baseURL: 'http://localhost:11434/v1' },
    ];
    const made: ProviderConfig[] = [];
    const router = LlmRouter.fromConfig(configs, (config) => {
      made.push(config);
      return new ScriptedProvider(config.name, config.kind);
    });
    expect(made).toEqual(configs);
    expect([...router.providers.keys()]).toEqual(['openai', 'anthropic', 'ollama']);
    expect(router.tiers).toEqual(defaultTierChains(configs));
    expect(router.tiers.cheap).toEqual([
      { provider: 'openai', model: 'gpt-5.4-mini' },
      { provider: 'anthropic', model: 'claude-haiku-5-5' },
    ]);
    expect(router.tiers.standard).toEqual([
      { provider: 'openai', model: 'gpt-5.4' },
      { provider: 'anthropic', model: 'claude-sonnet-5-5' },
    ]);
    expect(router.tiers.premium).toEqual([
      { provider: 'openai', model: 'gpt-5.5' },
      { provider: 'anthropic', model: 'claude-opus-5-5' },
    ]);
    // The OpenAI-compatible server is reachable by naming provider and model.
    const result = await router.chat(request, { provider: 'ollama', model: 'llama3.1:8b' });
    expect(result.provider).toBe('ollama');
  });

  it('fromConfig rejects a duplicate provider name', () => {
    expect(() =>
      LlmRouter.fromConfig(
        [
          { name: 'a', kind: 'anthropic' },
          { name: 'a', kind: 'openai' },
        ],
        (c) => new ScriptedProvider(c.name, c.kind),
      ),
    ).toThrow('provider "a" is configured twice');
  });

  it('the demo provider serves every tier with the offline model', () => {
    expect(defaultTierChains([{ name: 'demo', kind: 'demo' }])).toEqual({
      cheap: [{ provider: 'demo', model: 'demo-offline' }],
      standard: [{ provider: 'demo', model: 'demo-offline' }],
      premium: [{ provider: 'demo', model: 'demo-offline' }],
    });
  });
});

describe('isProviderSideFailure', () => {
  it('is true for everything but a bad request or a configuration error', () => {
    for (const type of Object.values(LlmFailureType)) {
      const expected = type !== LlmFailureType.BadRequest && type !== LlmFailureType.ConfigError;
      expect([type, isProviderSideFailure(type)]).toEqual([type, expected]);
    }
    expect(isProviderSideFailure(undefined)).toBe(false);
    expect(isProviderSideFailure('SomethingElse')).toBe(false);
  });
});
