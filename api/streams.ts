/**
 * Live streams behind the SSE routes.
 *
 * Task events come from PostgreSQL: `task_events.seq` is dense per task and follows commit order
 * (migration 004), so "everything after seq N" has no gap and no duplicate, whichever API process
 * serves the reconnect. One poller per followed task fans rows out to every subscriber.
 *
 * LLM text comes from the task's stored run stream (`stream_events`, see client/streams.ts): its
 * sequence numbers are the SSE ids, so a reconnect to any process resumes exactly.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../schema/database';
import { findTask } from '../activities/store/tasks';
import { tailStream, type StreamEvent } from '../client/streams';
import { taskWorkflowId } from '../workflows/contract';
import { isTerminal, type TaskState } from '../workflows/rules/task-state';

/** How often a followed task is polled for new events: the stream's worst-case added latency. */
export const EVENT_POLL_INTERVAL_MS = 200;
/** Rows fetched per poll; a backlog drains over several polls. */
const EVENT_BATCH = 500;

export interface StreamedTaskEvent {
  seq: number;
  type: string;
  data: Record<string, unknown>;
  createdAt: string;
}

export async function readTaskEvents(
  db: Kysely<Database>,
  taskId: string,
  afterSeq: number,
  limit = EVENT_BATCH,
): Promise<StreamedTaskEvent[]> {
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
  private readonly tasks = new Map<
    string,
    { listeners: Set<EventListener>; cursor: number; timer?: NodeJS.Timeout; polling: boolean }
  >();
  private closed = false;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly pollIntervalMs = EVENT_POLL_INTERVAL_MS,
  ) {}

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

  private schedule(
    taskId: string,
    entry: { listeners: Set<EventListener>; cursor: number; timer?: NodeJS.Timeout },
  ): void {
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

/** The sequence number of a run stream's `end` event, or undefined while it has none (it is still running). */
export async function runStreamEndSeq(db: Kysely<Database>, streamId: string): Promise<number | undefined> {
  const row = await db
    .selectFrom('stream_events')
    .select('seq')
    .where('stream_id', '=', streamId)
    .where('kind', '=', 'end')
    .orderBy('seq')
    .limit(1)
    .executeTakeFirst();
  return row?.seq;
}

/**
 * Whether a task's text stream has nothing more to send after `afterSeq`: the task is finished (it
 * writes no more text) and the stream's head is at or before `afterSeq`.
 */
export async function taskTextEnded(
  db: Kysely<Database>,
  taskId: string,
  taskState: string,
  afterSeq: number,
): Promise<boolean> {
  if (!isTerminal(taskState as TaskState)) return false;
  const head = await db
    .selectFrom('stream_heads')
    .select('last_seq')
    .where('stream_id', '=', taskWorkflowId(taskId))
    .executeTakeFirst();
  return afterSeq >= (head?.last_seq ?? 0);
}

/** How often a finished-or-not check runs for an open text stream (the end of a finished task's stream). */
export const TEXT_STREAM_STATE_CHECK_MS = 500;
/** Without LISTEN (the embedded database serves one session) the text stream polls this often. */
export const TEXT_STREAM_POLL_ONLY_MS = 200;

/**
 * A task's LLM text from its stored run stream (`task-{taskId}` in `stream_events`, written by the
 * worker's step publisher): every event after `afterSeq`, in order, then new ones as they commit, on
 * any API process (the sequence number is the stream's own, so a resume has no gap and no duplicate).
 * `rewind` events pass through: a client drops the superseded text they name. Stops once the task is
 * finished and every event written before that was sent (`onEnd`), or when `signal` aborts.
 */
export async function followTaskText(
  source: { db: Kysely<Database>; connectionString?: string },
  taskId: string,
  afterSeq: number,
  deliver: (event: StreamEvent) => void,
  signal: AbortSignal,
): Promise<'finished' | 'aborted'> {
  const streamId = taskWorkflowId(taskId);
  let sent = afterSeq;
  let endAt = Number.POSITIVE_INFINITY;
  const stop = new AbortController();
  const onAbort = (): void => stop.abort();
  signal.addEventListener('abort', onAbort);
  // A finished task writes nothing more: end once its stream head is sent.
  const checker = setInterval(() => {
    void (async () => {
      try {
        const task = await findTask(source.db, taskId);
        if (!task || !isTerminal(task.state as TaskState) || endAt !== Number.POSITIVE_INFINITY) return;
        const head = await source.db
          .selectFrom('stream_heads')
          .select('last_seq')
          .where('stream_id', '=', streamId)
          .executeTakeFirst();
        endAt = head?.last_seq ?? 0;
        if (sent >= endAt) stop.abort();
      } catch {
        // The database is unreachable for a moment: check again at the next tick.
      }
    })();
  }, TEXT_STREAM_STATE_CHECK_MS);
  try {
    for await (const event of tailStream({ db: source.db, connectionString: source.connectionString }, streamId, {
      afterSeq,
      signal: stop.signal,
      until: (e) => e.seq >= endAt,
      ...(source.connectionString ? {} : { pollIntervalMs: TEXT_STREAM_POLL_ONLY_MS }),
    })) {
      sent = event.seq;
      deliver(event);
      if (event.kind === 'end' || sent >= endAt) return 'finished';
    }
    return signal.aborted ? 'aborted' : 'finished';
  } finally {
    clearInterval(checker);
    signal.removeEventListener('abort', onAbort);
  }
}

/** How often an open chat answer stream checks whether its mailbox item is settled (its run can write nothing more). */
export const CHAT_STREAM_STATE_CHECK_MS = 1_000;
/** Mailbox item states after which the agent runs nothing more for the item. */
const SETTLED_ITEM_STATES = new Set(['completed', 'dropped']);

/** Why a chat answer stream ended without its run's `end` event: the item settled, and what it recorded. */
export interface ChatStreamSettled {
  itemId: string;
  status: string;
  result?: string;
}

/**
 * A chat answer from its stored run stream (`agent-{agentId}-chat-{itemId}`): every event after
 * `afterSeq`, in order, then new ones as they commit, until the run's `end` event. A run normally writes
 * `end` whatever happens, but one that was stopped from outside (terminated, or its item dropped before a
 * run started) never does, and a follower would wait for ever. So the item is checked as well: once the
 * agent has settled it (completed or dropped) and every event written before that was sent, the follow
 * ends and says so (`settled`), and a resume gets the same answer.
 */
export async function followChatAnswer(
  source: { db: Kysely<Database>; connectionString?: string },
  item: { agentId: string; itemId: string },
  streamId: string,
  afterSeq: number,
  deliver: (event: StreamEvent) => void,
  signal: AbortSignal,
): Promise<{ ended: 'end' } | { ended: 'settled'; settled: ChatStreamSettled } | { ended: 'aborted' }> {
  let sent = afterSeq;
  let endAt = Number.POSITIVE_INFINITY;
  let settled: ChatStreamSettled | undefined;
  const stop = new AbortController();
  const onAbort = (): void => stop.abort();
  signal.addEventListener('abort', onAbort);
  const check = async (): Promise<void> => {
    if (settled) return;
    try {
      const row = await source.db
        .selectFrom('mailbox_items')
        .select(['status', 'result'])
        .where('id', '=', item.itemId)
        .where('agent_id', '=', item.agentId)
        .executeTakeFirst();
      if (!row || !SETTLED_ITEM_STATES.has(row.status)) return;
      // Read after the status: a run that settled its item wrote its last event before.
      const head = await source.db
        .selectFrom('stream_heads')
        .select('last_seq')
        .where('stream_id', '=', streamId)
        .executeTakeFirst();
      settled = { itemId: item.itemId, status: row.status, ...(row.result ? { result: row.result } : {}) };
      endAt = head?.last_seq ?? 0;
      if (sent >= endAt) stop.abort();
    } catch {
      // The database is unreachable for a moment: check again at the next tick.
    }
  };
  const checker = setInterval(() => void check(), CHAT_STREAM_STATE_CHECK_MS);
  try {
    for await (const event of tailStream({ db: source.db, connectionString: source.connectionString }, streamId, {
      afterSeq,
      signal: stop.signal,
      until: (e) => e.seq >= endAt,
      ...(source.connectionString ? {} : { pollIntervalMs: TEXT_STREAM_POLL_ONLY_MS }),
    })) {
      sent = event.seq;
      deliver(event);
      if (event.kind === 'end') return { ended: 'end' };
    }
    if (signal.aborted) return { ended: 'aborted' };
    return settled ? { ended: 'settled', settled } : { ended: 'aborted' };
  } finally {
    clearInterval(checker);
    signal.removeEventListener('abort', onAbort);
  }
}
