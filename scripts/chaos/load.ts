/**
 * The chaos run's load, driven as a backend service would drive the product: through the HTTP API
 * processes (either one, retrying on the other when one is down), with client-chosen task ids so that a
 * retried start never makes a second task. Tasks write a file and commit it; risky calls wait for an
 * approver that decides after a delay; chat answers are followed over SSE and resumed with Last-Event-ID
 * on another API process when the connection drops.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  applyStreamEvent,
  emptyTranscript,
  transcriptText,
  type StreamEvent,
  type StreamTranscript,
} from '../../client/streams';

/** How long a client keeps retrying one request across API processes before it gives up. */
const REQUEST_DEADLINE_MS = 120_000;
const RETRY_PAUSE_MS = 500;
/**
 * An SSE connection that sends nothing at all (the API sends a keepalive comment every 15 s) for this
 * long is dead or wedged: the follower drops it and resumes elsewhere with Last-Event-ID, as a careful
 * client does, instead of waiting on it until its deadline.
 */
const SSE_SILENCE_MS = 40_000;
/** An approver answers a pending request after this long, as a person would. */
export const APPROVAL_DELAY_MS = 3_000;
const APPROVER_POLL_MS = 1_000;

export class ApiClients {
  private next = 0;
  requestsRetried = 0;
  constructor(
    readonly urls: string[],
    private readonly token: string,
  ) {}

