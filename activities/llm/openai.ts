/**
 * OpenAI Chat Completions adapter, for OpenAI itself (`kind: 'openai'`) and for any server speaking
 * the same protocol by base URL (`kind: 'openai-compatible'`: Ollama, vLLM, llama.cpp server,
 * OpenRouter). Always streams, with `stream_options.include_usage` so the last chunk carries usage.
 * SDK retries are off and SDK errors propagate unchanged, as in the Anthropic adapter.
 *
 * OpenAI caches prompt prefixes automatically; keeping the system prompt one stable message at the
 * start is what lets it hit. Its `prompt_tokens` includes the cached part, so our `inputTokens` is
 * `prompt_tokens - cached_tokens`, and there is no cache-write count.
 */
import OpenAI from 'openai';
import {
  DEFAULT_STREAM_TIMEOUT_MS,
  openStreamScope,
  parseToolArguments,
  scopedFetch,
  serverOf,
  streamIdleTimeoutFromEnv,
  withStreamScope,
  type StreamScope,
} from './adapter-support';
import type {
  ChatCallbacks,
  ChatMessage,
  ChatRequest,
  ChatResult,
  LlmProvider,
  ProviderConfig,
  StopReason,
  TextBlock,
  ToolResultImage,
  ToolUseBlock,
  Usage,
} from './types';
import { imagesToSend } from './request-images';

/** Joins system segments and text blocks: a blank line keeps them visibly separate for the model. */
const TEXT_SEPARATOR = '\n\n';

/** Introduces the images of one tool call in the user message after the tool messages. */
export const TOOL_IMAGES_INTRO = 'Images returned by tool call';

/** OpenAI has no `is_error` on tool messages, so a failed call's result says so in its text. */
export const TOOL_ERROR_PREFIX = '[tool error] ';

const FINISH_REASONS: Partial<Record<string, StopReason>> = {
  stop: 'end_turn',
  tool_calls: 'tool_use',
  function_call: 'tool_use',
  length: 'max_tokens',
  content_filter: 'refusal',
};

/**
 * Some compatible servers (Ollama among them) finish a tool-calling turn with `stop`; the tool calls
 * in the message are what tells the loop to run tools.
 */
function stopReasonOf(finishReason: string, hasToolCalls: boolean): StopReason {
  const mapped = FINISH_REASONS[finishReason] ?? 'other';
  return mapped === 'end_turn' && hasToolCalls ? 'tool_use' : mapped;
}

function textOf(blocks: ChatMessage['content']): string {
  return blocks.flatMap((block) => (block.type === 'text' ? [block.text] : [])).join(TEXT_SEPARATOR);
}

/**
 * The user message that shows the images of a message's tool results. A `tool` message can hold only
 * text in Chat Completions, so the images follow the tool messages in a user message, each group
 * introduced by the call it came from.
 */
function toolImagesMessage(
  message: ChatMessage,
  sendable: ReadonlySet<ToolResultImage>,
): OpenAI.ChatCompletionContentPart[] {
  const parts: OpenAI.ChatCompletionContentPart[] = [];
  for (const block of message.content) {
    if (block.type !== 'tool_result') continue;
    const images = (block.images ?? []).filter((image) => sendable.has(image));
    if (images.length === 0) continue;
    parts.push({ type: 'text', text: `${TOOL_IMAGES_INTRO} ${block.toolUseId}:` });
    for (const image of images)
      parts.push({ type: 'image_url', image_url: { url: `data:${image.mediaType};base64,${image.data}` } });
  }
  return parts;
}

/** One of our messages becomes one or more OpenAI messages (tool results become `tool` messages). */
function toOpenAiMessages(
  message: ChatMessage,
  sendable: ReadonlySet<ToolResultImage>,
): OpenAI.ChatCompletionMessageParam[] {
  if (message.role === 'assistant') {
    const toolCalls = message.content.flatMap((block): OpenAI.ChatCompletionMessageToolCall[] =>
      block.type === 'tool_use'
        ? [
            {
              id: block.id,
              type: 'function',
              function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) },
            },
          ]
        : [],
    );
    const text = textOf(message.content);
    return [
      {
        role: 'assistant',
        content: text === '' && toolCalls.length > 0 ? null : text,
        ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
      },
    ];
  }
  // Tool messages must directly follow the assistant message that made the calls, so they come first.
  const toolMessages = message.content.flatMap((block): OpenAI.ChatCompletionToolMessageParam[] =>
    block.type === 'tool_result'
      ? [
          {
            role: 'tool',
            tool_call_id: block.toolUseId,
            content: block.isError ? `${TOOL_ERROR_PREFIX}${block.content}` : block.content,
          },
        ]
      : [],
  );
  const hasText = message.content.some((block) => block.type === 'text');
  const images = toolImagesMessage(message, sendable);
  if (images.length > 0) {
    const text: OpenAI.ChatCompletionContentPart[] = hasText ? [{ type: 'text', text: textOf(message.content) }] : [];
    return [...toolMessages, { role: 'user', content: [...images, ...text] }];
  }
  return hasText ? [...toolMessages, { role: 'user', content: textOf(message.content) }] : toolMessages;
}

