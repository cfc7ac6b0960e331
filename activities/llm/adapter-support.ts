/**
 * Helpers shared by the provider adapters (`anthropic.ts`, `openai.ts`): safe parsing of the
 * model's tool-argument text, and one abort signal that covers the caller's cancellation, a
 * whole-stream deadline and a stream that has gone silent.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { ToolUseBlock } from './types';
import { wholeNumberFromEnv } from '../env-values';

/**
 * Default whole-stream cap. The SDKs' own `timeout` only covers the wait for response headers, so a
 * stalled stream would otherwise hang until the activity's heartbeat timeout; 10 minutes matches
 * the SDKs' default and is longer than any single completion we request takes.
 */
export const DEFAULT_STREAM_TIMEOUT_MS = 10 * 60_000;

/**
 * How long a stream may send nothing at all (not one byte) before it is cut and retried as a
 * timeout. Live streams are never that quiet: Anthropic sends `ping` events while it prepares or
 * thinks (its SDK hides them; they are counted here because silence is measured on the bytes), and
 * text, thinking and tool deltas follow each other within seconds. The longest healthy silence
 * reported is OpenAI's Chat Completions while a reasoning model thinks, which sends nothing until
 * its answer begins: 32 s (gpt-5, 2389-research/tracker#577) and 79 s (litellm#36992) measured. Two
 * minutes is above both; without it a stalled stream waited for the HTTP client's 300-second body
 * timeout. Raise it (`LLM_STREAM_IDLE_TIMEOUT_MS`) for reasoning models at high effort over Chat
 * Completions; 0 turns the cut off.
 */
export const DEFAULT_STREAM_IDLE_TIMEOUT_MS = 120_000;

/** `LLM_STREAM_IDLE_TIMEOUT_MS`: absent keeps the default; anything but a whole number of ms is refused. */
export function streamIdleTimeoutFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  return (
    wholeNumberFromEnv('LLM_STREAM_IDLE_TIMEOUT_MS', env, { unit: 'milliseconds; 0 turns the cut off' }) ??
    DEFAULT_STREAM_IDLE_TIMEOUT_MS
  );
}

/** The host and port an SDK sends to (its resolved base URL), named as tracing wants it. */
export function serverOf(baseURL: string): { address: string; port?: number } | undefined {
  try {
    const url = new URL(baseURL);
    return { address: url.hostname, ...(url.port ? { port: Number(url.port) } : {}) };
  } catch {
    return undefined;
  }
}

/** How much malformed argument text an error quotes: enough to see the mistake, small enough for a prompt. */
const ARGUMENT_PREVIEW_CHARS = 200;

/**
 * Parses the argument text the model streamed for a tool call. Never throws: text that is not a
 * JSON object yields `input: undefined` and an `inputParseError` the tool loop reports to the model.
 * Empty text is `{}` (Anthropic streams nothing for a tool without parameters).
 */
export function parseToolArguments(toolName: string, text: string): Pick<ToolUseBlock, 'input' | 'inputParseError'> {
  if (text.trim() === '') return { input: {} };
  const preview = text.length > ARGUMENT_PREVIEW_CHARS ? `${text.slice(0, ARGUMENT_PREVIEW_CHARS)}…` : text;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return {
      input: undefined,
      inputParseError: `The arguments for tool "${toolName}" are not valid JSON (${reason}). Received: ${preview}`,
    };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return {
      input: undefined,
      inputParseError: `The arguments for tool "${toolName}" must be a JSON object. Received: ${preview}`,
    };
  }
  return { input: parsed };
}

/** The signal handed to an SDK call: aborted by the caller's signal, the stream deadline or a silent stream. */
export interface StreamScope {
  readonly signal: AbortSignal;
  /** True when the deadline, not the caller, stopped the stream. */
  readonly timedOut: boolean;
  /** True when the stream sent nothing for the idle timeout and was cut. */
  readonly idle: boolean;
  /** True when the caller's signal fired. */
  readonly callerAborted: boolean;
  /** The server sent something: the idle clock starts again. */
  touch(): void;
  dispose(): void;
}

/**
 * `idleTimeoutMs` (0: none) counts from the request: a provider that sends neither headers nor a
 * byte of body for that long is cut as one that stops mid-stream is. Call the SDK inside
 * `withStreamScope`, with a client built on `scopedFetch`, so every byte received touches the scope.
 */
export function openStreamScope(
  callerSignal: AbortSignal | undefined,
  timeoutMs: number,
  idleTimeoutMs = 0,
): StreamScope {
  const controller = new AbortController();
  let timedOut = false;
  let idle = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, timeoutMs);
  // One timer for the whole stream: it checks, when it fires, how long ago the last byte came.
  let lastHeard = Date.now();
  let idleTimer: ReturnType<typeof setTimeout> | undefined;
  const watchSilence = (delayMs: number): void => {
    idleTimer = setTimeout(() => {
      const silentMs = Date.now() - lastHeard;
      if (silentMs < idleTimeoutMs) return watchSilence(idleTimeoutMs - silentMs);
      idle = true;
      controller.abort();
    }, delayMs);
  };
  if (idleTimeoutMs > 0) watchSilence(idleTimeoutMs);
  const onCallerAbort = () => controller.abort(callerSignal?.reason);
  if (callerSignal?.aborted) onCallerAbort();
  else callerSignal?.addEventListener('abort', onCallerAbort, { once: true });
  return {
    signal: controller.signal,
    get timedOut() {
      return timedOut;
    },
    get idle() {
      return idle;
    },
    get callerAborted() {
      return callerSignal?.aborted === true;
    },
    touch() {
      lastHeard = Date.now();
    },
    dispose() {
      clearTimeout(timer);
      clearTimeout(idleTimer);
      callerSignal?.removeEventListener('abort', onCallerAbort);
    },
  };
}

const activeScope = new AsyncLocalStorage<StreamScope>();

/** Runs an SDK call with `scope` as the one `scopedFetch` reports received bytes to. */
export function withStreamScope<T>(scope: StreamScope, call: () => Promise<T>): Promise<T> {
  return activeScope.run(scope, call);
}

/**
 * The `fetch` an adapter's SDK client uses: the response's headers and every chunk of its body
 * touch the scope of the call that asked (`withStreamScope`), keep-alives the SDK drops included.
 */
export function scopedFetch(base?: typeof fetch): typeof fetch {
  return async (input, init) => {
    const scope = activeScope.getStore();
    const response = await (base ?? globalThis.fetch)(input, init);
    if (!scope || !response.body) return response;
    scope.touch();
    const body = response.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          scope.touch();
          controller.enqueue(chunk);
        },
      }),
    );
    const watched = new Response(body, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
    Object.defineProperty(watched, 'url', { value: response.url });
    return watched;
  };
}
