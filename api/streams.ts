/**
 * Live streams behind the SSE routes.
 *
 * Task events come from PostgreSQL: `task_events.seq` is dense per task and follows commit order
 * (migration 004), so "everything after seq N" has no gap and no duplicate, whichever API process
 * serves the reconnect. One poller per followed task fans rows out to every subscriber.
 *
 * LLM text deltas come from the worker's `agent_progress` NOTIFY, which stores nothing. This process
 * numbers them as they arrive and keeps the newest per task in memory: a reconnect to the same process
 * within that window resumes exactly; anything else gets a `reset` event, because the deltas in
 * between were never stored (the final text is: it is in the task's messages and events).
 */
import { randomBytes } from 'node:crypto';
import { Client as PgClient } from 'pg';
import type { Kysely } from 'kysely';
import type { Database } from '../schema/database';

/** How often a followed task is polled for new events: the stream's worst-case added latency. */
export const EVENT_POLL_INTERVAL_MS = 200;
/** Rows fetched per poll; a backlog drains over several polls. */
const EVENT_BATCH = 500;
/** Deltas kept per task for resuming, about a minute of fast streaming. */
export const DELTA_BUFFER_PER_TASK = 2_000;
/** Tasks whose deltas are kept; the least recently written is dropped first. */
const DELTA_TASKS_MAX = 500;
/** The worker's NOTIFY channel (activities/llm-step.ts PROGRESS_CHANNEL). */
export const PROGRESS_CHANNEL = 'agent_progress';

export interface StreamedTaskEvent {
  seq: number;
  type: string;
  data: Record<string, unknown>;
  createdAt: string;
}

export async function readTaskEvents(db: Kysely<Database>, taskId: string, afterSeq: number, limit = EVENT_BATCH): Promise<StreamedTaskEvent[]> {
  const rows = await db
    .selectFrom('task_events')
    .select(['seq', 'type', 'data', 'created_at'])
    .where('task_id', '=', taskId)
    .where('seq', '>', String(afterSeq) as never)
    .orderBy('seq')
    .limit(limit)
    .execute();
  return rows.map((r) => ({ seq: Number(r.seq), type: r.type, data: r.data, createdAt: r.created_at.toISOString() }));
}

type EventListener = (events: StreamedTaskEvent[]) => void;

/** One poll loop per task with subscribers; each subscriber keeps its own cursor. */
export class TaskEventHub {
  private readonly tasks = new Map<string, { listeners: Set<EventListener>; cursor: number; timer?: NodeJS.Timeout; polling: boolean }>();
  private closed = false;

  constructor(private readonly db: Kysely<Database>, private readonly pollIntervalMs = EVENT_POLL_INTERVAL_MS) {}

  /**
   * Delivers every event after `afterSeq`, in order, exactly once, then new ones as they commit.
   * Returns the unsubscribe function.
   */
  async subscribe(taskId: string, afterSeq: number, deliver: (event: StreamedTaskEvent) => void): Promise<() => void> {
    let cursor = afterSeq;
    const buffered: StreamedTaskEvent[] = [];
    let caughtUp = false;
    const emit = (events: StreamedTaskEvent[]): void => {
      for (const e of events) {
        if (e.seq !== cursor + 1) continue; // already delivered, or not contiguous (caught up by the next read)
        cursor = e.seq;
        deliver(e);
      }
    };
    const listener: EventListener = (events) => (caughtUp ? emit(events) : buffered.push(...events));
    const entry = this.entry(taskId, afterSeq);
    entry.listeners.add(listener);
    // Join the live feed first, then read the backlog: whatever the poller sends meanwhile is buffered.
    for (;;) {
      const backlog = await readTaskEvents(this.db, taskId, cursor);
      emit(backlog);
      if (backlog.length < EVENT_BATCH) break;
    }
    emit(buffered.sort((a, b) => a.seq - b.seq));
    caughtUp = true;
    // A gap between the backlog and the poller's feed (it was ahead): the next poll rereads from `cursor`.
    entry.cursor = Math.min(entry.cursor, cursor);
    return () => {
      entry.listeners.delete(listener);
      if (entry.listeners.size === 0) {
        clearTimeout(entry.timer);
        this.tasks.delete(taskId);
      }
    };
  }

  close(): void {
    this.closed = true;
    for (const entry of this.tasks.values()) clearTimeout(entry.timer);
    this.tasks.clear();
  }

