/**
 * Renders scripted responses in the Anthropic Messages API format (`POST /v1/messages`): a JSON
 * message, or the server-sent event sequence message_start → ping → (content_block_start →
 * content_block_delta* → content_block_stop)* → message_delta → message_stop.
 */
import type { ScriptedErrorStatus, ScriptedMessage, ScriptedUsage } from './types';
import {
  ARGUMENT_DELTA_CHARS,
  TEXT_DELTA_CHARS,
  argumentText,
  fullUsage,
  splitIntoChunks,
  sseFrame,
  type RenderContext,
} from './rendering';

const ERROR_TYPES: Record<ScriptedErrorStatus, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  408: 'timeout_error',
  409: 'conflict_error',
  422: 'invalid_request_error',
  429: 'rate_limit_error',
  500: 'api_error',
  503: 'api_error',
  529: 'overloaded_error',
};

export function anthropicErrorBody(status: ScriptedErrorStatus, message: string) {
  return { type: 'error', error: { type: ERROR_TYPES[status], message } };
}

export function anthropicRequestIdHeader(id: string): Record<string, string> {
  return { 'request-id': id };
}

function toolInput(rawArguments: string | undefined, input: unknown): unknown {
  if (rawArguments === undefined) return input ?? {};
  try {
    return JSON.parse(rawArguments);
  } catch {
    return rawArguments;
  }
}

/** The split of cache writes by lifetime, as the API reports it beside the total. */
function cacheCreation(usage: Required<ScriptedUsage>) {
  const oneHour = Math.min(usage.cacheWrite1hTokens, usage.cacheWriteTokens);
  return { ephemeral_5m_input_tokens: usage.cacheWriteTokens - oneHour, ephemeral_1h_input_tokens: oneHour };
}

function messageShell(id: string, ctx: RenderContext) {
  return { id, type: 'message', role: 'assistant', model: ctx.model, stop_sequence: null };
}

export function anthropicMessageJson(message: ScriptedMessage, ctx: RenderContext) {
  const usage = fullUsage(message.usage);
  return {
    ...messageShell(ctx.nextId('msg_fake'), ctx),
    content: message.content.map((block) =>
      block.type === 'text'
        ? { type: 'text', text: block.text }
        : {
            type: 'tool_use',
            id: block.id ?? ctx.nextId('toolu_fake'),
            name: block.name,
            input: toolInput(block.rawArguments, block.input),
          },
    ),
    stop_reason: message.stopReason,
    usage: {
      input_tokens: usage.inputTokens,
      output_tokens: usage.outputTokens,
      cache_creation_input_tokens: usage.cacheWriteTokens,
      cache_read_input_tokens: usage.cacheReadTokens,
      cache_creation: cacheCreation(usage),
    },
  };
}

/** The frames before any content: what a hanging stream sends before going silent. */
export function anthropicOpeningFrames(message: ScriptedMessage | undefined, ctx: RenderContext): string[] {
  const usage = fullUsage(message?.usage);
  const start = {
    type: 'message_start',
    message: {
      ...messageShell(ctx.nextId('msg_fake'), ctx),
      content: [],
      stop_reason: null,
      usage: {
        input_tokens: usage.inputTokens,
        // The real API reports a running output count starting at 1 here; message_delta has the total.
        output_tokens: 1,
        cache_creation_input_tokens: usage.cacheWriteTokens,
        cache_read_input_tokens: usage.cacheReadTokens,
        cache_creation: cacheCreation(usage),
      },
    },
  };
  return [sseFrame(start, 'message_start'), sseFrame({ type: 'ping' }, 'ping')];
}

/** The keep-alive Anthropic sends while a long answer is being prepared (the SDK skips it). */
export function anthropicPingFrame(): string {
  return sseFrame({ type: 'ping' }, 'ping');
}

export function anthropicStreamFrames(message: ScriptedMessage, ctx: RenderContext): string[] {
  const frames = anthropicOpeningFrames(message, ctx);
  message.content.forEach((block, index) => {
    const event = (type: string, body: Record<string, unknown>) =>
      frames.push(sseFrame({ type, index, ...body }, type));
    if (block.type === 'text') {
      event('content_block_start', { content_block: { type: 'text', text: '' } });
      for (const text of splitIntoChunks(block.text, TEXT_DELTA_CHARS)) {
        event('content_block_delta', { delta: { type: 'text_delta', text } });
      }
    } else {
      const id = block.id ?? ctx.nextId('toolu_fake');
      event('content_block_start', { content_block: { type: 'tool_use', id, name: block.name, input: {} } });
      // The real API opens every tool block with an empty partial_json.
      for (const partial_json of ['', ...splitIntoChunks(argumentText(block), ARGUMENT_DELTA_CHARS)]) {
        event('content_block_delta', { delta: { type: 'input_json_delta', partial_json } });
      }
    }
    frames.push(sseFrame({ type: 'content_block_stop', index }, 'content_block_stop'));
  });
  const usage = fullUsage(message.usage);
  frames.push(
    sseFrame(
      {
        type: 'message_delta',
        delta: { stop_reason: message.stopReason, stop_sequence: null },
        usage: { output_tokens: usage.outputTokens },
      },
      'message_delta',
    ),
    sseFrame({ type: 'message_stop' }, 'message_stop'),
  );
  return frames;
}
