/**
 * The Anthropic and OpenAI adapters, through the real SDKs, against the local fake LLM server:
 * what they send on the wire, what they make of what comes back, and how aborts and HTTP errors
 * surface.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { createAnthropicProvider, MAX_CACHE_BREAKPOINTS } from '../../activities/llm/anthropic';
import { createOpenAiProvider, TOOL_ERROR_PREFIX } from '../../activities/llm/openai';
import type { ChatRequest, LlmProvider, ProviderConfig } from '../../activities/llm/types';
import { startFakeLlmServer, type FakeLlmServer, type ScriptedResponse } from '../fake-llm';

/** The brief's bound on how quickly an abort must end a hanging stream. */
const ABORT_DEADLINE_MS = 1_000;

let server: FakeLlmServer;
beforeAll(async () => {
  server = await startFakeLlmServer();
});
afterEach(() => server.reset());
afterAll(() => server.close());

const readFileTool = {
  name: 'read_file',
  description: 'Read a file',
  inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
};
const writeFileTool = {
  name: 'write_file',
  description: 'Write a file',
  inputSchema: { type: 'object', properties: { path: { type: 'string' }, text: { type: 'string' } } },
};

function simpleRequest(overrides: Partial<ChatRequest> = {}): ChatRequest {
  return {
    model: 'test-model',
    system: [{ text: 'You are a test agent.', cacheBreakpoint: false }],
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello' }] }],
    tools: [],
    maxTokens: 512,
    ...overrides,
  };
}

/** A conversation with a finished tool round: the shape every later LLM call of a task has. */
function conversationRequest(): ChatRequest {
  return {
    model: 'test-model',
    system: [
      { text: 'IDENTITY: you are Ada.', cacheBreakpoint: true },
      { text: 'MEMORY: the user likes tea.', cacheBreakpoint: true },
      { text: 'TIME: 2025-01-01 12:00', cacheBreakpoint: false },
    ],
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'Read a.txt and b.txt' }], kind: 'task_prompt' },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Reading both.' },
          { type: 'tool_use', id: 'call_a', name: 'read_file', input: { path: 'a.txt' } },
          { type: 'tool_use', id: 'call_b', name: 'read_file', input: { path: 'b.txt' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', toolUseId: 'call_a', content: 'contents of a' },
          { type: 'tool_result', toolUseId: 'call_b', content: 'ENOENT: b.txt', isError: true },
        ],
      },
      { role: 'user', content: [{ type: 'text', text: '[SYSTEM REMINDER] stay on task' }], kind: 'injection' },
    ],
    messageCacheBreakpoint: 2,
    tools: [readFileTool, writeFileTool],
    maxTokens: 1024,
    temperature: 0.2,
  };
}

const textAnswer = (text: string): ScriptedResponse => ({
  kind: 'message',
  content: [{ type: 'text', text }],
  stopReason: 'end_turn',
});

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to fail');
}

function countKey(value: unknown, key: string): number {
  return (JSON.stringify(value).match(new RegExp(`"${key}":`, 'g')) ?? []).length;
}

interface ProviderCase {
  label: string;
  make(overrides?: Partial<ProviderConfig>): LlmProvider;
  apiError: typeof Anthropic.APIError | typeof OpenAI.APIError;
  abortError: typeof Anthropic.APIUserAbortError | typeof OpenAI.APIUserAbortError;
  timeoutError: typeof Anthropic.APIConnectionTimeoutError | typeof OpenAI.APIConnectionTimeoutError;
}

const providerCases: ProviderCase[] = [
  {
    label: 'anthropic',
    make: (overrides) =>
      createAnthropicProvider({
        name: 'anthropic-test',
        kind: 'anthropic',
        apiKey: 'k',
        baseURL: server.url,
        ...overrides,
      }),
    apiError: Anthropic.APIError,
    abortError: Anthropic.APIUserAbortError,
    timeoutError: Anthropic.APIConnectionTimeoutError,
  },
  {
    label: 'openai',
    make: (overrides) =>
      createOpenAiProvider({
        name: 'openai-test',
        kind: 'openai',
        apiKey: 'k',
        baseURL: `${server.url}/v1`,
        ...overrides,
      }),
    apiError: OpenAI.APIError,
    abortError: OpenAI.APIUserAbortError,
    timeoutError: OpenAI.APIConnectionTimeoutError,
  },
];

