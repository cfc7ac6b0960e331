/**
 * The fake LLM server's script and record types. Scripted responses are provider-neutral: the same
 * `ScriptedResponse` is rendered as an Anthropic Messages reply or an OpenAI Chat Completions reply,
 * depending on which endpoint the request hit.
 */

import type { FakePromptCache, PromptCacheOptions, PromptCacheUsage } from './prompt-cache';

export type FakeProtocol = 'anthropic' | 'openai';

export type ScriptedTextBlock = { type: 'text'; text: string };

export type ScriptedToolUseBlock = {
  type: 'tool_use';
  /** Defaults to a generated id (`toolu_fake_N` / `call_fake_N`). */
  id?: string;
  name: string;
  /** Arguments as a value; serialised with `JSON.stringify`. Ignored when `rawArguments` is set. */
  input?: unknown;
  /**
   * Arguments as raw JSON text, sent verbatim (may be malformed, to test safe parsing). A non-streaming
   * Anthropic reply cannot carry malformed JSON, so there it becomes `input` as a plain string.
   */
  rawArguments?: string;
};

export type ScriptedUsage = {
  /** Uncached input tokens (OpenAI's `prompt_tokens` is rendered as this plus `cacheReadTokens`). */
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens?: number;
  /** Anthropic only: OpenAI has no cache-write count. */
  cacheWriteTokens?: number;
  /** Anthropic only: the part of `cacheWriteTokens` written with the 1-hour lifetime (`usage.cache_creation`). */
  cacheWrite1hTokens?: number;
};

export type ScriptedMessage = {
  kind: 'message';
  content: Array<ScriptedTextBlock | ScriptedToolUseBlock>;
  stopReason: 'end_turn' | 'tool_use' | 'max_tokens';
  usage?: ScriptedUsage;
  /** Delay between stream events, to make a stream last long enough to observe or cancel. */
  chunkDelayMs?: number;
  /**
   * OpenAI protocol: how streamed tool calls carry `index`. OpenAI numbers them; some compatible
   * servers send 0 for every call (Ollama) or leave it out, and some send no call ids.
   */
  toolCallIndexes?: 'numbered' | 'all-zero' | 'omitted';
  omitToolCallIds?: boolean;
  /** Streaming: send this many events, then nothing more until the client disconnects (a stalled provider). */
  stallAfterEvents?: number;
  /**
   * Streaming: after `afterEvents` events, fall silent for `ms` before the rest, sending only the
   * provider's keep-alive every `keepAliveEveryMs` if set (Anthropic's `ping` event; an SSE comment for
   * OpenAI, as compatible servers send): a long think, not a stall.
   */
  pause?: { afterEvents: number; ms: number; keepAliveEveryMs?: number };
};

export type ScriptedErrorStatus = 400 | 401 | 403 | 404 | 408 | 409 | 422 | 429 | 500 | 503 | 529;

export type ScriptedError = {
  kind: 'error';
  status: ScriptedErrorStatus;
  message?: string;
  /** Extra response headers, e.g. `{ 'retry-after': '7' }`. */
  headers?: Record<string, string>;
};

/**
 * Streaming: sends the opening events, then nothing, until the client disconnects.
 * Non-streaming: never answers. Either way the disconnect is recorded on the request.
 */
export type ScriptedHang = { kind: 'hang' };

/** The connection is dropped before any byte of the reply (a reset by a proxy or a crashed server). */
export type ScriptedReset = { kind: 'reset' };

export type ScriptedResponse = ScriptedMessage | ScriptedError | ScriptedHang | ScriptedReset;

export interface RecordedRequest {
  protocol: FakeProtocol;
  path: string;
  /** Lower-cased header names, as Node delivers them. */
  headers: Record<string, string | string[] | undefined>;
  /** The parsed JSON body. */
  body: Record<string, unknown>;
  /** `Date.now()` when the body had been read. */
  receivedAt: number;
  /** True once the client closed the connection before the reply was complete. */
  aborted: boolean;
  /** `Date.now()` when the disconnect was seen. */
  abortedAt?: number;
  /** With `simulatePromptCache`: what the simulated cache charged this (Anthropic) request. */
  promptCache?: PromptCacheUsage;
}

/** Produces the reply when the scripted queue is empty, e.g. "tool_use 300 times, then end_turn". */
export type FakeResponder = (request: RecordedRequest) => ScriptedResponse;

export interface FakeLlmServerOptions {
  /** Responses queued before the first request (same as calling `enqueue` right after start). */
  script?: ScriptedResponse[];
  responder?: FakeResponder;
}

export interface FakeLlmServer {
  /** `http://127.0.0.1:<port>`: Anthropic's `baseURL`; OpenAI's is `url + '/v1'`. */
  readonly url: string;
  /** Every request received, in arrival order. */
  readonly requests: RecordedRequest[];
  /** How many requests the client abandoned mid-reply. */
  readonly abortedRequests: number;
  /** Appends responses, consumed one per request in arrival order (whatever the protocol). */
  enqueue(...responses: ScriptedResponse[]): void;
  /** Fallback used when the queue is empty; `undefined` removes it. */
  setResponder(responder: FakeResponder | undefined): void;
  /** Resolves once at least `count` requests have been abandoned by their client; rejects after `timeoutMs`. */
  waitForAbortedRequests(count: number, timeoutMs?: number): Promise<void>;
  /**
   * From now on, Anthropic replies report the usage of a simulated prompt cache with lifetimes
   * (`prompt-cache.ts`) instead of the scripted cache and input counts; output tokens stay scripted.
   * Returns the cache, whose clock a test advances across a long wait. A new call starts a cold cache.
   */
  simulatePromptCache(options?: PromptCacheOptions): FakePromptCache;
  /** Clears the queue, the responder, the records and any simulated prompt cache. */
  reset(): void;
  /** Drops open connections (including hanging streams) and stops listening. */
  close(): Promise<void>;
}
