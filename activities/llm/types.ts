/**
 * Provider-neutral conversation and chat types.
 *
 * The conversation is stored in PostgreSQL in this shape and converted to each provider's wire
 * format by an adapter (`anthropic.ts`, `openai.ts`). Tool results travel as `tool_result` blocks
 * inside a `user` message (Anthropic's model); the OpenAI adapter turns them into `tool` messages.
 */

export type TextBlock = { type: 'text'; text: string };

export type ToolUseBlock = {
  type: 'tool_use';
  /** Provider-assigned tool-call id; also the key of the tool-call ledger row. */
  id: string;
  name: string;
  /** Parsed arguments. `undefined` when the model sent text that is not JSON (see `inputParseError`). */
  input: unknown;
  /** Set when the model's argument text could not be parsed; the call becomes an error result. */
  inputParseError?: string;
};

/** The image formats both providers accept; a tool's image is sniffed to be one of these before it is kept. */
export type ImageMediaType = 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp';

/** An image a tool returned (base64, checked and bounded by `activities/tools/tool-images.ts`). */
export type ToolResultImage = { mediaType: ImageMediaType; data: string };

export type ToolResultBlock = {
  type: 'tool_result';
  toolUseId: string;
  /** The result as text; it also describes each image, for a model that is not sent them. */
  content: string;
  isError?: boolean;
  /** Images to show the model beside the text (stored with the message, never in workflow history). */
  images?: ToolResultImage[];
};

export type ContentBlock = TextBlock | ToolUseBlock | ToolResultBlock;

/**
 * What a message is, beyond its role. `injection` marks harness text ([SYSTEM REMINDER],
 * [REFLECTION CHECKPOINT], human comments, continuation prompts): sanitisation never merges it into
 * a neighbouring user message. `task_prompt` is the first user message of a task session and is
 * protected from compression.
 */
export type MessageKind = 'normal' | 'task_prompt' | 'injection' | 'summary';

export interface ChatMessage {
  role: 'user' | 'assistant';
  content: ContentBlock[];
  kind?: MessageKind;
}

/** One part of the system prompt; `cacheBreakpoint` ends a cacheable prefix (Anthropic `cache_control`). */
export interface SystemSegment {
  text: string;
  cacheBreakpoint: boolean;
}

export interface ToolDefinition {
  name: string;
  description: string;
  /** JSON Schema of the arguments (from zod's `z.toJSONSchema`). */
  inputSchema: Record<string, unknown>;
}

export interface ChatRequest {
  model: string;
  system: SystemSegment[];
  messages: ChatMessage[];
  /**
   * Index into `messages` of the last message before the current turn; the Anthropic adapter puts
   * a `cache_control` breakpoint on its last block. Omitted: no message breakpoint.
   */
  messageCacheBreakpoint?: number;
  tools: ToolDefinition[];
  maxTokens: number;
  temperature?: number;
}

export type StopReason = 'end_turn' | 'tool_use' | 'max_tokens' | 'stop_sequence' | 'refusal' | 'other';

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** Anthropic: the part of `cacheWriteTokens` written with the 1-hour lifetime (priced higher). */
  cacheWrite1hTokens?: number;
}

export interface ChatResult {
  /** Only `text` and `tool_use` blocks. */
  content: Array<TextBlock | ToolUseBlock>;
  stopReason: StopReason;
  usage: Usage;
  /** The model that actually answered (after fallback). */
  model: string;
  provider: string;
  /** The provider's id for this response (Anthropic `msg_…`, OpenAI `chatcmpl-…`), for tracing. */
  responseId?: string;
  /** The host (and port) the request went to, for tracing (`server.address`, `server.port`). */
  server?: { address: string; port?: number };
}

export interface ChatCallbacks {
  /** Aborts the HTTP request / stream; wired to the activity's cancellation signal. */
  signal?: AbortSignal;
  /** Each streamed text fragment, for live progress. */
  onTextDelta?: (text: string) => void;
  /** Called on every stream event; the activity uses it as a liveness signal. */
  onStreamEvent?: () => void;
  /**
   * Called before each request the router sends for one call (`index` 0 first, then each fallback),
   * so a stream consumer can supersede the text a failed candidate already produced.
   */
  onAttemptStart?: (attempt: { index: number; provider: string; model: string }) => void;
}

/** One adapter per wire protocol. Adapters never retry: Temporal's retry policy owns retries. */
export interface LlmProvider {
  /** Configured name, e.g. `anthropic`, `openai`, `ollama`. */
  readonly name: string;
  readonly kind: ProviderKind;
  chat(request: ChatRequest, callbacks?: ChatCallbacks): Promise<ChatResult>;
}

export type ProviderKind = 'anthropic' | 'openai' | 'openai-compatible' | 'demo';

export interface ProviderConfig {
  name: string;
  kind: ProviderKind;
  apiKey?: string;
  /** Base URL override: a local fake server in tests, Ollama/vLLM/OpenRouter for compatible servers. */
  baseURL?: string;
  /** Per-request timeout in ms (the stream's hard cap); default set by the adapter. */
  timeoutMs?: number;
  /** A stream silent this long (ms) is cut and retried; default `LLM_STREAM_IDLE_TIMEOUT_MS`, else 2 minutes; 0: never. */
  streamIdleTimeoutMs?: number;
  /** Anthropic: the lifetimes of its prompt-cache breakpoints (`PROMPT_CACHE_POLICIES`); default `prefix-1h`. */
  promptCache?: PromptCachePolicy;
}

/**
 * How long Anthropic keeps the cached prompt, by part: `all-5m` (every breakpoint at the default 5
 * minutes), `prefix-1h` (the stable prefix, tools and system prompt, for 1 hour; the conversation for
 * 5 minutes), `all-1h` (every breakpoint for 1 hour). docs/approvals.md has the measured costs.
 */
export const PROMPT_CACHE_POLICIES = ['all-5m', 'prefix-1h', 'all-1h'] as const;
export type PromptCachePolicy = (typeof PROMPT_CACHE_POLICIES)[number];

export const ZERO_USAGE: Usage = Object.freeze({
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
});

export interface ChatTarget {
  provider?: string;
  model?: string;
  tier?: 'cheap' | 'standard' | 'premium';
}

/** The part of the LLM router the step needs. */
export interface ChatRouter {
  /** The route's candidates in order; the first is the model the prompt is budgeted for. */
  candidates(target: ChatTarget): Array<{ provider: string; model: string }>;
  chat(
    request: Omit<ChatRequest, 'model' | 'maxTokens'> & { maxTokens?: number },
    target: ChatTarget,
    callbacks?: ChatCallbacks,
  ): Promise<ChatResult>;
}
