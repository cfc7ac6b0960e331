/**
 * The fake Anthropic server's prompt cache with lifetimes, through the real SDK and our adapter: what
 * is read, written and at which lifetime, when entries expire, the time scale, and the requests the
 * real API refuses. The adapter's policies and the 1-hour write price are checked on the same wire.
 */
import { createAnthropicProvider } from '../../activities/llm/anthropic';
import { lookupModel } from '../../activities/llm/catalog';
import { costUsd } from '../../activities/llm/cost';
import type { ChatRequest, PromptCachePolicy } from '../../activities/llm/types';
import { loadConfig } from '../../worker/config';
import { CACHE_TTL_1H_MS, CACHE_TTL_5M_MS, startFakeLlmServer, type FakeLlmServer } from '../fake-llm';

let server: FakeLlmServer;
beforeAll(async () => {
  server = await startFakeLlmServer();
});
afterEach(() => server.reset());
afterAll(() => server.close());

const answer = {
  kind: 'message' as const,
  content: [{ type: 'text' as const, text: 'ok' }],
  stopReason: 'end_turn' as const,
};

/** A stable prefix of about 2,000 tokens (tools + two cached system parts) and a conversation of about 1,000. */
function request(turn: string): ChatRequest {
  return {
    model: 'claude-sonnet-4-6',
    system: [
      { text: 'IDENTITY '.repeat(400), cacheBreakpoint: true },
      { text: 'MEMORY '.repeat(200), cacheBreakpoint: true },
      { text: 'NOW', cacheBreakpoint: false },
    ],
    tools: [{ name: 'read_file', description: 'Read a file. '.repeat(200), inputSchema: { type: 'object' } }],
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'CONVERSATION '.repeat(300) }] },
      { role: 'assistant', content: [{ type: 'text', text: 'noted' }] },
      { role: 'user', content: [{ type: 'text', text: turn }] },
    ],
    messageCacheBreakpoint: 1,
    maxTokens: 100,
  };
}

const chat = (policy: PromptCachePolicy, turn = 'next') =>
  createAnthropicProvider({
    name: 'anthropic',
    kind: 'anthropic',
    apiKey: 'k',
    baseURL: server.url,
    promptCache: policy,
  }).chat(request(turn));