/**
 * The request body, without the streaming fields; exported for tests. OpenAI's own models take
 * `max_completion_tokens` (reasoning models reject `max_tokens`); compatible servers widely
 * understand only `max_tokens`.
 */
export function toOpenAiParams(
  request: ChatRequest,
  kind: ProviderConfig['kind'],
): Omit<OpenAI.ChatCompletionCreateParamsStreaming, 'stream'> {
  const system = request.system
    .map((segment) => segment.text)
    .filter((text) => text !== '')
    .join(TEXT_SEPARATOR);
  // A compatible server may run a model without vision, which would refuse the whole request: it reads
  // each image's description line instead.
  const sendable = kind === 'openai-compatible' ? new Set<ToolResultImage>() : imagesToSend(request.messages);
  const messages: OpenAI.ChatCompletionMessageParam[] = [
    ...(system === '' ? [] : [{ role: 'system' as const, content: system }]),
    ...request.messages.flatMap((message) => toOpenAiMessages(message, sendable)),
  ];
  return {
    model: request.model,
    messages,
    ...(kind === 'openai' ? { max_completion_tokens: request.maxTokens } : { max_tokens: request.maxTokens }),
    ...(request.tools.length > 0
      ? {
          tools: request.tools.map((tool) => ({
            type: 'function' as const,
            function: { name: tool.name, description: tool.description, parameters: tool.inputSchema },
          })),
        }
      : {}),
    ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
  };
}

type ToolCallInProgress = { id: string; name: string; args: string };

class StreamAccumulator {
  text = '';
  /** The calls in the order they started. */
  readonly toolCalls: ToolCallInProgress[] = [];
  /** The call each `index` the server sent (or its absence) currently continues. */
  private readonly slots = new Map<number | undefined, ToolCallInProgress>();
  model: string | undefined;
  responseId: string | undefined;
  finishReason: string | undefined;
  usage: Usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };

  constructor(private readonly onTextDelta: ((text: string) => void) | undefined) {}

  add(chunk: OpenAI.ChatCompletionChunk): void {
    if (chunk.model) this.model = chunk.model;
    if (chunk.id) this.responseId = chunk.id;
    if (chunk.usage) {
      const cached = chunk.usage.prompt_tokens_details?.cached_tokens ?? 0;
      this.usage = {
        inputTokens: chunk.usage.prompt_tokens - cached,
        outputTokens: chunk.usage.completion_tokens,
        cacheReadTokens: cached,
        cacheWriteTokens: 0,
      };
    }
    const choice = chunk.choices[0];
    if (!choice) return;
    if (choice.delta.content) {
      this.text += choice.delta.content;
      this.onTextDelta?.(choice.delta.content);
    }
    for (const call of choice.delta.tool_calls ?? []) {
      const entry = this.entryFor(call);
      // The id and name arrive whole in a call's first chunk; only the arguments are split.
      if (call.id && entry.id === '') entry.id = call.id;
      if (call.function?.name && entry.name === '') entry.name = call.function.name;
      entry.args += call.function?.arguments ?? '';
    }
    if (choice.finish_reason) this.finishReason = choice.finish_reason;
  }

  /**
   * The call a delta continues. OpenAI numbers parallel calls by `index`; some compatible servers send
   * index 0 for every call (Ollama) or no index at all, which would merge two calls into one with
   * unparseable arguments. So a delta that starts a call opens a new one whatever its index says: one
   * with another id than the slot's call, or (servers that send no ids) one with a name once the slot's
   * call has complete arguments (a server that repeats the name on every chunk of a call is not split).
   */
  private entryFor(call: OpenAI.ChatCompletionChunk.Choice.Delta.ToolCall): ToolCallInProgress {
    const index = typeof call.index === 'number' ? call.index : undefined;
    const current = this.slots.get(index);
    if (current && !startsAnotherCall(current, call)) return current;
    const entry: ToolCallInProgress = { id: '', name: '', args: '' };
    this.toolCalls.push(entry);
    this.slots.set(index, entry);
    return entry;
  }

  content(): Array<TextBlock | ToolUseBlock> {
    const text: TextBlock[] = this.text === '' ? [] : [{ type: 'text', text: this.text }];
    const calls = this.toolCalls.map((call, index): ToolUseBlock => ({
      type: 'tool_use',
      // Some compatible servers omit ids; the ledger needs one that is unique within the turn.
      id: call.id || `call_${index}`,
      name: call.name,
      ...parseToolArguments(call.name, call.args),
    }));
    return [...text, ...calls];
  }
}