describe.each(providerCases)('$label adapter: shared behaviour', ({ make, apiError, abortError, timeoutError }) => {
  test('text answer, streamed: deltas reported, text assembled, model and provider named', async () => {
    const answer = 'The quick brown fox jumps over the lazy dog.';
    server.enqueue(textAnswer(answer));
    const deltas: string[] = [];
    let events = 0;
    const provider = make();
    const result = await provider.chat(simpleRequest(), {
      onTextDelta: (text) => deltas.push(text),
      onStreamEvent: () => (events += 1),
    });

    expect(result.content).toEqual([{ type: 'text', text: answer }]);
    expect(result.stopReason).toBe('end_turn');
    expect(result.model).toBe('test-model');
    expect(result.provider).toBe(provider.name);
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join('')).toBe(answer);
    expect(events).toBeGreaterThan(deltas.length);
    expect(server.requests[0]?.body.stream).toBe(true);
  });

  test('tool_use answer: arguments reassembled and parsed', async () => {
    server.enqueue({
      kind: 'message',
      content: [
        { type: 'text', text: 'Writing.' },
        {
          type: 'tool_use',
          id: 'call_1',
          name: 'write_file',
          input: { path: 'notes/x.md', text: 'line one\nline "two"' },
        },
        { type: 'tool_use', id: 'call_2', name: 'read_file', input: { path: 'y.md' } },
      ],
      stopReason: 'tool_use',
    });
    const result = await make().chat(simpleRequest({ tools: [readFileTool, writeFileTool] }));

    expect(result.stopReason).toBe('tool_use');
    expect(result.content).toEqual([
      { type: 'text', text: 'Writing.' },
      {
        type: 'tool_use',
        id: 'call_1',
        name: 'write_file',
        input: { path: 'notes/x.md', text: 'line one\nline "two"' },
      },
      { type: 'tool_use', id: 'call_2', name: 'read_file', input: { path: 'y.md' } },
    ]);
  });

  test('malformed or non-object tool arguments become inputParseError, never a throw', async () => {
    server.enqueue({
      kind: 'message',
      content: [
        {
          type: 'tool_use',
          id: 'call_bad',
          name: 'write_file',
          rawArguments: '{"path": "x.md", "text": "unterminated',
        },
        { type: 'tool_use', id: 'call_list', name: 'read_file', rawArguments: '["not", "an", "object"]' },
      ],
      stopReason: 'tool_use',
    });
    const result = await make().chat(simpleRequest({ tools: [readFileTool, writeFileTool] }));

    const [bad, list] = result.content;
    expect(bad).toMatchObject({ type: 'tool_use', id: 'call_bad', name: 'write_file', input: undefined });
    expect(bad?.type === 'tool_use' && bad.inputParseError).toMatch(/"write_file" are not valid JSON.*unterminated/);
    expect(list).toMatchObject({ type: 'tool_use', id: 'call_list', input: undefined });
    expect(list?.type === 'tool_use' && list.inputParseError).toMatch(/must be a JSON object/);
  });

  test('max_tokens stop reason', async () => {
    server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'and then the' }], stopReason: 'max_tokens' });
    const result = await make().chat(simpleRequest());
    expect(result.stopReason).toBe('max_tokens');
    expect(result.content).toEqual([{ type: 'text', text: 'and then the' }]);
  });

  test('abort during a hanging stream rejects within 1 s with the SDK abort error; the server sees the disconnect', async () => {
    server.enqueue({ kind: 'hang' });
    const controller = new AbortController();
    let events = 0;
    const pending = make().chat(simpleRequest(), {
      signal: controller.signal,
      onStreamEvent: () => {
        events += 1;
        controller.abort();
      },
    });
    const startedAt = Date.now();
    const error = await caught(pending);

    expect(events).toBeGreaterThan(0); // the abort came mid-stream, after the opening events
    expect(Date.now() - startedAt).toBeLessThan(ABORT_DEADLINE_MS);
    expect(error).toBeInstanceOf(abortError);
    await server.waitForAbortedRequests(1, ABORT_DEADLINE_MS);
    expect(server.requests[0]?.aborted).toBe(true);
  });

  test('an already-aborted signal rejects without a request', async () => {
    const controller = new AbortController();
    controller.abort();
    const error = await caught(make().chat(simpleRequest(), { signal: controller.signal }));
    expect(error).toBeInstanceOf(abortError);
    expect(server.requests).toHaveLength(0);
  });

  test('a stream that outlives timeoutMs fails as a connection timeout, and the connection is dropped', async () => {
    const STREAM_TIMEOUT_MS = 200;
    server.enqueue({ kind: 'hang' });
    const error = await caught(make({ timeoutMs: STREAM_TIMEOUT_MS }).chat(simpleRequest()));
    expect(error).toBeInstanceOf(timeoutError);
    await server.waitForAbortedRequests(1);
  });

  test('429 with retry-after surfaces unchanged as the SDK error, status and headers intact', async () => {
    server.enqueue({ kind: 'error', status: 429, message: 'rate limited', headers: { 'retry-after': '7' } });
    const error = await caught(make().chat(simpleRequest()));

    expect(error).toBeInstanceOf(apiError);
    const sdkError = error as InstanceType<typeof apiError>;
    expect(sdkError.status).toBe(429);
    expect(sdkError.headers?.get('retry-after')).toBe('7');
    expect(server.requests).toHaveLength(1); // SDK retries are off
  });
});

