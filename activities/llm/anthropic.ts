/**
 * Anthropic Messages adapter. Always streams (long answers never hit a response timeout, and each
 * event is a liveness signal for the activity heartbeat). SDK retries are off: Temporal's retry
 * policy is the only one, and SDK errors propagate unchanged for `errors.ts` to classify.
 *
 * Prompt caching: the API caches the prefix tools → system → messages up to each `cache_control`
 * breakpoint and rejects more than four breakpoints, so the budget is shared as
 * last tool (1) + message breakpoint (1) + flagged system segments (the rest, earliest first).
 */
import Anthropic from '@anthropic-ai/sdk';
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
  ContentBlock,
  LlmProvider,
  PromptCachePolicy,
  ProviderConfig,
  StopReason,
  TextBlock,
  ToolResultBlock,
  ToolResultImage,
  ToolUseBlock,
  Usage,
} from './types';
import { imagesToSend } from './request-images';

/** The Messages API rejects a request with more `cache_control` blocks than this. */
export const MAX_CACHE_BREAKPOINTS = 4;

/**
 * The default policy, chosen by the figures in docs/approvals.md: an approval wait between 5 minutes
 * and an hour finds the stable prefix still cached, for a one-off 0.75× surcharge on writing it.
 */
export const DEFAULT_PROMPT_CACHE_POLICY: PromptCachePolicy = 'prefix-1h';

const EPHEMERAL_5M: Anthropic.CacheControlEphemeral = { type: 'ephemeral' };
const EPHEMERAL_1H: Anthropic.CacheControlEphemeral = { type: 'ephemeral', ttl: '1h' };

/** Breakpoint markers per part of the prompt. The API wants 1-hour breakpoints before 5-minute ones, which every policy keeps. */
function cacheControls(policy: PromptCachePolicy): {
  prefix: Anthropic.CacheControlEphemeral;
  messages: Anthropic.CacheControlEphemeral;
} {
  switch (policy) {
    case 'all-5m':
      return { prefix: EPHEMERAL_5M, messages: EPHEMERAL_5M };
    case 'prefix-1h':
      return { prefix: EPHEMERAL_1H, messages: EPHEMERAL_5M };
    case 'all-1h':
      return { prefix: EPHEMERAL_1H, messages: EPHEMERAL_1H };
  }
}

const STOP_REASONS: Partial<Record<string, StopReason>> = {
  end_turn: 'end_turn',
  tool_use: 'tool_use',
  max_tokens: 'max_tokens',
  stop_sequence: 'stop_sequence',
  refusal: 'refusal',
  // pause_turn and model_context_window_exceeded map to 'other': continuing as after max_tokens would not help.
};

/** Caches the first `budget` flagged segments: the earliest are the most stable prefix. */
function systemBlocks(
  request: ChatRequest,
  budget: number,
  cacheControl: Anthropic.CacheControlEphemeral,
): Anthropic.TextBlockParam[] {
  let remaining = budget;
  return request.system
    .filter((segment) => segment.text !== '') // the API rejects empty text blocks
    .map((segment) => {
      const cache = segment.cacheBreakpoint && remaining > 0;
      if (cache) remaining -= 1;
      return { type: 'text', text: segment.text, ...(cache ? { cache_control: cacheControl } : {}) };
    });
}

function toolDefinitions(request: ChatRequest, cacheControl: Anthropic.CacheControlEphemeral): Anthropic.Tool[] {
  return request.tools.map((tool, index) => ({
    name: tool.name,
    description: tool.description,
    input_schema: tool.inputSchema as Anthropic.Tool.InputSchema,
    ...(index === request.tools.length - 1 ? { cache_control: cacheControl } : {}),
  }));
}

