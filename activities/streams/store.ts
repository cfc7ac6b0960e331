import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Database } from '../../schema/database';
import { STREAM_NOTIFY_CHANNEL, type StreamEvent, type StreamEventKind } from '../../workflows/stream-contract';

/** One event to append; the store assigns its sequence number. */
export interface NewStreamEvent {
  kind: StreamEventKind;
  stepKey?: string;
  attempt?: number;
  part?: number;
  text?: string;
  data?: Record<string, unknown>;
}

/** Who the stream belongs to, stored on every row so operators can find an agent's or a task's streams. */
export interface StreamOwner {
  streamId: string;
  agentId?: string;
  taskId?: string;
}

/** A catch-up page is at most this many rows, so a client far behind reads in bounded slices. */
export const STREAM_READ_PAGE_MAX = 500;

/**
 * Appends events to a stream atomically, in one statement (one round trip): reserves their sequence
 * numbers on `stream_heads` (a row lock, so concurrent writers to one stream get ordered, gap-free
 * numbers), inserts the rows and NOTIFYs `agent_progress` with `{ streamId, seq }`, which PostgreSQL
 * delivers only on commit, so a listener's catch-up query always finds the rows. Returns the sequence
 * numbers assigned.
 */
export async function appendStreamEvents(
  db: Kysely<Database>,
  owner: StreamOwner,
  events: NewStreamEvent[],
): Promise<number[]> {
  if (events.length === 0) return [];
  const n = events.length;
  const append = streamAppendCtes(owner, events);
  const { rows: result } = await sql<{
    last_seq: number;
  }>`with ${append.ctes} select stream_head.last_seq, ${append.notify} from stream_head`.execute(db);
  const last = result[0]!.last_seq;
  return events.map((_, i) => last - n + 1 + i);
}

/**
 * `appendStreamEvents`'s statement in parts, to join another statement's data-modifying CTEs (one
 * round trip, one transaction): `ctes` defines `stream_head` (the reserved sequence numbers) and
 * `stream_inserted`; `notify` is the NOTIFY expression, to select from `stream_head`.
 */
export function streamAppendCtes(
  owner: StreamOwner,
  events: NewStreamEvent[],
): { ctes: RawBuilder<unknown>; notify: RawBuilder<unknown> } {
  const n = events.length;
  const rows = JSON.stringify(
    events.map((e, i) => ({
      i: i + 1,
      kind: e.kind,
      step_key: e.stepKey ?? null,
      attempt: e.attempt ?? 1,
      part: e.part ?? 0,
      text: e.text ?? null,
      data: e.data ?? null,
    })),
  );
  return {
    ctes: sql`stream_head as (
      insert into stream_heads (stream_id, last_seq) values (${owner.streamId}, ${n})
      on conflict (stream_id) do update set last_seq = stream_heads.last_seq + ${n}, updated_at = now()
      returning last_seq
    ), stream_inserted as (
      insert into stream_events (stream_id, seq, kind, step_key, attempt, part, text, data, agent_id, task_id)
      select ${owner.streamId}, stream_head.last_seq - ${n} + e.i, e.kind, e.step_key, e.attempt, e.part, e.text, e.data, ${owner.agentId ?? null}, ${owner.taskId ?? null}
      from stream_head cross join jsonb_to_recordset(${rows}::jsonb) as e(i integer, kind text, step_key text, attempt integer, part integer, text text, data jsonb)
    )`,
    notify: sql`pg_notify(${STREAM_NOTIFY_CHANNEL}, json_build_object('streamId', ${owner.streamId}::text, 'seq', stream_head.last_seq)::text)`,
  };
}

/** Events of a stream after `afterSeq`, in order, at most `limit` (capped at STREAM_READ_PAGE_MAX). */
export async function readStreamEvents(
  db: Kysely<Database>,
  streamId: string,
  afterSeq = 0,
  limit = STREAM_READ_PAGE_MAX,
): Promise<StreamEvent[]> {
  const rows = await db
    .selectFrom('stream_events')
    .selectAll()
    .where('stream_id', '=', streamId)
    .where('seq', '>', afterSeq)
    .orderBy('seq')
    .limit(Math.min(Math.max(1, limit), STREAM_READ_PAGE_MAX))
    .execute();
  return rows.map((r) => ({
    streamId: r.stream_id,
    seq: r.seq,
    kind: r.kind,
    ...(r.step_key !== null ? { stepKey: r.step_key } : {}),
    attempt: r.attempt,
    part: r.part,
    ...(r.text !== null ? { text: r.text } : {}),
    ...(r.data !== null ? { data: r.data } : {}),
    createdAt: r.created_at,
  }));
}

/**
 * Deltas of one LLM step published by producers before `(attempt, part)` after the step's last
 * rewind: the output a new attempt supersedes. Undefined when there is none.
 */
export async function supersededOutput(
  db: Kysely<Database>,
  streamId: string,
  stepKey: string,
  producer: { attempt: number; part: number },
): Promise<{ fromSeq: number; toSeq: number; chars: number } | undefined> {
  const lastRewind = await db
    .selectFrom('stream_events')
    .select((eb) => eb.fn.max('seq').as('seq'))
    .where('stream_id', '=', streamId)
    .where('step_key', '=', stepKey)
    .where('kind', '=', 'rewind')
    .executeTakeFirst();
  const row = await db
    .selectFrom('stream_events')
    .select((eb) => [
      eb.fn.min('seq').as('from_seq'),
      eb.fn.max('seq').as('to_seq'),
      sql<string | null>`sum(length(text))`.as('chars'),
    ])
    .where('stream_id', '=', streamId)
    .where('step_key', '=', stepKey)
    .where('kind', '=', 'delta')
    .where('seq', '>', lastRewind?.seq ?? 0)
    .where(sql<boolean>`(attempt, part) < (${producer.attempt}, ${producer.part})`)
    .executeTakeFirst();
  if (!row || row.from_seq === null) return undefined;
  return { fromSeq: Number(row.from_seq), toSeq: Number(row.to_seq), chars: Number(row.chars ?? 0) };
}

/**
 * Deletes stream rows older than `olderThan`, in batches of `batchSize` (short transactions, so a
 * large backlog never holds long locks), and heads idle since `headsOlderThan`. A client resuming a
 * pruned stream finds nothing before the cutoff; a head is kept much longer than its rows so a stream
 * that wakes up again keeps counting from where it was, and never reuses a sequence number.
 */
export async function pruneStreams(
  db: Kysely<Database>,
  options: { olderThan: Date; headsOlderThan: Date; batchSize: number; maxBatches: number },
): Promise<{ events: number; heads: number; more: boolean }> {
  let events = 0;
  for (let i = 0; i < options.maxBatches; i++) {
    const result = await sql`
      delete from stream_events where ctid in (
        select ctid from stream_events where created_at < ${options.olderThan} limit ${options.batchSize})`.execute(db);
    const deleted = Number(result.numAffectedRows ?? 0);
    events += deleted;
    if (deleted < options.batchSize) {
      const heads = await db
        .deleteFrom('stream_heads')
        .where('updated_at', '<', options.headsOlderThan)
        .executeTakeFirst();
      return { events, heads: Number(heads.numDeletedRows), more: false };
    }
  }
  return { events, heads: 0, more: true };
}
