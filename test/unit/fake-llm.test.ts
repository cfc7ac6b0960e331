/**
 * The fake LLM server, driven by the real Anthropic and OpenAI SDKs: if the SDKs understand what it
 * sends, adapter tests against it exercise the real wire protocols.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { startFakeLlmServer, type FakeLlmServer } from '../fake-llm';

let server: FakeLlmServer;
let anthropic: Anthropic;
let openai: OpenAI;

beforeAll(async () => {
  server = await startFakeLlmServer();
  anthropic = new Anthropic({ apiKey: 'test-key', baseURL: server.url, maxRetries: 0 });
  openai = new OpenAI({ apiKey: 'test-key', baseURL: `${server.url}/v1`, maxRetries: 0 });
});
afterEach(() => server.reset());
afterAll(() => server.close());

const userSays = (text: string) => [{ role: 'user' as const, content: text }];

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to fail');
}

describe('Anthropic Messages protocol', () => {
  test('non-streaming text answer with usage and cache tokens; the request is recorded', async () => {
    server.enqueue({
      kind: 'message',
      content: [{ type: 'text', text: 'Hello there' }],
      stopReason: 'end_turn',
      usage: { inputTokens: 100, outputTokens: 7, cacheReadTokens: 40, cacheWriteTokens: 30 },
    });
    const message = await anthropic.messages.create({
      model: 'claude-test',
      max_tokens: 256,
      messages: userSays('hi'),
    });

    expect(message.content).toEqual([{ type: 'text', text: 'Hello there' }]);
    expect(message.stop_reason).toBe('end_turn');
    expect(message.model).toBe('claude-test');
    expect(message.usage).toMatchObject({
      input_tokens: 100,
      output_tokens: 7,
      cache_read_input_tokens: 40,
      cache_creation_input_tokens: 30,
    });
    expect(server.requests).toHaveLength(1);
    const [recorded] = server.requests;
    expect(recorded).toMatchObject({ protocol: 'anthropic', path: '/v1/messages', aborted: false });
    expect(recorded?.body).toMatchObject({ model: 'claude-test', max_tokens: 256, messages: userSays('hi') });
    expect(recorded?.headers['anthropic-version']).toEqual(expect.any(String));
  });

  test('streaming sends the real event sequence, with text split over several deltas', async () => {
    const text = 'A longer answer that spans several text deltas.';
    server.enqueue({ kind: 'message', content: [{ type: 'text', text }], stopReason: 'end_turn' });
    const response = await fetch(`${server.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', max_tokens: 10, stream: true, messages: userSays('hi') }),
    });
    const eventNames = [...(await response.text()).matchAll(/^event: (\w+)$/gm)].map((m) => m[1]);

    expect(response.headers.get('content-type')).toBe('text/event-stream');
    expect(eventNames.slice(0, 3)).toEqual(['message_start', 'ping', 'content_block_start']);
    expect(eventNames.filter((name) => name === 'content_block_delta').length).toBeGreaterThan(2);
    expect(eventNames.slice(-3)).toEqual(['content_block_stop', 'message_delta', 'message_stop']);
  });

  test('streaming tool_use: the SDK reassembles the partial JSON chunks into the input', async () => {
    const input = { path: 'notes/today.md', lines: [1, 2, 3], options: { create: true } };
    server.enqueue({
      kind: 'message',
      content: [
        { type: 'text', text: 'Let me write that.' },
        { type: 'tool_use', id: 'toolu_1', name: 'write_file', input },
      ],
      stopReason: 'tool_use',
      usage: { inputTokens: 50, outputTokens: 20, cacheReadTokens: 5, cacheWriteTokens: 9 },
    });
    const stream = anthropic.messages.stream({ model: 'm', max_tokens: 100, messages: userSays('write') });
    const jsonDeltas: string[] = [];
    stream.on('streamEvent', (event) => {
      if (event.type === 'content_block_delta' && event.delta.type === 'input_json_delta')
        jsonDeltas.push(event.delta.partial_json);
    });
    const message = await stream.finalMessage();

    expect(message.content).toEqual([
      expect.objectContaining({ type: 'text', text: 'Let me write that.' }),
      { type: 'tool_use', id: 'toolu_1', name: 'write_file', input },
    ]);
    expect(jsonDeltas.filter((d) => d !== '').length).toBeGreaterThan(2);
    expect(message.stop_reason).toBe('tool_use');
    expect(message.usage).toMatchObject({
      input_tokens: 50,
      output_tokens: 20,
      cache_read_input_tokens: 5,
      cache_creation_input_tokens: 9,
    });
  });

  test('max_tokens stop reason, streamed', async () => {
    server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'cut of' }], stopReason: 'max_tokens' });
    const message = await anthropic.messages
      .stream({ model: 'm', max_tokens: 3, messages: userSays('go') })
      .finalMessage();
    expect(message.stop_reason).toBe('max_tokens');
  });

  test('429 surfaces as RateLimitError with retry-after, error type and request id', async () => {
    server.enqueue({ kind: 'error', status: 429, message: 'slow down', headers: { 'retry-after': '7' } });
    const error = await caught(anthropic.messages.create({ model: 'm', max_tokens: 10, messages: userSays('hi') }));

    expect(error).toBeInstanceOf(Anthropic.RateLimitError);
    const apiError = error as InstanceType<typeof Anthropic.APIError>;
    expect(apiError.status).toBe(429);
    expect(apiError.headers?.get('retry-after')).toBe('7');
    expect(apiError.type).toBe('rate_limit_error');
    expect(apiError.requestID).toMatch(/^req_fake_/);
    expect(apiError.message).toContain('slow down');
  });

  test('529 is an overloaded_error', async () => {
    server.enqueue({ kind: 'error', status: 529 });
    const error = (await caught(
      anthropic.messages.create({ model: 'm', max_tokens: 10, messages: userSays('hi'), stream: true }),
    )) as InstanceType<typeof Anthropic.APIError>;
    expect(error.status).toBe(529);
    expect(error.type).toBe('overloaded_error');
  });

  test('hang: the stream opens, then stays silent until the client aborts; the disconnect is recorded', async () => {
    server.enqueue({ kind: 'hang' });
    const controller = new AbortController();
    const stream = await anthropic.messages.create(
      { model: 'm', max_tokens: 10, messages: userSays('hi'), stream: true },
      { signal: controller.signal },
    );
    const seen: string[] = [];
    const consumed = (async () => {
      for await (const event of stream) {
        seen.push(event.type);
        controller.abort();
      }
    })();
    await consumed.catch(() => undefined);

    expect(seen).toEqual(['message_start']);
    await server.waitForAbortedRequests(1);
    expect(server.requests[0]?.aborted).toBe(true);
    expect(server.requests[0]?.abortedAt).toBeGreaterThanOrEqual(server.requests[0]?.receivedAt ?? Infinity);
  });
  test('hang without streaming: no answer at all; the abort is recorded', async () => {
    server.enqueue({ kind: 'hang' });
    const controller = new AbortController();
    const pending = anthropic.messages.create(
      { model: 'm', max_tokens: 10, messages: userSays('hi') },
      { signal: controller.signal },
    );
    setTimeout(() => controller.abort(), 50);

    expect(await caught(pending)).toBeInstanceOf(Anthropic.APIUserAbortError);
    await server.waitForAbortedRequests(1);
    expect(server.requests).toHaveLength(1);
  });
});

describe('OpenAI Chat Completions protocol', () => {
  test('non-streaming text answer; prompt_tokens includes the cached tokens', async () => {
    server.enqueue({
      kind: 'message',
      content: [{ type: 'text', text: 'Bonjour' }],
      stopReason: 'end_turn',
      usage: { inputTokens: 90, outputTokens: 4, cacheReadTokens: 30 },
    });
    const completion = await openai.chat.completions.create({ model: 'gpt-test', messages: userSays('hi') });

    expect(completion.choices[0]?.message.content).toBe('Bonjour');
    expect(completion.choices[0]?.finish_reason).toBe('stop');
    expect(completion.model).toBe('gpt-test');
    expect(completion.usage).toMatchObject({
      prompt_tokens: 120,
      completion_tokens: 4,
      total_tokens: 124,
      prompt_tokens_details: { cached_tokens: 30 },
    });
    expect(server.requests[0]).toMatchObject({ protocol: 'openai', path: '/v1/chat/completions' });
    expect(server.requests[0]?.headers.authorization).toBe('Bearer test-key');
  });

  test('streaming tool calls: arguments arrive in several chunks, then finish_reason, usage and [DONE]', async () => {
    server.enqueue({
      kind: 'message',
      content: [
        { type: 'text', text: 'Checking both.' },
        { type: 'tool_use', id: 'call_a', name: 'read_file', input: { path: 'a/long/path/to/file.txt' } },
        { type: 'tool_use', name: 'list_dir', rawArguments: '{"dir": "src", "depth": 2}' },
      ],
      stopReason: 'tool_use',
      usage: { inputTokens: 10, outputTokens: 3, cacheReadTokens: 2 },
    });
    const stream = await openai.chat.completions.create({
      model: 'm',
      messages: userSays('look'),
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    const calls: Array<{ id?: string; name?: string; args: string; chunks: number }> = [];
    let finishReason: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (chunk.usage) usage = chunk.usage;
      if (!choice) continue;
      text += choice.delta.content ?? '';
      for (const call of choice.delta.tool_calls ?? []) {
        const entry = (calls[call.index] ??= { args: '', chunks: 0 });
        entry.id ??= call.id;
        entry.name ??= call.function?.name;
        entry.args += call.function?.arguments ?? '';
        entry.chunks += 1;
      }
      finishReason = choice.finish_reason ?? finishReason;
    }

    expect(text).toBe('Checking both.');
    expect(calls.map(({ id, name, args }) => ({ id, name, args: JSON.parse(args) as unknown }))).toEqual([
      { id: 'call_a', name: 'read_file', args: { path: 'a/long/path/to/file.txt' } },
      { id: expect.stringMatching(/^call_fake_/), name: 'list_dir', args: { dir: 'src', depth: 2 } },
    ]);
    expect(calls.every((call) => call.chunks > 2)).toBe(true);
    expect(finishReason).toBe('tool_calls');
    expect(usage).toMatchObject({
      prompt_tokens: 12,
      completion_tokens: 3,
      prompt_tokens_details: { cached_tokens: 2 },
    });
  });

  test('streaming without include_usage sends no usage chunk; max_tokens becomes finish_reason length', async () => {
    server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'trunc' }], stopReason: 'max_tokens' });
    const stream = await openai.chat.completions.create({ model: 'm', messages: userSays('go'), stream: true });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);

    expect(chunks.some((chunk) => chunk.usage)).toBe(false);
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('length');
  });

  test('503 with retry-after surfaces as an SDK error with status and headers', async () => {
    server.enqueue({ kind: 'error', status: 503, message: 'try later', headers: { 'retry-after': '3' } });
    const error = await caught(openai.chat.completions.create({ model: 'm', messages: userSays('hi'), stream: true }));

    expect(error).toBeInstanceOf(OpenAI.InternalServerError);
    const apiError = error as InstanceType<typeof OpenAI.APIError>;
    expect(apiError.status).toBe(503);
    expect(apiError.headers?.get('retry-after')).toBe('3');
    expect(apiError.message).toContain('try later');
    expect(apiError.requestID).toMatch(/^req_fake_/);
  });

  test('hang: aborting the stream is seen by the server', async () => {
    server.enqueue({ kind: 'hang' });
    const controller = new AbortController();
    const stream = await openai.chat.completions.create(
      { model: 'm', messages: userSays('hi'), stream: true },
      { signal: controller.signal },
    );
    let chunks = 0;
    await (async () => {
      for await (const _chunk of stream) {
        chunks += 1;
        controller.abort();
      }
    })().catch(() => undefined);

    expect(chunks).toBe(1);
    await server.waitForAbortedRequests(1);
    expect(server.abortedRequests).toBe(1);
  });
});

describe('scripting', () => {
  test('an exhausted script answers 500 with a clear message', async () => {
    const error = (await caught(
      anthropic.messages.create({ model: 'm', max_tokens: 10, messages: userSays('hi') }),
    )) as InstanceType<typeof Anthropic.APIError>;
    expect(error.status).toBe(500);
    expect(error.message).toContain('script exhausted');
  });

  test('the queue is used first, then the responder, across both protocols', async () => {
    server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'from queue' }], stopReason: 'end_turn' });
    server.setResponder((request) => ({
      kind: 'message',
      content: [{ type: 'text', text: `responder #${server.requests.indexOf(request)} (${request.protocol})` }],
      stopReason: 'end_turn',
    }));
    const first = await openai.chat.completions.create({ model: 'm', messages: userSays('1') });
    const second = await anthropic.messages.create({ model: 'm', max_tokens: 10, messages: userSays('2') });
    const third = await openai.chat.completions.create({ model: 'm', messages: userSays('3') });

    expect(first.choices[0]?.message.content).toBe('from queue');
    expect(second.content).toEqual([{ type: 'text', text: 'responder #1 (anthropic)' }]);
    expect(third.choices[0]?.message.content).toBe('responder #2 (openai)');
  });

  test('a responder can drive a long tool loop', async () => {
    const TOOL_ROUNDS = 300;
    server.setResponder(() =>
      server.requests.length <= TOOL_ROUNDS
        ? {
            kind: 'message',
            content: [{ type: 'tool_use', name: 'tick', input: { n: server.requests.length } }],
            stopReason: 'tool_use',
          }
        : { kind: 'message', content: [{ type: 'text', text: 'done' }], stopReason: 'end_turn' },
    );
    let calls = 0;
    let stop: string | null = 'tool_use';
    while (stop === 'tool_use') {
      const message = await anthropic.messages.create({
        model: 'm',
        max_tokens: 10,
        messages: userSays(`round ${calls}`),
      });
      stop = message.stop_reason;
      calls += 1;
    }
    expect(calls).toBe(TOOL_ROUNDS + 1);
  });

  test('concurrent clients each get the answer computed from their own request', async () => {
    server.setResponder((request) => {
      const messages = request.body.messages as Array<{ content: string }>;
      return {
        kind: 'message',
        content: [{ type: 'text', text: `echo ${messages[0]?.content}` }],
        stopReason: 'end_turn',
        chunkDelayMs: 5,
      };
    });
    const asks = Array.from({ length: 8 }, (_, i) => `question ${i}`);
    const answers = await Promise.all(
      asks.map(async (ask, i) => {
        if (i % 2 === 0) {
          return await anthropic.messages.stream({ model: 'm', max_tokens: 10, messages: userSays(ask) }).finalText();
        }
        const stream = await openai.chat.completions.create({ model: 'm', messages: userSays(ask), stream: true });
        let text = '';
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
        return text;
      }),
    );
    expect(answers).toEqual(asks.map((ask) => `echo ${ask}`));
    expect(server.requests).toHaveLength(asks.length);
  });

  test('reset clears the queue, the responder and the records', async () => {
    server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'x' }], stopReason: 'end_turn' });
    server.setResponder(() => ({ kind: 'message', content: [], stopReason: 'end_turn' }));
    await openai.chat.completions.create({ model: 'm', messages: userSays('hi') });
    server.reset();

    expect(server.requests).toHaveLength(0);
    const error = (await caught(
      openai.chat.completions.create({ model: 'm', messages: userSays('hi') }),
    )) as InstanceType<typeof OpenAI.APIError>;
    expect(error.status).toBe(500);
    expect(error.message).toContain('script exhausted');
  });
});