function isPlainObject(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A tool result's text, then the images this request shows (see `request-images.ts`), in the result itself. */
function toolResultContent(
  block: ToolResultBlock,
  sendable: ReadonlySet<ToolResultImage>,
): Anthropic.ToolResultBlockParam['content'] {
  const images = (block.images ?? []).filter((image) => sendable.has(image));
  if (images.length === 0) return block.content;
  return [
    ...(block.content === '' ? [] : [{ type: 'text' as const, text: block.content }]),
    ...images.map((image): Anthropic.ImageBlockParam => ({
      type: 'image',
      source: { type: 'base64', media_type: image.mediaType, data: image.data },
    })),
  ];
}

function contentBlock(block: ContentBlock, sendable: ReadonlySet<ToolResultImage>): Anthropic.ContentBlockParam {
  switch (block.type) {
    case 'text':
      return { type: 'text', text: block.text };
    case 'tool_use':
      // A call whose arguments did not parse is replayed with `{}`: the API requires an object.
      return { type: 'tool_use', id: block.id, name: block.name, input: isPlainObject(block.input) ? block.input : {} };
    case 'tool_result':
      return {
        type: 'tool_result',
        tool_use_id: block.toolUseId,
        content: toolResultContent(block, sendable),
        ...(block.isError === undefined ? {} : { is_error: block.isError }),
      };
  }
}

function messageParam(
  message: ChatMessage,
  cacheControl: Anthropic.CacheControlEphemeral | undefined,
  sendable: ReadonlySet<ToolResultImage>,
): Anthropic.MessageParam {
  // Empty text beside other blocks is dropped (the API rejects empty text blocks); never empty the message.
  const kept = message.content.filter((block) => !(block.type === 'text' && block.text === ''));
  const content = (kept.length > 0 ? kept : message.content).map((block) => contentBlock(block, sendable));
  const last = content.at(-1);
  if (cacheControl && last)
    content[content.length - 1] = { ...last, cache_control: cacheControl } as Anthropic.ContentBlockParam;
  return { role: message.role, content };
}

/** The request body, without `stream`; exported for tests and for token-count estimates. */
export function toAnthropicParams(
  request: ChatRequest,
  policy: PromptCachePolicy = DEFAULT_PROMPT_CACHE_POLICY,
): Omit<Anthropic.MessageCreateParamsStreaming, 'stream'> {
  const controls = cacheControls(policy);
  const breakpointIndex = request.messageCacheBreakpoint;
  const hasMessageBreakpoint =
    breakpointIndex !== undefined && breakpointIndex >= 0 && breakpointIndex < request.messages.length;
  const systemBudget = MAX_CACHE_BREAKPOINTS - (request.tools.length > 0 ? 1 : 0) - (hasMessageBreakpoint ? 1 : 0);
  const system = systemBlocks(request, systemBudget, controls.prefix);
  const sendable = imagesToSend(request.messages);
  return {
    model: request.model,
    max_tokens: request.maxTokens,
    messages: request.messages.map((message, index) =>
      messageParam(
        message,
        hasMessageBreakpoint && index === breakpointIndex ? controls.messages : undefined,
        sendable,
      ),
    ),
    ...(system.length > 0 ? { system } : {}),
    ...(request.tools.length > 0 ? { tools: toolDefinitions(request, controls.prefix) } : {}),
    ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
  };
}

/** The 1-hour share of the cache writes, when the API reports one (it prices them higher). */
function oneHourWrites(creation: Anthropic.CacheCreation | null | undefined): { cacheWrite1hTokens?: number } {
  const tokens = creation?.ephemeral_1h_input_tokens ?? 0;
  return tokens > 0 ? { cacheWrite1hTokens: tokens } : {};
}

type BlockInProgress =
  { kind: 'text'; text: string } | { kind: 'tool_use'; id: string; name: string; json: string; startInput: unknown };

/** Folds the raw stream events into our result; exposes whether `message_stop` arrived. */
class StreamAccumulator {
  readonly blocks = new Map<number, BlockInProgress>();
  model: string | undefined;
  responseId: string | undefined;
  stopReason: StopReason = 'other';
  usage: Usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
  complete = false;

  constructor(private readonly onTextDelta: ((text: string) => void) | undefined) {}

  add(event: Anthropic.RawMessageStreamEvent): void {
    switch (event.type) {
      case 'message_start':
        this.model = event.message.model;
        this.responseId = event.message.id;
        this.usage = {
          inputTokens: event.message.usage.input_tokens,
          outputTokens: event.message.usage.output_tokens,
          cacheReadTokens: event.message.usage.cache_read_input_tokens ?? 0,
          cacheWriteTokens: event.message.usage.cache_creation_input_tokens ?? 0,
          ...oneHourWrites(event.message.usage.cache_creation),
        };
        break;
      case 'content_block_start': {
        const block = event.content_block;
        if (block.type === 'text') this.blocks.set(event.index, { kind: 'text', text: block.text });
        else if (block.type === 'tool_use')
          this.blocks.set(event.index, {
            kind: 'tool_use',
            id: block.id,
            name: block.name,
            json: '',
            startInput: block.input,
          });
        break; // thinking and server-tool blocks are not part of our conversation model
      }
      case 'content_block_delta': {
        const block = this.blocks.get(event.index);
        if (event.delta.type === 'text_delta' && block?.kind === 'text') {
          block.text += event.delta.text;
          this.onTextDelta?.(event.delta.text);
        } else if (event.delta.type === 'input_json_delta' && block?.kind === 'tool_use') {
          block.json += event.delta.partial_json;
        }
        break;
      }
      case 'message_delta': {
        this.stopReason = (event.delta.stop_reason && STOP_REASONS[event.delta.stop_reason]) ?? 'other';
        // message_delta counts are cumulative; a null means "unchanged since message_start".
        const { usage } = event;
        this.usage = {
          inputTokens: usage.input_tokens ?? this.usage.inputTokens,
          outputTokens: usage.output_tokens,
          cacheReadTokens: usage.cache_read_input_tokens ?? this.usage.cacheReadTokens,
          cacheWriteTokens: usage.cache_creation_input_tokens ?? this.usage.cacheWriteTokens,
          ...(this.usage.cacheWrite1hTokens === undefined ? {} : { cacheWrite1hTokens: this.usage.cacheWrite1hTokens }),
        };
        break;
      }
      case 'message_stop':
        this.complete = true;
        break;
      case 'content_block_stop':
        break;
    }
  }

  content(): Array<TextBlock | ToolUseBlock> {
    return [...this.blocks.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, block]): TextBlock | ToolUseBlock => {
        if (block.kind === 'text') return { type: 'text', text: block.text };
        const parsed =
          block.json === '' && isPlainObject(block.startInput)
            ? { input: block.startInput }
            : parseToolArguments(block.name, block.json);
        return { type: 'tool_use', id: block.id, name: block.name, ...parsed };
      });
  }
}

