/**
 * Renders scripted responses in the OpenAI Chat Completions format (`POST /v1/chat/completions`):
 * a `chat.completion` object, or `data: {chat.completion.chunk}` lines ending with a chunk carrying
 * `finish_reason`, a usage chunk when `stream_options.include_usage` is set, and `data: [DONE]`.
 */
import type { ScriptedErrorStatus, ScriptedMessage } from './types';
import {
  ARGUMENT_DELTA_CHARS,
  TEXT_DELTA_CHARS,
  argumentText,
  fullUsage,
  splitIntoChunks,
  sseFrame,
  type RenderContext,
} from './rendering';

const ERRORS: Record<ScriptedErrorStatus, { type: string; code: string | null }> = {
  400: { type: 'invalid_request_error', code: null },
  401: { type: 'invalid_request_error', code: 'invalid_api_key' },
  403: { type: 'invalid_request_error', code: 'unsupported_country_region_territory' },
  404: { type: 'invalid_request_error', code: 'model_not_found' },
  408: { type: 'server_error', code: 'timeout' },
  409: { type: 'invalid_request_error', code: 'conflict' },
  422: { type: 'invalid_request_error', code: null },
  429: { type: 'requests', code: 'rate_limit_exceeded' },
  500: { type: 'server_error', code: null },
  503: { type: 'server_error', code: 'overloaded' },
  529: { type: 'server_error', code: 'overloaded' },
};

const FINISH_REASONS: Record<ScriptedMessage['stopReason'], string> = {
  end_turn: 'stop',
  tool_use: 'tool_calls',
  max_tokens: 'length',
};

export function openAiErrorBody(status: ScriptedErrorStatus, message: string) {
  return { error: { message, ...ERRORS[status], param: null } };
}

export function openAiRequestIdHeader(id: string): Record<string, string> {
  return { 'x-request-id': id };
}

function usageJson(message: ScriptedMessage | undefined) {
  const usage = fullUsage(message?.usage);
  // OpenAI's prompt_tokens includes the cached part; cached_tokens says how much of it was cached.
  const promptTokens = usage.inputTokens + usage.cacheReadTokens;
  return {
    prompt_tokens: promptTokens,
    completion_tokens: usage.outputTokens,
    total_tokens: promptTokens + usage.outputTokens,
    prompt_tokens_details: { cached_tokens: usage.cacheReadTokens },
  };
}

function toolCalls(message: ScriptedMessage, ctx: RenderContext) {
  return message.content.flatMap((block) =>
    block.type === 'tool_use'
      ? [
          {
            id: block.id ?? ctx.nextId('call_fake'),
            type: 'function',
            function: { name: block.name, arguments: argumentText(block) },
          },
        ]
      : [],
  );
}

function assistantText(message: ScriptedMessage): string {
  return message.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
}

export function openAiCompletionJson(message: ScriptedMessage, ctx: RenderContext) {
  const calls = toolCalls(message, ctx);
  const text = assistantText(message);
  return {
    id: ctx.nextId('chatcmpl_fake'),
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: ctx.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: text === '' && calls.length > 0 ? null : text,
          refusal: null,
          ...(calls.length > 0 ? { tool_calls: calls } : {}),
        },
        finish_reason: FINISH_REASONS[message.stopReason],
        logprobs: null,
      },
    ],
    usage: usageJson(message),
  };
}

/** Builds chunk frames sharing one id; `includeUsage` adds `usage: null` to each, as OpenAI does. */
function chunkWriter(ctx: RenderContext, includeUsage: boolean) {
  const id = ctx.nextId('chatcmpl_fake');
  const created = Math.floor(Date.now() / 1000);
  return (choices: unknown[], usage: unknown = null) =>
    sseFrame({
      id,
      object: 'chat.completion.chunk',
      created,
      model: ctx.model,
      choices,
      ...(includeUsage ? { usage } : {}),
    });
}

const delta = (body: Record<string, unknown>, finishReason: string | null = null) => [
  { index: 0, delta: body, finish_reason: finishReason, logprobs: null },
];

/** The first chunk only (role announcement): what a hanging stream sends before going silent. */
export function openAiOpeningFrames(ctx: RenderContext, includeUsage: boolean): string[] {
  return [chunkWriter(ctx, includeUsage)(delta({ role: 'assistant', content: '' }))];
}

export function openAiStreamFrames(message: ScriptedMessage, ctx: RenderContext, includeUsage: boolean): string[] {
  const chunk = chunkWriter(ctx, includeUsage);
  const frames = [chunk(delta({ role: 'assistant', content: '' }))];
  for (const content of splitIntoChunks(assistantText(message), TEXT_DELTA_CHARS))
    frames.push(chunk(delta({ content })));
  toolCalls(message, ctx).forEach((call, n) => {
    const mode = message.toolCallIndexes ?? 'numbered';
    const index = mode === 'omitted' ? {} : { index: mode === 'all-zero' ? 0 : n };
    const id = message.omitToolCallIds ? {} : { id: call.id };
    frames.push(
      chunk(
        delta({
          tool_calls: [{ ...index, ...id, type: 'function', function: { name: call.function.name, arguments: '' } }],
        }),
      ),
    );
    for (const piece of splitIntoChunks(call.function.arguments, ARGUMENT_DELTA_CHARS)) {
      frames.push(chunk(delta({ tool_calls: [{ ...index, function: { arguments: piece } }] })));
    }
  });
  frames.push(chunk(delta({}, FINISH_REASONS[message.stopReason])));
  if (includeUsage) frames.push(chunk([], usageJson(message)));
  frames.push(sseFrame('[DONE]'));
  return frames;
}