function startsAnotherCall(
  current: ToolCallInProgress,
  call: OpenAI.ChatCompletionChunk.Choice.Delta.ToolCall,
): boolean {
  if (call.id && current.id) return call.id !== current.id;
  if (!call.function?.name || !current.name) return false;
  try {
    JSON.parse(current.args);
    return true;
  } catch {
    return false;
  }
}

function stoppedByScope(scope: StreamScope, timeoutMs: number, idleTimeoutMs: number): Error | undefined {
  if (scope.timedOut)
    return new OpenAI.APIConnectionTimeoutError({ message: `OpenAI stream exceeded ${timeoutMs} ms.` });
  // A retryable timeout: the step's retry asks again, and its stream rewinds what this one showed.
  if (scope.idle)
    return new OpenAI.APIConnectionTimeoutError({ message: `OpenAI stream sent nothing for ${idleTimeoutMs} ms.` });
  if (scope.callerAborted) return new OpenAI.APIUserAbortError();
  return undefined;
}

export function createOpenAiProvider(config: ProviderConfig): LlmProvider {
  const timeoutMs = config.timeoutMs ?? DEFAULT_STREAM_TIMEOUT_MS;
  const idleTimeoutMs = config.streamIdleTimeoutMs ?? streamIdleTimeoutFromEnv();
  const client = new OpenAI({
    // Local compatible servers (Ollama, vLLM) need no key, but the SDK insists on one.
    apiKey: config.apiKey ?? (config.kind === 'openai-compatible' ? 'not-needed' : undefined),
    baseURL: config.baseURL,
    maxRetries: 0,
    timeout: timeoutMs,
    // Every byte received, keep-alive comments included, tells the call's stream scope that the stream is alive.
    fetch: scopedFetch(),
  });
  const server = serverOf(client.baseURL);

  async function chat(request: ChatRequest, callbacks: ChatCallbacks = {}): Promise<ChatResult> {
    const scope = openStreamScope(callbacks.signal, timeoutMs, idleTimeoutMs);
    const accumulator = new StreamAccumulator(callbacks.onTextDelta);
    try {
      await withStreamScope(scope, async () => {
        const stream = await client.chat.completions.create(
          { ...toOpenAiParams(request, config.kind), stream: true, stream_options: { include_usage: true } },
          { signal: scope.signal },
        );
        for await (const chunk of stream) {
          callbacks.onStreamEvent?.();
          accumulator.add(chunk);
        }
      });
    } catch (error) {
      throw stoppedByScope(scope, timeoutMs, idleTimeoutMs) ?? error;
    } finally {
      scope.dispose();
    }
    // The SDK ends the iteration quietly when its signal fires, so an abort must be detected here.
    const stopped = stoppedByScope(scope, timeoutMs, idleTimeoutMs);
    if (stopped) throw stopped;
    if (accumulator.finishReason === undefined) {
      throw new OpenAI.APIConnectionError({ message: 'OpenAI stream ended without a finish_reason.' });
    }
    const content = accumulator.content();
    return {
      content,
      stopReason: stopReasonOf(
        accumulator.finishReason,
        content.some((block) => block.type === 'tool_use'),
      ),
      usage: accumulator.usage,
      model: accumulator.model ?? request.model,
      provider: config.name,
      ...(accumulator.responseId ? { responseId: accumulator.responseId } : {}),
      ...(server ? { server } : {}),
    };
  }

  return { name: config.name, kind: config.kind, chat };
}
