/**
 * Server-Sent Events for the HTTP API: taking over a response, framing events, resuming with
 * `Last-Event-ID`, and piping a stored run stream (a task's text, a chat answer) to a client.
 */
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import type { StreamEvent } from '../client/streams';
import { ApiError } from './errors';

/** SSE comment sent while nothing happens, so proxies and clients keep the connection open. */
const SSE_KEEPALIVE_MS = 15_000;

export type Sse = ReturnType<typeof openSse>;

/** Takes over the response for Server-Sent Events. */
export function openSse(request: FastifyRequest, reply: FastifyReply) {
  void reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  res.write('retry: 1000\n\n');
  const closers: Array<() => void> = [];
  let open = true;
  const keepalive = setInterval(() => res.write(': keepalive\n\n'), SSE_KEEPALIVE_MS);
  const close = () => {
    if (!open) return;
    open = false;
    clearInterval(keepalive);
    for (const fn of closers) fn();
  };
  request.raw.on('close', close);
  res.on('close', close);
  return {
    send(message: { id?: string; event?: string; data: unknown }) {
      if (!open) return;
      let frame = '';
      if (message.id !== undefined) frame += `id: ${message.id}\n`;
      if (message.event !== undefined) frame += `event: ${message.event}\n`;
      frame += `data: ${JSON.stringify(message.data)}\n\n`;
      res.write(frame);
    },
    /** Ends the response, after an `end` event (with `endData`, default `{}`) unless the stream sent its own. */
    end(withEndEvent = true, endData: unknown = {}) {
      if (!open) return;
      if (withEndEvent) res.write(`event: end\ndata: ${JSON.stringify(endData)}\n\n`);
      res.end();
      close();
    },
    onClose(fn: () => void) {
      if (open) closers.push(fn);
      else fn();
    },
  };
}

/**
 * Answers 204 No Content to a stream request: the stream has ended and the client already has all of
 * it. A standard EventSource stops reconnecting only on a non-200 answer (WHATWG HTML, server-sent
 * events), so answering 200 with another `end` event would bring it back every `retry` interval forever.
 */
export function streamEnded(reply: FastifyReply): FastifyReply {
  return reply.status(204).header('cache-control', 'no-store').send();
}

/** The sequence number to resume after: the `Last-Event-ID` header if sent, else `fallback`. */
export function resumeAfter(request: FastifyRequest, fallback = 0): number {
  const value = request.headers['last-event-id'];
  if (value === undefined) return fallback;
  const text = String(value);
  if (!/^\d{1,15}$/.test(text))
    throw new ApiError(
      400,
      'invalid_request',
      `Last-Event-ID must be an event sequence number; got ${JSON.stringify(text.slice(0, 40))}`,
    );
  return Number(text);
}

/** A run stream event as sent to clients (the stream id is the URL's business). */
function runStreamEventJson(e: StreamEvent) {
  return {
    seq: e.seq,
    kind: e.kind,
    ...(e.stepKey !== undefined ? { stepKey: e.stepKey } : {}),
    attempt: e.attempt,
    part: e.part,
    ...(e.text !== undefined && e.text !== null ? { text: e.text } : {}),
    ...(e.data ? { data: e.data } : {}),
    createdAt: e.createdAt.toISOString(),
  };
}

/** The run streams the API is sending; closing the server aborts them. */
export class RunStreams {
  private readonly open = new Set<AbortController>();

  constructor(private readonly log: FastifyBaseLogger) {}

  /**
   * Sends a run stream's events as SSE (id = sequence number, event = kind) until it ends or the client
   * leaves. A follow that resolves to `{ endData }` ended without the stream's own `end` event: the
   * closing `end` event (no id, so a resume asks again and gets the same answer) carries that data.
   */
  pipe(sse: Sse, follow: (deliver: (e: StreamEvent) => void, signal: AbortSignal) => Promise<unknown>): void {
    const stop = new AbortController();
    this.open.add(stop);
    sse.onClose(() => stop.abort());
    let ended = false;
    follow((e) => {
      ended = e.kind === 'end';
      sse.send({ id: String(e.seq), event: e.kind, data: runStreamEventJson(e) });
    }, stop.signal)
      .then((outcome) => {
        if (stop.signal.aborted) return;
        const endData = (outcome as { endData?: unknown } | undefined)?.endData;
        sse.end(!ended, endData ?? {});
      })
      .catch((error: unknown) => {
        this.log.error({ err: error }, 'run stream failed');
        sse.end();
      })
      .finally(() => this.open.delete(stop));
  }

  closeAll(): void {
    for (const stream of this.open) stream.abort();
  }
}