describe('anthropic adapter: wire format', () => {
  const provider = () =>
    createAnthropicProvider({ name: 'anthropic', kind: 'anthropic', apiKey: 'k', baseURL: server.url });

  test('cache breakpoints on system segments 1 and 2, the last tool (1 hour, the default policy) and the breakpoint message (5 minutes); tool results mapped', async () => {
    server.enqueue(textAnswer('ok'));
    await provider().chat(conversationRequest());
    const body = server.requests[0]?.body;

    expect(body).toMatchObject({ model: 'test-model', max_tokens: 1024, temperature: 0.2, stream: true });
    expect(body?.system).toEqual([
      { type: 'text', text: 'IDENTITY: you are Ada.', cache_control: { type: 'ephemeral', ttl: '1h' } },
      { type: 'text', text: 'MEMORY: the user likes tea.', cache_control: { type: 'ephemeral', ttl: '1h' } },
      { type: 'text', text: 'TIME: 2025-01-01 12:00' },
    ]);
    expect(body?.tools).toEqual([
      { name: 'read_file', description: 'Read a file', input_schema: readFileTool.inputSchema },
      {
        name: 'write_file',
        description: 'Write a file',
        input_schema: writeFileTool.inputSchema,
        cache_control: { type: 'ephemeral', ttl: '1h' },
      },
    ]);
    expect(body?.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Read a.txt and b.txt' }] },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Reading both.' },
          { type: 'tool_use', id: 'call_a', name: 'read_file', input: { path: 'a.txt' } },
          { type: 'tool_use', id: 'call_b', name: 'read_file', input: { path: 'b.txt' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'call_a', content: 'contents of a' },
          {
            type: 'tool_result',
            tool_use_id: 'call_b',
            content: 'ENOENT: b.txt',
            is_error: true,
            cache_control: { type: 'ephemeral' },
          },
        ],
      },
      { role: 'user', content: [{ type: 'text', text: '[SYSTEM REMINDER] stay on task' }] },
    ]);
    expect(countKey(body, 'cache_control')).toBe(MAX_CACHE_BREAKPOINTS);
  });

  test('never more than 4 breakpoints: extra flagged system segments go uncached, earliest kept', async () => {
    server.enqueue(textAnswer('ok'));
    const request = conversationRequest();
    request.system = ['one', 'two', 'three', 'four'].map((text) => ({ text, cacheBreakpoint: true }));
    await provider().chat(request);
    const body = server.requests[0]?.body;

    expect(countKey(body, 'cache_control')).toBe(MAX_CACHE_BREAKPOINTS);
    expect(
      (body?.system as Array<{ cache_control?: unknown }>).map((block) => block.cache_control !== undefined),
    ).toEqual([true, true, false, false]);
  });

  test('without tools or a message breakpoint, system segments may use the whole budget; no empty fields sent', async () => {
    server.enqueue(textAnswer('ok'));
    await provider().chat(
      simpleRequest({ system: ['a', 'b', 'c', 'd', 'e'].map((text) => ({ text, cacheBreakpoint: true })) }),
    );
    const body = server.requests[0]?.body;

    expect(countKey(body?.system, 'cache_control')).toBe(MAX_CACHE_BREAKPOINTS);
    expect(body).not.toHaveProperty('tools');
    expect(body).not.toHaveProperty('temperature');
  });

  test('a tool call whose arguments failed to parse is replayed with an empty object input', async () => {
    server.enqueue(textAnswer('ok'));
    await provider().chat(
      simpleRequest({
        messages: [
          { role: 'user', content: [{ type: 'text', text: 'go' }] },
          {
            role: 'assistant',
            content: [{ type: 'tool_use', id: 't1', name: 'read_file', input: undefined, inputParseError: 'bad JSON' }],
          },
          { role: 'user', content: [{ type: 'tool_result', toolUseId: 't1', content: 'bad JSON', isError: true }] },
        ],
      }),
    );
    const messages = server.requests[0]?.body.messages as Array<{ content: unknown[] }>;
    expect(messages[1]?.content).toEqual([{ type: 'tool_use', id: 't1', name: 'read_file', input: {} }]);
  });

  test('usage: input, output, cache read and cache write tokens mapped', async () => {
    server.enqueue({
      kind: 'message',
      content: [{ type: 'text', text: 'ok' }],
      stopReason: 'end_turn',
      usage: { inputTokens: 321, outputTokens: 45, cacheReadTokens: 6000, cacheWriteTokens: 1200 },
    });
    const result = await provider().chat(simpleRequest());
    expect(result.usage).toEqual({ inputTokens: 321, outputTokens: 45, cacheReadTokens: 6000, cacheWriteTokens: 1200 });
  });
});