  private entry(taskId: string, afterSeq: number) {
    let entry = this.tasks.get(taskId);
    if (!entry) {
      entry = { listeners: new Set(), cursor: afterSeq, polling: false };
      this.tasks.set(taskId, entry);
      this.schedule(taskId, entry);
    }
    return entry;
  }

  private schedule(taskId: string, entry: { listeners: Set<EventListener>; cursor: number; timer?: NodeJS.Timeout }): void {
    if (this.closed) return;
    entry.timer = setTimeout(() => {
      void (async () => {
        try {
          for (;;) {
            const events = await readTaskEvents(this.db, taskId, entry.cursor);
            if (events.length === 0) break;
            entry.cursor = events.at(-1)!.seq;
            for (const listener of entry.listeners) listener(events);
            if (events.length < EVENT_BATCH) break;
          }
        } catch {
          // The database is unreachable for a moment: the next poll retries from the same cursor.
        }
        if (this.tasks.get(taskId) === entry) this.schedule(taskId, entry);
      })();
    }, this.pollIntervalMs);
  }
}

export interface TextDelta {
  /** `{boot}.{n}`: this process's boot id and the delta's number within the task. */
  id: string;
  n: number;
  sessionId: string;
  text: string;
}

/** Listens to `agent_progress` and numbers the deltas per task (see the file comment for the limits). */
export class DeltaHub {
  readonly bootId = randomBytes(4).toString('hex');
  private readonly buffers = new Map<string, { next: number; deltas: TextDelta[]; listeners: Set<(d: TextDelta) => void> }>();
  private client?: PgClient;

  /** Starts listening; without a server URL (embedded database in another process) deltas are unavailable. */
  async start(databaseUrl: string | undefined): Promise<boolean> {
    if (!databaseUrl) return false;
    try {
      const client = new PgClient({ connectionString: databaseUrl });
      await client.connect();
      client.on('notification', (msg) => this.onNotification(msg.payload));
      client.on('error', () => undefined);
      await client.query(`listen ${PROGRESS_CHANNEL}`);
      this.client = client;
      return true;
    } catch {
      return false;
    }
  }

  get available(): boolean {
    return this.client !== undefined;
  }

  /**
   * Sends the deltas after `lastId` that are still buffered, then live ones; calls `reset` first when
   * the resume cannot be exact (some deltas after `lastId` are gone). Returns the unsubscribe function.
   */
  subscribe(taskId: string, lastId: string | undefined, deliver: (d: TextDelta) => void, reset: () => void): () => void {
    const buffer = this.buffer(taskId);
    let exact = true;
    let after = 0;
    if (lastId) {
      const [boot, n] = lastId.split('.');
      const first = buffer.deltas[0]?.n ?? buffer.next;
      if (boot !== this.bootId || !Number.isInteger(Number(n)) || Number(n) + 1 < first) exact = false;
      else after = Number(n);
    }
    if (!exact) reset();
    for (const d of buffer.deltas) if (d.n > after) deliver(d);
    buffer.listeners.add(deliver);
    return () => buffer.listeners.delete(deliver);
  }

  async close(): Promise<void> {
    await this.client?.end().catch(() => undefined);
    this.client = undefined;
  }

  private buffer(taskId: string) {
    let buffer = this.buffers.get(taskId);
    if (!buffer) {
      buffer = { next: 1, deltas: [], listeners: new Set() };
      this.buffers.set(taskId, buffer);
      if (this.buffers.size > DELTA_TASKS_MAX) {
        for (const [id, b] of this.buffers) {
          if (b.listeners.size === 0) {
            this.buffers.delete(id);
            break;
          }
        }
      }
    }
    return buffer;
  }

  private onNotification(payload: string | undefined): void {
    let parsed: { taskId?: string; sessionId?: string; text?: string };
    try {
      parsed = JSON.parse(payload ?? '') as typeof parsed;
    } catch {
      return;
    }
    if (!parsed.taskId || typeof parsed.text !== 'string') return;
    const buffer = this.buffer(parsed.taskId);
    // Re-insert: Map order doubles as least-recently-written order for eviction.
    this.buffers.delete(parsed.taskId);
    this.buffers.set(parsed.taskId, buffer);
    const n = buffer.next++;
    const delta: TextDelta = { id: `${this.bootId}.${n}`, n, sessionId: parsed.sessionId ?? '', text: parsed.text };
    buffer.deltas.push(delta);
    if (buffer.deltas.length > DELTA_BUFFER_PER_TASK) buffer.deltas.shift();
    for (const listener of buffer.listeners) listener(delta);
  }
}