describe('the fake prompt cache', () => {
  test('5-minute entries: a call within the lifetime reads the whole cached prompt, one after it writes it all again', async () => {
    const cache = server.simulatePromptCache();
    server.enqueue(answer, answer, answer);
    const first = await chat('all-5m');
    expect(first.usage.cacheReadTokens).toBe(0);
    expect(first.usage.cacheWriteTokens).toBeGreaterThan(2_500);
    expect(first.usage.cacheWrite1hTokens).toBeUndefined();
    const written = first.usage.cacheWriteTokens;

    cache.advance(CACHE_TTL_5M_MS - 1_000);
    const warm = await chat('all-5m');
    expect(warm.usage).toMatchObject({ cacheReadTokens: written, cacheWriteTokens: 0 });

    // The read refreshed the entries: another 4 minutes later they are still there.
    cache.advance(CACHE_TTL_5M_MS - 1_000);
    expect((await chat('all-5m')).usage.cacheReadTokens).toBe(written);

    server.enqueue(answer);
    cache.advance(CACHE_TTL_5M_MS + 1);
    const cold = await chat('all-5m');
    expect(cold.usage).toMatchObject({ cacheReadTokens: 0, cacheWriteTokens: written });
    expect(server.requests.map((r) => r.promptCache?.cacheWrite5mTokens)).toEqual([written, 0, 0, written]);
  });

  test('prefix-1h: the prefix is written at the 1-hour lifetime and outlives a 30-minute wait; the conversation does not', async () => {
    const cache = server.simulatePromptCache();
    server.enqueue(answer, answer, answer);
    const first = await chat('prefix-1h');
    const prefix = first.usage.cacheWrite1hTokens!;
    expect(prefix).toBeGreaterThan(1_500);
    expect(first.usage.cacheWriteTokens - prefix).toBeGreaterThan(500); // the conversation, at 5 minutes

    cache.advance(30 * 60_000);
    const resumed = await chat('prefix-1h');
    expect(resumed.usage).toMatchObject({
      cacheReadTokens: prefix,
      cacheWriteTokens: first.usage.cacheWriteTokens - prefix,
    });
    expect(resumed.usage.cacheWrite1hTokens).toBeUndefined();

    cache.advance(CACHE_TTL_1H_MS + 1);
    expect((await chat('prefix-1h')).usage).toMatchObject({ cacheReadTokens: 0, cacheWrite1hTokens: prefix });
  });

  test('the time scale makes a real second a simulated minute', async () => {
    const cache = server.simulatePromptCache({ timeScale: 60 });
    const before = cache.now();
    await new Promise((resolve) => setTimeout(resolve, 100));
    // 100 ms of real time is 6 simulated seconds (timers may run late, never early).
    expect(cache.now() - before).toBeGreaterThanOrEqual(5_900);
    cache.advance(60_000);
    expect(cache.now() - before).toBeGreaterThanOrEqual(65_900);
  });

  test('prefixes under the minimum cacheable length are not cached', async () => {
    server.simulatePromptCache({ minCacheableTokens: 100_000 });
    server.enqueue(answer);
    const result = await chat('all-5m');
    expect(result.usage).toMatchObject({ cacheReadTokens: 0, cacheWriteTokens: 0 });
    expect(result.usage.inputTokens).toBeGreaterThan(2_500); // the whole prompt is plain input
  });

  test('requests the real API refuses are refused: a 1-hour breakpoint after a 5-minute one, a fifth breakpoint, an unknown ttl', async () => {
    server.simulatePromptCache();
    const post = (body: Record<string, unknown>) =>
      fetch(`${server.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', max_tokens: 10, ...body }),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as { error: { message: string } } }));
    const block = (ttl?: string) => ({
      type: 'text',
      text: 'x',
      cache_control: { type: 'ephemeral', ...(ttl ? { ttl } : {}) },
    });
    const user = [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }];
    server.enqueue(answer, answer, answer);

    const order = await post({ system: [block('5m'), block('1h')], messages: user });
    expect(order.status).toBe(400);
    expect(order.body.error.message).toMatch(/ttl='1h' cache_control block must not come after a ttl='5m'/);
    const five = await post({ system: [block(), block(), block(), block(), block()], messages: user });
    expect(five.status).toBe(400);
    expect(five.body.error.message).toMatch(/maximum of 4 blocks with cache_control/);
    const unknown = await post({ system: [block('1d')], messages: user });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.message).toMatch(/expected '5m' or '1h'/);
  });
});

describe('the adapter on the cache', () => {
  test('all-1h marks every breakpoint 1 hour; 1-hour writes are priced at 2× input, 5-minute ones at 1.25×', async () => {
    server.simulatePromptCache();
    server.enqueue(answer);
    const result = await chat('all-1h');
    const body = JSON.stringify(server.requests[0]!.body);
    expect(body.match(/"ttl":"1h"/g)).toHaveLength(4);
    expect(result.usage.cacheWrite1hTokens).toBe(result.usage.cacheWriteTokens);

    const info = lookupModel('claude-sonnet-4-6');
    const tokens = 1_000_000;
    const at5m = costUsd({ inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: tokens }, info);
    const at1h = costUsd(
      { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: tokens, cacheWrite1hTokens: tokens },
      info,
    );
    expect(at5m).toBeCloseTo(info.prices.input * 1.25, 6);
    expect(at1h).toBeCloseTo(info.prices.input * 2, 6);
  });
});

describe('ANTHROPIC_PROMPT_CACHE', () => {
  test('names the policy of the Anthropic provider; absent keeps the default; an unknown one is refused', () => {
    const anthropic = (env: NodeJS.ProcessEnv) => loadConfig({ ANTHROPIC_API_KEY: 'k', ...env }).providers[0];
    expect(anthropic({ ANTHROPIC_PROMPT_CACHE: 'all-5m' })?.promptCache).toBe('all-5m');
    expect(anthropic({})?.promptCache).toBeUndefined();
    expect(() => anthropic({ ANTHROPIC_PROMPT_CACHE: '1h' })).toThrow(
      /ANTHROPIC_PROMPT_CACHE="1h" is not allowed: one of "all-5m", "prefix-1h", "all-1h", or unset/,
    );
  });
});
