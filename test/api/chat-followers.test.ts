import { freeLoopbackPort } from '../../activities/store/db';
import { readTranscript, transcriptText } from '../../client/streams';
import { agentWorkflowId, chatRunWorkflowId } from '../../workflows/agent-contract';
import { applyStreamEvent, emptyTranscript, type StreamEvent } from '../../workflows/stream-contract';
import { eventually } from '../support/eventually';
import { createHarness, type Harness } from '../support/harness';
import { startOwnPostgres, type OwnPostgres } from '../support/services';
import { readSse, startTestApi, type TestApi } from './api-support';

const ANSWER = 'This answer streams in many small pieces, slowly enough for things to go wrong under it.';
/** The fake model streams a piece this often: the answer takes a few seconds, long enough to break something mid-way. */
const SLOW_CHUNK_MS = 150;
/** The outage under a follower: long enough for its polls, the worker's writes and the step to fail and retry. */
const DATABASE_DOWN_MS = 4_000;
/** A follower that has not ended by then is waiting for ever (an answer here takes a few seconds). */
const FOLLOWER_LIMIT_MS = 60_000;

type Message = { id?: string; event?: string; data: any };

/**
 * Chat followers (SSE) that must end: with the whole answer, or with a clear `end` saying why there is
 * none. Every follower reads until the server ends the response. The harness runs on its own PostgreSQL
 * server, so one test can stop it (`pg_ctl -m immediate`) under a follower without touching the shared one.
 */
describe('HTTP API: every chat follower ends', () => {
  let pg: OwnPostgres;
  let h: Harness;
  let api: TestApi;
  let second: TestApi;

  beforeAll(async () => {
    pg = startOwnPostgres(await freeLoopbackPort());
    h = await createHarness({ databaseUrl: pg.url });
    await h.startWorker();
    api = await startTestApi(h);
    second = await startTestApi(h);
  }, 120_000);

  afterAll(async () => {
    try {
      const agents = await h.db.db.selectFrom('mailbox_items').select('agent_id').distinct().execute();
      for (const { agent_id } of agents)
        await h.temporal.workflow
          .getHandle(agentWorkflowId(agent_id))
          .terminate('test finished')
          .catch(() => undefined);
      await second.close();
      await api.close();
      await h.close();
    } finally {
      pg.close();
    }
  });

  /** Reads a follower to the end of its response; fails the test if it has not ended within FOLLOWER_LIMIT_MS. */
  const readToEnd = async (follower: ReturnType<typeof readSse>, seen: Message[] = []): Promise<Message[]> => {
    const deadline = Date.now() + FOLLOWER_LIMIT_MS;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`the follower did not end within ${FOLLOWER_LIMIT_MS} ms`);
      const m = await follower.next(left);
      if (!m) return seen;
      seen.push(m);
    }
  };

  const textOf = (messages: Message[]): string => {
    const transcript = emptyTranscript();
    for (const m of messages) if (m.data?.kind && m.id) applyStreamEvent(transcript, m.data as StreamEvent);
    return transcriptText(transcript);
  };

  const storedText = async (agentId: string, itemId: string) =>
    transcriptText(await readTranscript(h.db.db, chatRunWorkflowId(agentId, itemId)));

  const slowAnswer = (times = 1) => {
    for (let i = 0; i < times; i++)
      h.llm.enqueue({
        kind: 'message',
        content: [{ type: 'text', text: ANSWER }],
        stopReason: 'end_turn',
        chunkDelayMs: SLOW_CHUNK_MS,
      });
  };

  const postChat = (agentId: string) =>
    readSse(`${api.url}/v1/agents/${agentId}/chat`, api.tokens.service, {}, { body: { text: 'hello' } });

  test('a chat run stopped from outside: the follower ends with an `end` naming the dropped item, and so does a resume', async () => {
    const agentId = await h.createAgent();
    slowAnswer();
    const follower = postChat(agentId);
    const item = (await follower.next())!;
    expect(item).toMatchObject({ event: 'item', data: { itemId: expect.any(String) } });
    const seen: Message[] = [];
    while (!seen.some((m) => m.event === 'delta')) seen.push((await follower.next())!);
    // An operator terminates the run mid-answer: it writes nothing more, not even its `end`.
    await h.temporal.workflow
      .getHandle(chatRunWorkflowId(agentId, item.data.itemId))
      .terminate('stopped by an operator');

    await readToEnd(follower, seen);
    const end = seen.at(-1)!;
    expect(end).toMatchObject({
      event: 'end',
      data: { itemId: item.data.itemId, itemStatus: 'dropped' },
    });
    expect(end.data.error).toMatch(
      /^the agent dropped the message without an answer: failed: Child Workflow execution/,
    );
    expect(end.id).toBeUndefined();
    // The step that was running when its run was terminated may still append a few deltas until its
    // heartbeat learns the run is gone: wait until the stored text stops growing.
    let stored = await storedText(agentId, item.data.itemId);
    await eventually(async () => {
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const now = await storedText(agentId, item.data.itemId);
      const settled = now === stored;
      stored = now;
      return settled ? true : undefined;
    }, 'the terminated step to stop writing');
    expect(stored.startsWith(textOf(seen))).toBe(true);
    // A resume after the stop gets what was stored after its last id, then the same `end`.
    const resumed = readSse(`${second.url}/v1/agents/${agentId}/chat/${item.data.itemId}/stream`, second.tokens.read, {
      'last-event-id': seen.filter((m) => m.id).at(-1)!.id!,
    });
    const again = await readToEnd(resumed);
    expect(again.at(-1)).toEqual(end);
    expect(textOf(seen) + textOf(again)).toBe(stored);
  });

  test('a follower that connects after the answer ended, without Last-Event-ID, reads all of it and ends', async () => {
    const agentId = await h.createAgent();
    h.llm.enqueue({ kind: 'message', content: [{ type: 'text', text: ANSWER }], stopReason: 'end_turn' });
    const first = postChat(agentId);
    const item = (await first.next())!;
    const whole = await readToEnd(first);
    expect(whole.at(-1)).toMatchObject({ event: 'end', data: { data: { stoppedBy: 'answer' } } });

    const late = readSse(`${second.url}/v1/agents/${agentId}/chat/${item.data.itemId}/stream`, second.tokens.read);
    const replayed = await readToEnd(late);
    expect(replayed).toEqual(whole);
    expect(textOf(replayed)).toBe(ANSWER);
  });

  test('PostgreSQL stopped (immediate) under a follower mid-answer: it ends with the whole stored answer', async () => {
    const agentId = await h.createAgent();
    // The step's retry after the outage asks the model again.
    slowAnswer(3);
    const follower = postChat(agentId);
    const item = (await follower.next())!;
    const seen: Message[] = [];
    while (!seen.some((m) => m.event === 'delta')) seen.push((await follower.next())!);
    pg.stopImmediately();
    await new Promise((resolve) => setTimeout(resolve, DATABASE_DOWN_MS));
    pg.start();

    await readToEnd(follower, seen);
    expect(seen.at(-1)).toMatchObject({ event: 'end', data: { kind: 'end' } });
    const ids = seen.filter((m) => m.id).map((m) => Number(m.id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(ids.length);
    const stored = await eventually(() => storedText(agentId, item.data.itemId), 'the stored answer');
    expect(textOf(seen)).toBe(stored);
    expect(stored).toBe(ANSWER);
  });
});
