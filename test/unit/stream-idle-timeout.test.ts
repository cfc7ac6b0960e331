/**
 * A provider stream that opens and then sends nothing is cut after the idle timeout, as a retryable
 * timeout, by both adapters through their real SDKs against the fake LLM server; a stream that only
 * keeps itself alive (Anthropic's `ping`, an SSE comment) while it thinks is not cut.
 */
import { createAnthropicProvider } from '../../activities/llm/anthropic';
import { createOpenAiProvider } from '../../activities/llm/openai';
import { DEFAULT_STREAM_IDLE_TIMEOUT_MS, streamIdleTimeoutFromEnv } from '../../activities/llm/adapter-support';
import { classifyProviderError, LlmFailureType } from '../../activities/llm/errors';
import type { ChatRequest, LlmProvider } from '../../activities/llm/types';
import { startFakeLlmServer, type FakeLlmServer, type ScriptedMessage } from '../fake-llm';

/** Small, so a cut is seen in a fraction of a second; far above the fake's gaps between events. */
const IDLE_MS = 400;
const ANSWER = 'A complete answer, streamed in several chunks.';

let server: FakeLlmServer;
beforeAll(async () => {
  server = await startFakeLlmServer();
});
afterEach(() => server.reset());
afterAll(() => server.close());

const request: ChatRequest = {
  model: 'test-model',
  system: [{ text: 'You are a test agent.', cacheBreakpoint: false }],
  messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello' }] }],
  tools: [],
  maxTokens: 512,
};

const answer = (extra: Partial<ScriptedMessage> = {}): ScriptedMessage => ({
  kind: 'message',
  content: [{ type: 'text', text: ANSWER }],
  stopReason: 'end_turn',
  ...extra,
});

describe.each([
  [
    'anthropic',
    () =>
      createAnthropicProvider({
        name: 'anthropic',
        kind: 'anthropic',
        apiKey: 'k',
        baseURL: server.url,
        streamIdleTimeoutMs: IDLE_MS,
      }),
  ],
  [
    'openai',
    () =>
      createOpenAiProvider({
        name: 'openai',
        kind: 'openai',
        apiKey: 'k',
        baseURL: `${server.url}/v1`,
        streamIdleTimeoutMs: IDLE_MS,
      }),
  ],
] as const)('%s: a silent stream', (_name, create: () => LlmProvider) => {
  test('that stalls after some text is cut after the idle time, as a retryable timeout', async () => {
    server.enqueue(answer({ stallAfterEvents: 5 }));
    const deltas: string[] = [];
    const started = Date.now();
    const error = await create()
      .chat(request, { onTextDelta: (t) => deltas.push(t) })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    const elapsed = Date.now() - started;
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(`sent nothing for ${IDLE_MS} ms`);
    expect(elapsed).toBeGreaterThanOrEqual(IDLE_MS);
    expect(elapsed).toBeLessThan(IDLE_MS + 1_500);
    // Some text came before the stall: the step's retry rewinds it.
    expect(deltas.join('').length).toBeGreaterThan(0);
    const failure = classifyProviderError(error, { provider: _name, model: 'test-model' });
    expect(failure?.type).toBe(LlmFailureType.Timeout);
    expect(failure?.nonRetryable).toBe(false);
    await server.waitForAbortedRequests(1);
  });

  test('that never sends a byte after its opening is cut too', async () => {
    server.enqueue({ kind: 'hang' });
    await expect(create().chat(request)).rejects.toThrow(`sent nothing for ${IDLE_MS} ms`);
  });

  test('kept alive through a pause three times the idle time is not cut; without keep-alives it is', async () => {
    server.enqueue(answer({ pause: { afterEvents: 3, ms: IDLE_MS * 3, keepAliveEveryMs: IDLE_MS / 4 } }));
    const result = await create().chat(request);
    expect(result.content).toEqual([{ type: 'text', text: ANSWER }]);

    server.enqueue(answer({ pause: { afterEvents: 3, ms: IDLE_MS * 3 } }));
    await expect(create().chat(request)).rejects.toThrow(`sent nothing for ${IDLE_MS} ms`);
  });
});

test('LLM_STREAM_IDLE_TIMEOUT_MS: default two minutes, 0 turns the cut off, a non-number is refused', () => {
  expect(streamIdleTimeoutFromEnv({})).toBe(DEFAULT_STREAM_IDLE_TIMEOUT_MS);
  expect(DEFAULT_STREAM_IDLE_TIMEOUT_MS).toBe(120_000);
  expect(streamIdleTimeoutFromEnv({ LLM_STREAM_IDLE_TIMEOUT_MS: '0' })).toBe(0);
  expect(streamIdleTimeoutFromEnv({ LLM_STREAM_IDLE_TIMEOUT_MS: '90000' })).toBe(90_000);
  expect(() => streamIdleTimeoutFromEnv({ LLM_STREAM_IDLE_TIMEOUT_MS: '2m' })).toThrow(
    /LLM_STREAM_IDLE_TIMEOUT_MS="2m" is not allowed: a whole number of milliseconds/,
  );
});
