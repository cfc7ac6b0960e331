import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { openDatabase, type DatabaseHandle } from '../../activities/store/db';
import { appendStreamEvents, readStreamEvents } from '../../activities/streams/store';
import { StepStreamPublisher } from '../../activities/streams/publisher';
import { createStreamActivities } from '../../activities/streams/stream-activities';
import { eventually } from '../support/eventually';
import { readTranscript, tailStream, transcriptText, type StreamEvent } from '../../client/streams';

/** Long enough that only a NOTIFY (not the fallback poll) can explain a prompt wake-up. */
const NO_POLL_MS = 60_000;

describe('run streams in PostgreSQL', () => {
  let h: DatabaseHandle;
  beforeAll(async () => {
    h = await openDatabase({ url: process.env.DATABASE_URL, poolSize: 5 });
  });
  afterAll(async () => h.close());

  const newStream = () => `test-${randomUUID()}`;

  test('concurrent writers get gap-free, ordered sequence numbers', async () => {
    const streamId = newStream();
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        appendStreamEvents(h.db, { streamId }, [
          { kind: 'event', data: { i } },
          { kind: 'event', data: { i } },
        ]),
      ),
    );
    const events = await readStreamEvents(h.db, streamId);
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    // Each writer's two events are adjacent: a batch is reserved as a block.
    for (let i = 0; i < 20; i += 2) expect(events[i]!.data).toEqual(events[i + 1]!.data);
  });

  test('a follower resumes after any sequence number and is woken by NOTIFY', async () => {
    const streamId = newStream();
    await appendStreamEvents(
      h.db,
      { streamId },
      ['a', 'b', 'c'].map((text) => ({ kind: 'delta' as const, stepKey: 's/1', text })),
    );
    const seen: StreamEvent[] = [];
    const follow = (async () => {
      for await (const e of tailStream({ db: h.db, connectionString: h.url }, streamId, {
        afterSeq: 1,
        pollIntervalMs: NO_POLL_MS,
      }))
        seen.push(e);
    })();
    await eventually(() => seen.length === 2, 'two events seen', 10_000);
    const writtenAt = Date.now();
    await appendStreamEvents(h.db, { streamId }, [
      { kind: 'delta', stepKey: 's/1', text: 'd' },
      { kind: 'end', data: {} },
    ]);
    await follow;
    expect(seen.map((e) => e.text ?? e.kind)).toEqual(['b', 'c', 'd', 'end']);
    expect(Date.now() - writtenAt).toBeLessThan(5_000);
  });

  test('a follower whose LISTEN connection is killed reconnects and misses nothing', async () => {
    const streamId = newStream();
    const seen: string[] = [];
    const follow = (async () => {
      for await (const e of tailStream({ db: h.db, connectionString: h.url }, streamId, { pollIntervalMs: NO_POLL_MS }))
        seen.push(e.text ?? e.kind);
    })();
    await appendStreamEvents(h.db, { streamId }, [{ kind: 'delta', stepKey: 's/1', text: 'before' }]);
    await eventually(() => seen.length === 1, 'one event seen', 10_000);
    const killed = await sql<{ n: number }>`
      select count(pg_terminate_backend(pid))::int as n from pg_stat_activity where query ilike 'LISTEN agent_progress%' and pid <> pg_backend_pid()`.execute(
      h.db,
    );
    expect(killed.rows[0]!.n).toBeGreaterThan(0);
    await appendStreamEvents(h.db, { streamId }, [
      { kind: 'delta', stepKey: 's/1', text: 'after' },
      { kind: 'end', data: {} },
    ]);
    await follow;
    expect(seen).toEqual(['before', 'after', 'end']);
  });

  test('a provider fallback mid-call rewinds the failed candidate’s text; a new attempt rewinds the old one', async () => {
    const streamId = newStream();
    const first = new StepStreamPublisher(h.db, { streamId }, 'sess/a1-t0', 1);
    first.callbacks.onAttemptStart!({ index: 0, provider: 'p1', model: 'm' });
    first.callbacks.onTextDelta!('from p1, cut off');
    await first.flush();
    first.callbacks.onAttemptStart!({ index: 1, provider: 'p2', model: 'm' });
    first.callbacks.onTextDelta!('from p2, also cut');
    await first.flush();
    // The worker died: Temporal's attempt 2 of the same step starts over.
    const second = new StepStreamPublisher(h.db, { streamId }, 'sess/a1-t0', 2);
    for (const piece of ['The ', 'final ', 'answer.']) second.callbacks.onTextDelta!(piece);
    await second.finish({ stopReason: 'end_turn' });

    const events = await readStreamEvents(h.db, streamId);
    expect(events.filter((e) => e.kind === 'rewind').map((e) => [e.attempt, e.part, e.data?.supersededChars])).toEqual([
      [1, 1, 'from p1, cut off'.length],
      [2, 0, 'from p2, also cut'.length],
    ]);
    expect(events.at(-1)!.kind).toBe('step-end');
    expect(transcriptText(await readTranscript(h.db, streamId))).toBe('The final answer.');
    expect(first.failures + second.failures).toBe(0);
  });

  test('step-start is held for the step’s first write: a reply that comes at once carries it, with its text, in the closing rows', async () => {
    const streamId = newStream();
    const publisher = new StepStreamPublisher(h.db, { streamId }, 'sess/a1-t0', 1, { sessionId: 'sess' });
    publisher.callbacks.onTextDelta!('Short ');
    publisher.callbacks.onTextDelta!('answer.');
    const closing = await publisher.closing({ stopReason: 'end_turn' });
    // Nothing was written on its own: the caller's statement writes all of it.
    expect(await readStreamEvents(h.db, streamId)).toEqual([]);
    expect(closing.events.map((e) => [e.kind, e.text ?? null])).toEqual([
      ['step-start', null],
      ['delta', 'Short answer.'],
      ['step-end', null],
    ]);
    await appendStreamEvents(h.db, closing.owner, closing.events);
    expect(transcriptText(await readTranscript(h.db, streamId))).toBe('Short answer.');
    expect(publisher.failures).toBe(0);
  });

  test('a step with no text yet writes its step-start (after a retry’s rewind) alone once the hold is over', async () => {
    const streamId = newStream();
    const first = new StepStreamPublisher(h.db, { streamId }, 'sess/a1-t0', 1);
    first.callbacks.onTextDelta!('cut off');
    await first.flush();
    const second = new StepStreamPublisher(h.db, { streamId }, 'sess/a1-t0', 2, { sessionId: 'sess' });
    const rows = await eventually(async () => {
      const events = await readStreamEvents(h.db, streamId);
      return events.length === 4 ? events : undefined;
    }, 'the retry’s held rows');
    expect(rows.map((e) => [e.kind, e.attempt])).toEqual([
      ['step-start', 1],
      ['delta', 1],
      ['rewind', 2],
      ['step-start', 2],
    ]);
    expect((await second.closing({})).events.map((e) => e.kind)).toEqual(['step-end']);
    expect(first.failures + second.failures).toBe(0);
  });

  test('pruning deletes rows past retention and keeps the rest', async () => {
    const oldStream = newStream();
    const freshStream = newStream();
    await appendStreamEvents(h.db, { streamId: oldStream }, [{ kind: 'event', data: {} }]);
    await appendStreamEvents(h.db, { streamId: freshStream }, [{ kind: 'event', data: {} }]);
    await h.db
      .updateTable('stream_events')
      .set({ created_at: sql`now() - interval '2 days'` } as never)
      .where('stream_id', '=', oldStream)
      .execute();
    const { pruneStreamEvents } = createStreamActivities({ db: h.db });
    const result = await pruneStreamEvents({});
    expect(result.events).toBeGreaterThanOrEqual(1);
    expect(await readStreamEvents(h.db, oldStream)).toEqual([]);
    expect(await readStreamEvents(h.db, freshStream)).toHaveLength(1);
    // The head stays (30 days): the stream never reuses a sequence number.
    const [next] = await appendStreamEvents(h.db, { streamId: oldStream }, [{ kind: 'event', data: {} }]);
    expect(next).toBe(2);
  });
});