describe('openai adapter: wire format', () => {
  const provider = (kind: 'openai' | 'openai-compatible' = 'openai') =>
    createOpenAiProvider({ name: kind, kind, apiKey: 'k', baseURL: `${server.url}/v1` });

  test('one system message, assistant tool_calls, tool messages, text-only user content as a string', async () => {
    server.enqueue(textAnswer('ok'));
    await provider().chat(conversationRequest());
    const body = server.requests[0]?.body;

    expect(body).toMatchObject({
      model: 'test-model',
      max_completion_tokens: 1024,
      temperature: 0.2,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(body).not.toHaveProperty('max_tokens');
    expect(body?.tools).toEqual([
      {
        type: 'function',
        function: { name: 'read_file', description: 'Read a file', parameters: readFileTool.inputSchema },
      },
      {
        type: 'function',
        function: { name: 'write_file', description: 'Write a file', parameters: writeFileTool.inputSchema },
      },
    ]);
    expect(body?.messages).toEqual([
      { role: 'system', content: 'IDENTITY: you are Ada.\n\nMEMORY: the user likes tea.\n\nTIME: 2025-01-01 12:00' },
      { role: 'user', content: 'Read a.txt and b.txt' },
      {
        role: 'assistant',
        content: 'Reading both.',
        tool_calls: [
          { id: 'call_a', type: 'function', function: { name: 'read_file', arguments: '{"path":"a.txt"}' } },
          { id: 'call_b', type: 'function', function: { name: 'read_file', arguments: '{"path":"b.txt"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_a', content: 'contents of a' },
      { role: 'tool', tool_call_id: 'call_b', content: `${TOOL_ERROR_PREFIX}ENOENT: b.txt` },
      { role: 'user', content: '[SYSTEM REMINDER] stay on task' },
    ]);
    expect(countKey(body, 'cache_control')).toBe(0);
  });

  test('tool results come before text in the same user message; a tool-only assistant turn has null content', async () => {
    server.enqueue(textAnswer('ok'));
    await provider().chat(
      simpleRequest({
        messages: [
          { role: 'user', content: [{ type: 'text', text: 'go' }] },
          { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'read_file', input: { path: 'a' } }] },
          {
            role: 'user',
            content: [
              { type: 'text', text: 'Also: hurry.' },
              { type: 'tool_result', toolUseId: 't1', content: 'A' },
            ],
          },
        ],
      }),
    );
    expect(server.requests[0]?.body.messages).toEqual([
      { role: 'system', content: 'You are a test agent.' },
      { role: 'user', content: 'go' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 't1', type: 'function', function: { name: 'read_file', arguments: '{"path":"a"}' } }],
      },
      { role: 'tool', tool_call_id: 't1', content: 'A' },
      { role: 'user', content: 'Also: hurry.' },
    ]);
  });

  test('openai-compatible servers get max_tokens and no tools field when there are none', async () => {
    server.enqueue(textAnswer('ok'));
    await provider('openai-compatible').chat(simpleRequest());
    const body = server.requests[0]?.body;
    expect(body).toMatchObject({ max_tokens: 512 });
    expect(body).not.toHaveProperty('max_completion_tokens');
    expect(body).not.toHaveProperty('tools');
  });

  test.each<[string, { toolCallIndexes: 'all-zero' | 'omitted'; omitToolCallIds?: boolean }]>([
    ['index 0 for every call (Ollama)', { toolCallIndexes: 'all-zero' }],
    ['no index at all', { toolCallIndexes: 'omitted' }],
    ['index 0 for every call and no ids', { toolCallIndexes: 'all-zero', omitToolCallIds: true }],
  ])('parallel calls from a server that sends %s stay separate calls', async (_label, quirk) => {
    server.enqueue({
      kind: 'message',
      content: [
        { type: 'tool_use', id: 'call_a', name: 'write_file', input: { path: 'a.rs', text: 'fn a() {}' } },
        { type: 'tool_use', id: 'call_b', name: 'write_file', input: { path: 'b.rs', text: 'fn b() {}' } },
        { type: 'tool_use', id: 'call_c', name: 'read_file', input: { path: 'c.rs' } },
      ],
      stopReason: 'tool_use',
      ...quirk,
    });
    const result = await provider('openai-compatible').chat(simpleRequest({ tools: [readFileTool, writeFileTool] }));
    const calls = result.content.filter((b) => b.type === 'tool_use');
    expect(calls.map((c) => [c.name, c.input, c.inputParseError])).toEqual([
      ['write_file', { path: 'a.rs', text: 'fn a() {}' }, undefined],
      ['write_file', { path: 'b.rs', text: 'fn b() {}' }, undefined],
      ['read_file', { path: 'c.rs' }, undefined],
    ]);
    if (!quirk.omitToolCallIds) expect(calls.map((c) => c.id)).toEqual(['call_a', 'call_b', 'call_c']);
    else expect(new Set(calls.map((c) => c.id)).size).toBe(3);
  });

  test('usage: cached tokens split out of prompt_tokens; no cache writes', async () => {
    server.enqueue({
      kind: 'message',
      content: [{ type: 'text', text: 'ok' }],
      stopReason: 'end_turn',
      usage: { inputTokens: 150, outputTokens: 30, cacheReadTokens: 2048 },
    });
    const result = await provider().chat(simpleRequest());

    expect(server.requests).toHaveLength(1);
    expect(result.usage).toEqual({ inputTokens: 150, outputTokens: 30, cacheReadTokens: 2048, cacheWriteTokens: 0 });
  });
});
