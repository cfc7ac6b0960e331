import type { Kysely } from 'kysely';
import pg from 'pg';
import type { Database } from '../schema/database';
import { readStreamEvents } from '../activities/streams/store';
import {
  applyStreamEvent,
  emptyTranscript,
  STREAM_NOTIFY_CHANNEL,
  type StreamEvent,
  type StreamTranscript,
} from '../workflows/stream-contract';

export {
  applyStreamEvent,
  emptyTranscript,
  transcriptText,
  type StreamEvent,
  type StreamTranscript,
} from '../workflows/stream-contract';
export { stepStreamId } from '../activities/streams/publisher';

/**
 * Without a notification the follower still looks for new rows this often: NOTIFY is a wake-up call,
 * not the source of truth, so a dropped notification (or a proxy that strips LISTEN) only adds latency.
 */
export const STREAM_POLL_INTERVAL_MS = 1_000;
/** First wait before reconnecting a lost LISTEN connection; doubles up to the maximum. */
export const STREAM_RECONNECT_INITIAL_MS = 100;
export const STREAM_RECONNECT_MAX_MS = 5_000;

/** Where streams are read from: the database (catch-up queries) and a URL for the LISTEN connection. */
export interface StreamSource {
  db: Kysely<Database>;
  /**
   * PostgreSQL URL for the dedicated LISTEN connection (a pooled connection cannot LISTEN reliably).
   * Absent (an embedded database with one session): the follower only polls, every poll interval.
   */
  connectionString?: string;
}

export interface TailStreamOptions {
  /** Resume after this sequence number (0 = from the start). */
  afterSeq?: number;
  /** Stop when this returns true for an event (the event is still yielded). */
  until?: (event: StreamEvent) => boolean;
  /** Stop after an `end` event (default true). */
  stopAtEnd?: boolean;
  /** Stops the iterator (it then returns normally). */
  signal?: AbortSignal;
  pollIntervalMs?: number;
}

/**
 * Tails a run stream: yields every event after `afterSeq`, in order, then waits for more. Wakes on
 * the `agent_progress` NOTIFY (a dedicated connection, reconnected with backoff when lost) and polls
 * every STREAM_POLL_INTERVAL_MS as well; every wake-up runs a catch-up query from the last sequence
 * number seen, so a reconnect, a worker crash or a client restart loses nothing and repeats nothing.
 * Rewinds are yielded as events: fold them with `applyStreamEvent` (or use `followTranscript`).
 *
 * ```ts
 * for await (const e of tailStream({ db, connectionString }, 'task-42', { afterSeq: lastSeen })) {
 *   if (e.kind === 'delta') process.stdout.write(e.text ?? '');
 * }
 * ```
 */
