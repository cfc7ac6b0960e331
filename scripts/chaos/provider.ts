/**
 * The chaos run's model: the fake provider (the real Anthropic protocol over HTTP) answering from the
 * conversation alone, so that a retried or replayed call gets the same answer, with fault windows during
 * which it answers 429, 529, drops the connection or stalls.
 */
import { streamIdleTimeoutFromEnv } from '../../activities/llm/adapter-support';
import type { RecordedRequest, ScriptedResponse } from '../../test/fake-llm';

export type ProviderFault = 'rate-limited' | 'overloaded' | 'reset' | 'stall';

/** With the idle cut off (`LLM_STREAM_IDLE_TIMEOUT_MS=0`), a stalled stream ends at the HTTP client's body timeout. */
const UNDICI_BODY_TIMEOUT_MS = 300_000;
/**
 * How long a stalled provider stream stays open: the LLM adapters cut one silent for
 * LLM_STREAM_IDLE_TIMEOUT_MS (default 2 minutes) and retry it. With that cut turned off (0), only Node's
 * fetch ends it, at undici's body timeout: then one chat of a 30-minute run took 17 minutes over three stalls.
 */
export const providerStallCutMs = (): number => streamIdleTimeoutFromEnv() || UNDICI_BODY_TIMEOUT_MS;

const USAGE = { inputTokens: 400, outputTokens: 40 };
/** Streamed slowly enough that kills and restarts land mid-stream as well as between calls. */
const CHUNK_DELAY_MS = 20;

export interface ChaosModel {
  respond(request: RecordedRequest): ScriptedResponse;
  /** From now until `untilMs`, every request gets `fault`. */
  fail(fault: ProviderFault, untilMs: number): void;
  faultsServed: Record<ProviderFault, number>;
  /** The requests answered with a stall: each records when its client cut it (`abortedAt`). */
  stalled: RecordedRequest[];
}

/** The task file every chaos task writes, relative to its agent's workspace. */
export const taskFile = (taskId: string): string => `chaos/${taskId}.txt`;
export const taskFileContent = (taskId: string): string => `written once by task ${taskId}\n`;
export const commitSubject = (taskId: string): string => `chaos ${taskId}`;
/** The chat answer each chat message gets, long enough to stream in many deltas. */
export const chatAnswer = (n: string): string =>
  `Answer ${n}: ${'the durable loop keeps every word. '.repeat(12).trim()}`;

export function chaosModel(): ChaosModel {
  let fault: { kind: ProviderFault; until: number } | undefined;
  const faultsServed: Record<ProviderFault, number> = { 'rate-limited': 0, overloaded: 0, reset: 0, stall: 0 };
  const stalled: RecordedRequest[] = [];
  return {
    faultsServed,
    stalled,
    fail(kind, untilMs) {
      fault = { kind, until: untilMs };
    },
    respond(request) {
      if (fault && Date.now() < fault.until) {
        faultsServed[fault.kind]++;
        if (fault.kind === 'rate-limited') return { kind: 'error', status: 429, headers: { 'retry-after': '1' } };
        if (fault.kind === 'overloaded') return { kind: 'error', status: 529 };
        if (fault.kind === 'reset') return { kind: 'reset' };
        stalled.push(request);
        return { kind: 'hang' }; // opens the stream and sends nothing more: the adapter's idle cut must end it
      }
      return answer(request);
    },
  };
}

function answer(request: RecordedRequest): ScriptedResponse {
  const body = JSON.stringify(request.body);
  const taskId = /Task ID: ([0-9a-f-]{36})/.exec(body)?.[1];
  const message = (
    content: Extract<ScriptedResponse, { kind: 'message' }>['content'],
    stopReason: 'tool_use' | 'end_turn',
  ): ScriptedResponse => ({
    kind: 'message',
    content,
    stopReason,
    usage: USAGE,
    chunkDelayMs: CHUNK_DELAY_MS,
  });
  if (!taskId) {
    // A chat message, a heartbeat, a reflection: plain text, derived from the last chat number when there is one.
    const chat = /chaos chat ([0-9]+)/.exec(body)?.[1];
    return message([{ type: 'text', text: chat ? chatAnswer(chat) : 'HEARTBEAT_OK' }], 'end_turn');
  }
  // A call the runtime reports as never started is asked for again, as a model would.
  const notRun = (body.match(/Tool call [a-z_]+ was not run:/g) ?? []).length;
  const done = (body.match(/"tool_result"/g) ?? []).length - notRun;
  if (done === 0) {
    return message(
      [
        { type: 'text', text: 'writing the file' },
        { type: 'tool_use', name: 'file_write', input: { path: taskFile(taskId), content: taskFileContent(taskId) } },
      ],
      'tool_use',
    );
  }
  if (done === 1) {
    const command = `git init -q . && git add ${taskFile(taskId)} && git commit -q -m '${commitSubject(taskId)}' -- ${taskFile(taskId)}`;
    return message(
      [
        { type: 'text', text: 'committing it' },
        { type: 'tool_use', name: 'shell_execute', input: { command } },
      ],
      'tool_use',
    );
  }
  return message(
    [{ type: 'tool_use', name: 'task_submit_review', input: { summary: 'file written and committed' } }],
    'tool_use',
  );
}
