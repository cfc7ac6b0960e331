import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApiClients, followChat } from '../../scripts/chaos/load';
import { ConversationClient } from '../../client/chat';
import { readTranscript, transcriptText } from '../../client/streams';
import { agentWorkflowId, chatRunWorkflowId } from '../../workflows/agent-contract';
import { applyStreamEvent, emptyTranscript, type StreamEvent } from '../../workflows/stream-contract';
import { useHarness } from '../support/harness';
import { readSse, startTestApi, type TestApi } from './api-support';

const ANSWER = 'One answer to one message, however many times the message was sent.';

type Message = { id?: string; event?: string; data: any };

/**
 * The chat POST's `Idempotency-Key`: a client that lost a POST's answer sends it again with the same
 * key, on any API process, and gets the same item and its answer; the agent answers once. Two API
 * processes share the worker, Temporal and PostgreSQL.
 */
describe('HTTP API: chat with an Idempotency-Key', () => {
  const h = useHarness({
    worker: true,
    beforeClose: async () => {
      const agents = await h.db.db.selectFrom('mailbox_items').select('agent_id').distinct().execute();
      for (const { agent_id } of agents)
        await h.temporal.workflow
          .getHandle(agentWorkflowId(agent_id))
          .terminate('test finished')
          .catch(() => undefined);
      await second.close();
      await api.close();
    },
  });
  let api: TestApi;
  let second: TestApi;

  beforeAll(async () => {
    api = await startTestApi(h);
    second = await startTestApi(h);
  });

  /** One caller (one token, valid on both processes, which share the database) unless `token` says otherwise. */
  const post = (on: TestApi, agentId: string, text: string, headers: Record<string, string>, token?: string) =>
    readSse(`${on.url}/v1/agents/${agentId}/chat`, token ?? api.tokens.service, headers, { body: { text } });

  const readAll = async (follower: ReturnType<typeof readSse>): Promise<Message[]> => {
    const seen: Message[] = [];
    for (;;) {
      const m = await follower.next(60_000);
      if (!m) return seen;
      seen.push(m);
    }
  };

  const textOf = (messages: Message[]): string => {
    const transcript = emptyTranscript();
    for (const m of messages) if (m.data?.kind && m.id) applyStreamEvent(transcript, m.data as StreamEvent);
    return transcriptText(transcript);
  };

  /** The model requests whose conversation carries `text`: one per turn the agent took on it. */
  const turnsOn = (text: string) => h.llm.requests.filter((r) => JSON.stringify(r.body).includes(text)).length;

  const itemsOf = (agentId: string) =>
    h.db.db.selectFrom('mailbox_items').select(['id', 'text']).where('agent_id', '=', agentId).execute();

  const answer = () =>
    h.llm.enqueue({ kind: 'message', content: [{ type: 'text', text: ANSWER }], stopReason: 'end_turn' });

  test('a POST retried with the same key on the other API process gets the same item and answer; the agent answers once', async () => {
    const agentId = await h.createAgent();
    const text = `are you there? ${randomUUID()}`;
    const key = randomUUID();
    answer();
    const first = await readAll(post(api, agentId, text, { 'idempotency-key': key }));
    expect(first[0]).toMatchObject({ event: 'item', data: { itemId: expect.any(String), status: 'queued' } });
    expect(first[0]!.data.replayed).toBeUndefined();
    expect(first.at(-1)).toMatchObject({ event: 'end', data: { kind: 'end' } });
    expect(textOf(first)).toBe(ANSWER);

    // The client never saw that answer (say): it sends the same POST again, to the other process.
    const again = await readAll(post(second, agentId, text, { 'idempotency-key': key }));
    expect(again[0]).toEqual({
      event: 'item',
      data: { itemId: first[0]!.data.itemId, status: 'queued', channel: first[0]!.data.channel, replayed: true },
    });
    expect(again.slice(1)).toEqual(first.slice(1));
    // A replayed POST resumes after Last-Event-ID like the stream route.
    const lastDelta = first.filter((m) => m.event === 'delta').at(-1)!;
    const resumed = await readAll(post(api, agentId, text, { 'idempotency-key': key, 'last-event-id': lastDelta.id! }));
    expect(resumed.slice(1).map((m) => m.id)).toEqual(
      first.filter((m) => m.id && Number(m.id) > Number(lastDelta.id)).map((m) => m.id),
    );

    expect(await itemsOf(agentId)).toEqual([{ id: first[0]!.data.itemId, text }]);
    expect(turnsOn(text)).toBe(1);
    const stored = transcriptText(await readTranscript(h.db.db, chatRunWorkflowId(agentId, first[0]!.data.itemId)));
    expect(stored).toBe(ANSWER);
  });

  test('two POSTs with the same key at once, one per API process, make one item and one turn', async () => {
    const agentId = await h.createAgent();
    const text = `both at once ${randomUUID()}`;
    const key = randomUUID();
    answer();
    answer(); // a second turn, if one were started, would find an answer and be counted
    const [a, b] = await Promise.all([
      readAll(post(api, agentId, text, { 'idempotency-key': key })),
      readAll(post(second, agentId, text, { 'idempotency-key': key })),
    ]);
    expect(a[0]!.data.itemId).toBe(b[0]!.data.itemId);
    expect([a[0]!.data.replayed, b[0]!.data.replayed].filter(Boolean)).toEqual([true]);
    expect(textOf(a)).toBe(ANSWER);
    expect(textOf(b)).toBe(ANSWER);
    expect(await itemsOf(agentId)).toHaveLength(1);
    expect(turnsOn(text)).toBe(1);
    // The unused scripted answer must not leak into the next test.
    h.llm.reset();
  });

  test('the delivery contract: the agent itself answers a second delivery with the same idempotencyKey with the first item', async () => {
    const agentId = await h.createAgent();
    const conversations = new ConversationClient(h.client, {});
    const delivery = {
      kind: 'notification' as const,
      from: { type: 'system' as const, id: 'ci' },
      text: `build finished ${randomUUID()}`,
      idempotencyKey: randomUUID(),
    };
    // Past the API's own look-up: both reach the workflow, whose store step finds the first item.
    const first = await conversations.deliver(agentId, delivery);
    const [second, third] = await Promise.all([
      conversations.deliver(agentId, delivery),
      conversations.deliver(agentId, delivery),
    ]);
    expect(first.replayed).toBeUndefined();
    expect(second).toEqual({ ...first, replayed: true });
    expect(third).toEqual({ ...first, replayed: true });
    expect(await itemsOf(agentId)).toEqual([{ id: first.itemId, text: delivery.text }]);
    const mailbox = await conversations.mailbox(agentId);
    expect(mailbox.counters.delivered).toBe(1);
    await expect(conversations.deliver(agentId, { ...delivery, idempotencyKey: '' })).rejects.toThrow(
      /idempotencyKey must be a string of 1 to 600 characters/,
    );
  });

  test('the key reused for another message answers 422 and stores nothing; another caller or no key is a new message', async () => {
    const agentId = await h.createAgent();
    const text = `first message ${randomUUID()}`;
    const key = randomUUID();
    answer();
    const first = await readAll(post(api, agentId, text, { 'idempotency-key': key }));
    expect(textOf(first)).toBe(ANSWER);

    const reused = await api.call('POST', `/v1/agents/${agentId}/chat`, {
      token: api.tokens.service,
      headers: { 'idempotency-key': key },
      body: { text: 'a different message' },
    });
    expect(reused.status).toBe(422);
    expect(reused.body).toMatchObject({ error: { code: 'idempotency_key_reused' } });
    expect(reused.body.error.message).toContain(first[0]!.data.itemId);

    // The same key from another caller (the operator token has another name) is that caller's own.
    answer();
    const other = await readAll(post(api, agentId, text, { 'idempotency-key': key }, api.tokens.operator));
    expect(other[0]!.data.itemId).not.toBe(first[0]!.data.itemId);
    expect(other[0]!.data.replayed).toBeUndefined();
    expect(textOf(other)).toBe(ANSWER);

    for (const bad of ['', 'x'.repeat(256), 'has space']) {
      const malformed = await api.call('POST', `/v1/agents/${agentId}/chat`, {
        token: api.tokens.service,
        headers: { 'idempotency-key': bad },
        body: { text: 'hello' },
      });
      expect(malformed.status).toBe(400);
      expect(malformed.body.error.message).toMatch(/^Idempotency-Key must be 1 to 255 visible ASCII characters/);
    }
    expect((await itemsOf(agentId)).map((i) => i.text)).toEqual([text, text]);
  });
  test('the chaos follower: a POST cut after the message was stored is sent again with its key, and reads the one answer', async () => {
    const agentId = await h.createAgent();
    answer();
    answer(); // a second turn, if one were started, would find an answer and be counted
    // In front of the first API process: passes the POST on, and once the API has answered (the item is
    // stored and the stream open) drops both connections before a byte reaches the client.
    const cutter = http.createServer((req, res) => {
      const upstream = http.request(
        new URL(req.url!, api.url),
        { method: req.method, headers: req.headers },
        (answered) => {
          answered.destroy();
          res.socket?.destroy();
        },
      );
      upstream.on('error', () => res.socket?.destroy());
      req.pipe(upstream);
    });
    await new Promise<void>((resolve) => cutter.listen(0, '127.0.0.1', resolve));
    try {
      const cutUrl = `http://127.0.0.1:${(cutter.address() as AddressInfo).port}`;
      const clients = new ApiClients([cutUrl, second.url], api.tokens.service);
      const n = randomUUID();
      const followed = await followChat(clients, agentId, n, 60_000);

      expect(followed.connections[0]).toMatch(/^POST http:\/\/127\.0\.0\.1:\d+ \+0\.\d+s 0 0 frames error/);
      expect(followed.postRetries).toBe(1);
      expect(followed.ended).toBe(true);
      expect(followed.text).toBe(ANSWER);
      const items = await itemsOf(agentId);
      expect(items.map((i) => i.id)).toEqual([followed.itemId]);
      expect(turnsOn(`chaos chat ${n}`)).toBe(1);
    } finally {
      cutter.closeAllConnections();
      await new Promise((resolve) => cutter.close(resolve));
      h.llm.reset();
    }
  });
});