  /** One request, retried on another process while the answer is a connection error or a 5xx. */
  async call<T>(
    method: string,
    url: string,
    body?: unknown,
    accept: number[] = [],
  ): Promise<{ status: number; json: T }> {
    const deadline = Date.now() + REQUEST_DEADLINE_MS;
    for (let attempt = 0; ; attempt++) {
      const base = this.urls[this.next++ % this.urls.length]!;
      try {
        const response = await fetch(`${base}${url}`, {
          method,
          headers: { authorization: `Bearer ${this.token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
          body: body ? JSON.stringify(body) : undefined,
          signal: AbortSignal.timeout(30_000),
        });
        const text = await response.text();
        if (response.status < 500 || accept.includes(response.status))
          return { status: response.status, json: (text ? JSON.parse(text) : undefined) as T };
        if (Date.now() > deadline)
          throw new Error(
            `${method} ${url} answered ${response.status} for ${REQUEST_DEADLINE_MS} ms: ${text.slice(0, 300)}`,
          );
      } catch (error) {
        if (Date.now() > deadline) throw error;
      }
      this.requestsRetried++;
      await sleep(RETRY_PAUSE_MS);
    }
  }

  baseFor(index: number): string {
    return this.urls[index % this.urls.length]!;
  }

  get authorization(): string {
    return `Bearer ${this.token}`;
  }
}

export interface StartedTask {
  taskId: string;
  agentId: string;
}

/** Starts a task on `agentId` with an id chosen here; a retry after a lost answer finds the same task. */
export async function startTask(api: ApiClients, agentId: string, n: number): Promise<StartedTask> {
  const taskId = randomUUID();
  const { status, json } = await api.call<{ error?: { message?: string } }>('POST', '/v1/tasks', {
    taskId,
    agentId,
    title: `Chaos task ${n}`,
    description: 'Write your file, commit it, then submit for review.',
  });
  // 409: an earlier attempt of this same start reached the server before its answer was lost.
  if (status !== 201 && status !== 409)
    throw new Error(`starting chaos task ${n} answered ${status}: ${JSON.stringify(json)}`);
  return { taskId, agentId };
}

/** Decides every pending approval after APPROVAL_DELAY_MS, until `stop`; counts what it decided. */
export async function runApprover(api: ApiClients, stop: AbortSignal): Promise<{ decided: number; refused: number }> {
  const firstSeen = new Map<string, number>();
  const counts = { decided: 0, refused: 0 };
  while (!stop.aborted) {
    try {
      const { json } = await api.call<{ approvals: Array<{ requestId: string }> }>('GET', '/v1/approvals');
      for (const { requestId } of json?.approvals ?? []) {
        const seen = firstSeen.get(requestId) ?? Date.now();
        firstSeen.set(requestId, seen);
        if (Date.now() - seen < APPROVAL_DELAY_MS) continue;
        const decided = await api.call('POST', `/v1/approvals/${requestId}`, {
          decision: 'approved',
          comment: 'chaos approver',
        });
        // 409: decided already (an earlier attempt whose answer was lost); the invariants check it ran once.
        if (decided.status === 200) counts.decided++;
        else counts.refused++;
        firstSeen.delete(requestId);
      }
    } catch {
      // Both API processes down for a while: the next round asks again.
    }
    await sleep(APPROVER_POLL_MS, undefined, { signal: stop }).catch(() => undefined);
  }
  return counts;
}

export interface FollowedChat {
  agentId: string;
  n: string;
  itemId?: string;
  /** When the first POST was sent (epoch ms): the invariant tells a follower's limit from the answer's timing. */
  startedAt: number;
  /** POSTs sent again with the same Idempotency-Key because one failed before its `item` event. */
  postRetries: number;
  /** The text as the SSE client assembled it (rewinds applied). */
  text: string;
  reconnects: number;
  ended: boolean;
  error?: string;
  /** What each connection did, for a follower that did not end: when it opened, its status, frames, how it stopped. */
  connections: string[];
}

/**
 * Sends a chat message and follows its answer to `end` over SSE; when the connection drops it resumes on
 * the next API process with Last-Event-ID, as a browser's EventSource would. The POST carries an
 * Idempotency-Key, so one that failed before its `item` event (the message may or may not be in) is sent
 * again on the next process: the API answers with the item the first one stored, or stores it now.
 */
export async function followChat(
  api: ApiClients,
  agentId: string,
  n: string,
  deadlineMs: number,
): Promise<FollowedChat> {
  const started = Date.now();
  const followed: FollowedChat = {
    agentId,
    n,
    startedAt: started,
    postRetries: 0,
    text: '',
    reconnects: 0,
    ended: false,
    connections: [],
  };
  const idempotencyKey = randomUUID();
  let transcript: StreamTranscript = emptyTranscript();
  let lastId: string | undefined;
  const deadline = Date.now() + deadlineMs;
  for (let attempt = 0; Date.now() < deadline && !followed.ended; attempt++) {
    const first = followed.itemId === undefined;
    const url = first
      ? `${api.baseFor(attempt)}/v1/agents/${agentId}/chat`
      : `${api.baseFor(attempt)}/v1/agents/${agentId}/chat/${followed.itemId}/stream`;
    const note = { at: Date.now() - started, status: 0, frames: 0, how: 'open' };
    const silence = new AbortController();
    let silent: NodeJS.Timeout | undefined;
    let refused = false;
    try {
      const heard = () => {
        clearTimeout(silent);
        silent = setTimeout(() => silence.abort(new Error(`no byte for ${SSE_SILENCE_MS} ms`)), SSE_SILENCE_MS);
      };
      heard();
      const response = await fetch(url, {
        method: first ? 'POST' : 'GET',
        headers: {
          authorization: api.authorization,
          accept: 'text/event-stream',
          ...(first ? { 'content-type': 'application/json', 'idempotency-key': idempotencyKey } : {}),
          ...(lastId ? { 'last-event-id': lastId } : {}),
        },
        body: first ? JSON.stringify({ text: `chaos chat ${n}: please answer` }) : undefined,
        signal: AbortSignal.any([AbortSignal.timeout(Math.max(1, deadline - Date.now())), silence.signal]),
      }).finally(heard);
      note.status = response.status;
      if (response.status === 204) {
        followed.ended = true; // resumed at or after the end: nothing is missing
        break;
      }
      if (response.status !== 200) {
        const why = new Error(`answered ${response.status}: ${(await response.text()).slice(0, 200)}`);
        // A 4xx is the request's own fault (a bad key, an unknown agent): sending it again cannot help.
        refused = first && response.status < 500;
        throw why;
      }
      for await (const frame of sseFrames(response, heard)) {
        note.frames++;
        if (frame.event === 'item') {
          followed.itemId = (frame.data as { itemId: string }).itemId;
          continue;
        }
        if (frame.id) lastId = frame.id;
        const event = frame.data as StreamEvent;
        // A closing `end` without an id is not a stream event (the item settled without its run's `end`).
        if (event?.kind && frame.id) transcript = applyStreamEvent(transcript, event);
        if (frame.event === 'end' || event?.kind === 'end') {
          followed.ended = true;
          break;
        }
      }
      note.how = followed.ended ? 'end' : 'closed';
    } catch (error) {
      followed.error = (error as Error).message;
      note.how = `error ${followed.error.slice(0, 80)} after ${Date.now() - started - note.at} ms`;
    } finally {
      clearTimeout(silent);
    }
    followed.connections.push(
      `${first ? 'POST' : 'GET'} ${url.slice(0, url.indexOf('/v1'))} +${(note.at / 1000).toFixed(1)}s ${note.status} ${note.frames} frames ${note.how}`,
    );
    if (refused) break;
    if (!followed.ended) {
      // A POST that failed before its item: the same POST again (same key) finds or stores the one item.
      if (followed.itemId === undefined) followed.postRetries++;
      else followed.reconnects++;
      await sleep(RETRY_PAUSE_MS);
    }
  }
  followed.text = transcriptText(transcript);
  return followed;
}

async function* sseFrames(
  response: Response,
  onBytes: () => void,
): AsyncGenerator<{ id?: string; event?: string; data: unknown }> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    onBytes();
    buffer += decoder.decode(chunk, { stream: true });
    let cut: number;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const message: { id?: string; event?: string; data?: string } = {};
      for (const line of frame.split('\n')) {
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = line.slice(0, colon);
        const value = line.slice(colon + 1).replace(/^ /, '');
        if (field === 'id' || field === 'event' || field === 'data') message[field] = value;
      }
      if (message.data !== undefined) yield { id: message.id, event: message.event, data: JSON.parse(message.data) };
    }
  }
}
