/**
 * Helpers shared by the provider adapters (`anthropic.ts`, `openai.ts`): safe parsing of the
 * model's tool-argument text, and one abort signal that covers both the caller's cancellation and
 * a whole-stream deadline.
 */
import type { ToolUseBlock } from './types';

/**
 * Default whole-stream cap. The SDKs' own `timeout` only covers the wait for response headers, so a
 * stalled stream would otherwise hang until the activity's heartbeat timeout; 10 minutes matches
 * the SDKs' default and is longer than any single completion we request takes.
 */
export const DEFAULT_STREAM_TIMEOUT_MS = 10 * 60_000;

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

/** The signal handed to an SDK call: aborted by the caller's signal or by the stream deadline. */
export interface StreamScope {
  readonly signal: AbortSignal;
  /** True when the deadline, not the caller, stopped the stream. */
  readonly timedOut: boolean;
  /** True when the caller's signal fired. */
  readonly callerAborted: boolean;
  dispose(): void;
}

export function openStreamScope(callerSignal: AbortSignal | undefined, timeoutMs: number): StreamScope {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, timeoutMs);
  const onCallerAbort = () => controller.abort(callerSignal?.reason);
  if (callerSignal?.aborted) onCallerAbort();
  else callerSignal?.addEventListener('abort', onCallerAbort, { once: true });
  return {
    signal: controller.signal,
    get timedOut() {
      return timedOut;
    },
    get callerAborted() {
      return callerSignal?.aborted === true;
    },
    dispose() {
      clearTimeout(timer);
      callerSignal?.removeEventListener('abort', onCallerAbort);
    },
  };
}
