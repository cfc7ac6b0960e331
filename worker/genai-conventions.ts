/**
 * OpenTelemetry's GenAI semantic conventions where they go beyond a span's attributes: the client
 * metrics every GenAI instrumentation reports, and the opt-in capture of what was said.
 *
 * - `gen_ai.client.operation.duration` (seconds) and `gen_ai.client.token.usage` (tokens, by
 *   `gen_ai.token.type`), histograms with the buckets the conventions advise. They are served with our
 *   Prometheus metrics under the names OpenTelemetry's Prometheus exporter gives them
 *   (`gen_ai_client_operation_duration_seconds`, `gen_ai_client_token_usage`), labels with `_` for `.`.
 * - Content capture, off by default (prompts and answers hold users' data): with
 *   `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`, each `chat` span carries
 *   `gen_ai.system_instructions`, `gen_ai.input.messages` and `gen_ai.output.messages` as JSON in the
 *   conventions' message shape (roles, and text, tool-call and tool-call-response parts).
 */
import { Histogram, type Registry } from 'prom-client';
import type { ChatRequest, ChatResult, ContentBlock, TextBlock, ToolUseBlock } from '../activities/llm/types';
import { switchFromEnv } from '../activities/env-values';

/** The conventions' advised boundaries for `gen_ai.client.operation.duration`, in seconds. */
export const GENAI_DURATION_BUCKETS = [
  0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];
/** The conventions' advised boundaries for `gen_ai.client.token.usage`, in tokens (powers of 4). */
export const GENAI_TOKEN_BUCKETS = [
  1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
];

/** The variable the OpenTelemetry GenAI instrumentations read to capture message content. */
export const CAPTURE_CONTENT_VARIABLE = 'OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT';

type Labels =
  | 'gen_ai_operation_name'
  | 'gen_ai_provider_name'
  | 'gen_ai_request_model'
  | 'gen_ai_response_model'
  | 'server_address'
  | 'error_type';

export interface GenAiCall {
  provider: string;
  requestModel: string;
  /** Absent when the call failed. */
  responseModel?: string;
  serverAddress?: string;
  /** Set when the call failed: the error's type. */
  errorType?: string;
  seconds: number;
  /** Input tokens as the conventions count them (cached ones included), and output tokens. */
  tokens?: { input: number; output: number };
}

export class GenAiClientMetrics {
  private readonly duration: Histogram<Labels>;
  private readonly tokens: Histogram<Labels | 'gen_ai_token_type'>;

  constructor(registry: Registry) {
    const labelNames: Labels[] = [
      'gen_ai_operation_name',
      'gen_ai_provider_name',
      'gen_ai_request_model',
      'gen_ai_response_model',
      'server_address',
      'error_type',
    ];
    this.duration = new Histogram({
      name: 'gen_ai_client_operation_duration_seconds',
      help: 'GenAI operation duration (OpenTelemetry gen_ai.client.operation.duration)',
      labelNames,
      buckets: GENAI_DURATION_BUCKETS,
      registers: [registry],
    });
    this.tokens = new Histogram({
      name: 'gen_ai_client_token_usage',
      help: 'Tokens used per GenAI operation, by gen_ai_token_type (OpenTelemetry gen_ai.client.token.usage)',
      labelNames: [...labelNames, 'gen_ai_token_type'],
      buckets: GENAI_TOKEN_BUCKETS,
      registers: [registry],
    });
  }

  record(call: GenAiCall): void {
    const labels = {
      gen_ai_operation_name: 'chat',
      gen_ai_provider_name: call.provider,
      gen_ai_request_model: call.requestModel,
      gen_ai_response_model: call.responseModel ?? '',
      server_address: call.serverAddress ?? '',
      error_type: call.errorType ?? '',
    };
    this.duration.observe(labels, call.seconds);
    if (!call.tokens) return;
    this.tokens.observe({ ...labels, gen_ai_token_type: 'input' }, call.tokens.input);
    this.tokens.observe({ ...labels, gen_ai_token_type: 'output' }, call.tokens.output);
  }
}

/**
 * True when the environment opts in to capturing prompts and answers on spans: `true`, as the
 * conventions spell it. Another word (`1`, `yes`) is refused rather than read as off.
 */
export function captureContentFromEnv(env: NodeJS.ProcessEnv = process.env): boolean {
  return switchFromEnv(CAPTURE_CONTENT_VARIABLE, ['true', 'false'], env) ?? false;
}

type Part =
  | { type: 'text'; content: string }
  | { type: 'tool_call'; id: string; name: string; arguments: unknown }
  | { type: 'tool_call_response'; id: string; response: string };

const part = (block: ContentBlock): Part =>
  block.type === 'text'
    ? { type: 'text', content: block.text }
    : block.type === 'tool_use'
      ? { type: 'tool_call', id: block.id, name: block.name, arguments: block.input ?? null }
      : { type: 'tool_call_response', id: block.toolUseId, response: block.content };

/** `gen_ai.system_instructions`, `gen_ai.input.messages`: what the call sent. */
export function inputContentAttributes(request: Pick<ChatRequest, 'system' | 'messages'>): Record<string, string> {
  return {
    'gen_ai.system_instructions': JSON.stringify(request.system.map((s) => ({ type: 'text', content: s.text }))),
    'gen_ai.input.messages': JSON.stringify(
      // A message of tool results only is the tool's turn, as the conventions' role `tool` says.
      request.messages.map((m) => ({
        role: m.role === 'user' && m.content.every((b) => b.type === 'tool_result') ? 'tool' : m.role,
        parts: m.content.map(part),
      })),
    ),
  };
}

/** The conventions' finish reasons for our stop reasons. */
const FINISH_REASON: Record<ChatResult['stopReason'], string> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  tool_use: 'tool_call',
  max_tokens: 'length',
  refusal: 'content_filter',
  other: 'stop',
};

/** `gen_ai.output.messages`: what the model answered, with its finish reason. */
export function outputContentAttributes(result: Pick<ChatResult, 'content' | 'stopReason'>): Record<string, string> {
  return {
    'gen_ai.output.messages': JSON.stringify([
      {
        role: 'assistant',
        parts: result.content.map((b: TextBlock | ToolUseBlock) => part(b)),
        finish_reason: FINISH_REASON[result.stopReason],
      },
    ]),
  };
}