export async function* tailStream(
  source: StreamSource,
  streamId: string,
  options: TailStreamOptions = {},
): AsyncGenerator<StreamEvent, void, undefined> {
  const stopAtEnd = options.stopAtEnd ?? true;
  const pollMs = options.pollIntervalMs ?? STREAM_POLL_INTERVAL_MS;
  let lastSeq = options.afterSeq ?? 0;
  let dirty = true;
  let wake: (() => void) | undefined;
  const poke = (): void => {
    dirty = true;
    wake?.();
  };
  const listener = new StreamListener(source.connectionString, streamId, poke);
  options.signal?.addEventListener('abort', poke);
  try {
    while (!options.signal?.aborted) {
      listener.ensureConnected();
      dirty = false;
      let events: StreamEvent[];
      try {
        events = await readStreamEvents(source.db, streamId, lastSeq);
      } catch {
        events = []; // the database is unreachable: try again at the next wake-up or poll
      }
      for (const event of events) {
        lastSeq = event.seq;
        yield event;
        if ((stopAtEnd && event.kind === 'end') || options.until?.(event)) return;
      }
      if (events.length > 0 || dirty) continue;
      await new Promise<void>((resolve) => {
        // While the LISTEN connection is down, nothing will wake us: wait only until it is retried.
        const timer = setTimeout(resolve, listener.live ? pollMs : Math.min(pollMs, listener.msUntilRetry()));
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = undefined;
    }
  } finally {
    options.signal?.removeEventListener('abort', poke);
    await listener.close();
  }
}

/**
 * Follows a stream and folds it into a transcript, yielding after each event: the text so far with
 * superseded output already removed. Handy for UIs that redraw rather than append.
 */
export async function* followTranscript(
  source: StreamSource,
  streamId: string,
  options: TailStreamOptions = {},
): AsyncGenerator<{ event: StreamEvent; transcript: StreamTranscript }, void, undefined> {
  const transcript = emptyTranscript();
  for await (const event of tailStream(source, streamId, options))
    yield { event, transcript: applyStreamEvent(transcript, event) };
}

/** Everything a stream holds now, folded (no waiting). */
export async function readTranscript(db: Kysely<Database>, streamId: string): Promise<StreamTranscript> {
  const transcript = emptyTranscript();
  for (;;) {
    const page = await readStreamEvents(db, streamId, transcript.lastSeq);
    for (const e of page) applyStreamEvent(transcript, e);
    if (page.length === 0) return transcript;
  }
}

/** The LISTEN side of a follower: one connection, re-established with backoff after it is lost. */
class StreamListener {
  private client: pg.Client | undefined;
  private connecting = false;
  private retryAt = 0;
  private backoffMs = STREAM_RECONNECT_INITIAL_MS;
  private closed = false;

  constructor(
    private readonly connectionString: string | undefined,
    private readonly streamId: string,
    private readonly onNotify: () => void,
  ) {}

  /** A notification (or a connection event) will wake the follower, or there is no LISTEN at all: it may wait the full poll interval. */
  get live(): boolean {
    return this.connectionString === undefined || this.client !== undefined || this.connecting;
  }

  /** How long until a lost connection is tried again (0 when it may be now). */
  msUntilRetry(): number {
    return Math.max(0, this.retryAt - Date.now());
  }

  /** Starts connecting if there is no live connection and the backoff has passed (never blocks). */
  ensureConnected(): void {
    if (
      this.connectionString === undefined ||
      this.closed ||
      this.client ||
      this.connecting ||
      Date.now() < this.retryAt
    )
      return;
    this.connecting = true;
    const client = new pg.Client({ connectionString: this.connectionString });
    const lost = (): void => {
      if (this.client === client) this.client = undefined;
      client.removeAllListeners('notification');
      void client.end().catch(() => undefined);
      this.retryAt = Date.now() + this.backoffMs;
      this.backoffMs = Math.min(this.backoffMs * 2, STREAM_RECONNECT_MAX_MS);
      this.onNotify(); // catch up: notifications may have been missed while the connection was down
    };
    client.on('error', lost);
    client.on('end', () => this.client === client && lost());
    client.on('notification', (message) => {
      if (message.channel !== STREAM_NOTIFY_CHANNEL || !message.payload) return;
      try {
        if ((JSON.parse(message.payload) as { streamId?: string }).streamId === this.streamId) this.onNotify();
      } catch {
        // Someone else's payload on the channel: not ours.
      }
    });
    client
      .connect()
      .then(() => client.query(`LISTEN ${STREAM_NOTIFY_CHANNEL}`))
      .then(async () => {
        this.connecting = false;
        if (this.closed) return void (await client.end().catch(() => undefined));
        this.client = client;
        this.backoffMs = STREAM_RECONNECT_INITIAL_MS;
        this.onNotify(); // rows committed before LISTEN took effect are found by the catch-up query
      })
      .catch(() => {
        this.connecting = false;
        lost();
      });
  }

  async close(): Promise<void> {
    this.closed = true;
    const client = this.client;
    this.client = undefined;
    if (client) {
      client.removeAllListeners();
      client.on('error', () => undefined);
      await client.end().catch(() => undefined);
    }
  }
}