/** The error to raise when our own signal, not the server, ended the stream. */
function stoppedByScope(scope: StreamScope, timeoutMs: number, idleTimeoutMs: number): Error | undefined {
  if (scope.timedOut)
    return new Anthropic.APIConnectionTimeoutError({ message: `Anthropic stream exceeded ${timeoutMs} ms.` });
  // A retryable timeout: the step's retry asks again, and its stream rewinds what this one showed.
  if (scope.idle)
    return new Anthropic.APIConnectionTimeoutError({
      message: `Anthropic stream sent nothing for ${idleTimeoutMs} ms.`,
    });
  if (scope.callerAborted) return new Anthropic.APIUserAbortError();
  return undefined;
}

export function createAnthropicProvider(config: ProviderConfig): LlmProvider {
  const timeoutMs = config.timeoutMs ?? DEFAULT_STREAM_TIMEOUT_MS;
  const idleTimeoutMs = config.streamIdleTimeoutMs ?? streamIdleTimeoutFromEnv();
  const client = new Anthropic({
    apiKey: config.apiKey,
    baseURL: config.baseURL,
    maxRetries: 0,
    timeout: timeoutMs,
    // Every byte received, pings included, tells the call's stream scope that the stream is alive.
    fetch: scopedFetch(),
  });
  const server = serverOf(client.baseURL);
  const cachePolicy = config.promptCache ?? DEFAULT_PROMPT_CACHE_POLICY;

  async function chat(request: ChatRequest, callbacks: ChatCallbacks = {}): Promise<ChatResult> {
    const scope = openStreamScope(callbacks.signal, timeoutMs, idleTimeoutMs);
    const accumulator = new StreamAccumulator(callbacks.onTextDelta);
    try {
      await withStreamScope(scope, async () => {
        const stream = await client.messages.create(
          { ...toAnthropicParams(request, cachePolicy), stream: true },
          { signal: scope.signal },
        );
        for await (const event of stream) {
          callbacks.onStreamEvent?.();
          accumulator.add(event);
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
    if (!accumulator.complete)
      throw new Anthropic.APIConnectionError({ message: 'Anthropic stream ended before message_stop.' });
    return {
      content: accumulator.content(),
      stopReason: accumulator.stopReason,
      usage: accumulator.usage,
      model: accumulator.model ?? request.model,
      provider: config.name,
      ...(accumulator.responseId ? { responseId: accumulator.responseId } : {}),
      ...(server ? { server } : {}),
    };
  }

  return { name: config.name, kind: config.kind, chat };
}
