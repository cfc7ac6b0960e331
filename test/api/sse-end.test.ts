import { EventSource } from 'eventsource';
import { agentWorkflowId } from '../../workflows/agent-contract';
import { eventually } from '../support/eventually';
import { useHarness, submitTurn } from '../support/harness';
import { ScriptedAgents } from '../workflow/task-support';
import { readSse, startTestApi, type TestApi } from './api-support';

/**
 * The end of a stream, as a standard EventSource client sees it (the `eventsource` npm package, which
 * follows the WHATWG rules): after a finished stream's last event it reconnects once, gets 204 and
 * stops for good, instead of reconnecting every `retry` interval forever. A resume at or past a chat
 * answer's end answers at once.
 */
describe('HTTP API: streams that have ended', () => {
  const h = useHarness({
    beforeClose: async () => {
      const rows = await h.db.db.selectFrom('mailbox_items').select('agent_id').distinct().execute();
      for (const { agent_id } of rows)
        await h.temporal.workflow
          .getHandle(agentWorkflowId(agent_id))
          .terminate('test finished')
          .catch(() => undefined);
      await api.close();
    },
  });
  let api: TestApi;
  let agents: ScriptedAgents;

  beforeAll(async () => {
    agents = new ScriptedAgents(h.llm);
    await h.startWorker();
    api = await startTestApi(h);
  });

  /** An EventSource with the API token that records every connection's status and every message. */
  const openEventSource = (url: string) => {
    const statuses: number[] = [];
    const messages: Array<{ type: string; lastEventId: string; data: string }> = [];
    const source = new EventSource(url, {
      fetch: async (input, init) => {
        const response = await fetch(input, {
          ...init,
          headers: { ...init.headers, authorization: `Bearer ${api.tokens.read}` },
        });
        statuses.push(response.status);
        return response;
      },
    });
    const record = (e: MessageEvent) =>
      messages.push({ type: e.type, lastEventId: e.lastEventId, data: String(e.data) });
    for (const type of ['message', 'end', 'step-start', 'delta', 'step-end', 'rewind'])
      source.addEventListener(type, record);
    return { source, statuses, messages };
  };

  test('a finished task stream: an EventSource reads it to the end, reconnects once, gets 204 and stops', async () => {
    const agentId = await h.createAgent();
    const taskId = agents.task([submitTurn('nothing to do')]);
    await api.call('POST', '/v1/tasks', { token: api.tokens.service, body: { agentId, taskId, title: 'Quick' } });
    await eventually(
      async () =>
        (await api.call('GET', `/v1/tasks/${taskId}`, { token: api.tokens.read })).body.state === 'review' || undefined,
      'the task in review',
    );
    expect((await api.call('POST', `/v1/tasks/${taskId}/cancel`)).status).toBe(202);
    await eventually(
      async () =>
        (await api.call('GET', `/v1/tasks/${taskId}`, { token: api.tokens.read })).body.state === 'cancelled' ||
        undefined,
      'the task cancelled',
    );
    const events = openEventSource(`${api.url}/v1/tasks/${taskId}/events`);
    let stored: Array<{ seq: number }> = [];
    try {
      await eventually(() => events.source.readyState === EventSource.CLOSED, 'the EventSource to stop');
      // Read after the stream ended: a finished task may still log an event or two after its state changed.
      stored = (await api.call('GET', `/v1/tasks/${taskId}/events`, { token: api.tokens.read })).body.events;
      // One connection with every event and `end`, then one reconnect answered 204.
      expect(events.statuses).toEqual([200, 204]);
      expect(events.messages.filter((m) => m.type === 'message').map((m) => Number(m.lastEventId))).toEqual(
        stored.map((e) => e.seq),
      );
      expect(events.messages.at(-1)?.type).toBe('end');
    } finally {
      events.source.close();
    }

    // The same for the text stream: everything, `end`, then 204.
    const text = openEventSource(`${api.url}/v1/tasks/${taskId}/deltas`);
    try {
      await eventually(() => text.source.readyState === EventSource.CLOSED, 'the text EventSource to stop');
      expect(text.statuses).toEqual([200, 204]);
      expect(text.messages.at(-1)?.type).toBe('end');
    } finally {
      text.source.close();
    }
    // A resume after the last event, by hand: 204 with no body.
    const last = await fetch(`${api.url}/v1/tasks/${taskId}/events`, {
      headers: {
        authorization: `Bearer ${api.tokens.read}`,
        accept: 'text/event-stream',
        'last-event-id': String(stored.at(-1)!.seq),
      },
    });
    expect([last.status, await last.text()]).toEqual([204, '']);
  });

  test('a chat answer: a resume at or past its end answers 204 at once; an EventSource stops after end', async () => {
    const agentId = await h.createAgent();
    h.llm.enqueue({ kind: 'message', content: [{ type: 'text', text: 'A short answer.' }], stopReason: 'end_turn' });
    const chat = readSse(`${api.url}/v1/agents/${agentId}/chat`, api.tokens.service, {}, { body: { text: 'hello' } });
    const item = (await chat.next())!;
    let end: { id?: string; event?: string } | undefined;
    for (let m = await chat.next(); m; m = await chat.next()) if (m.event === 'end') end = m;
    expect(end?.id).toMatch(/^\d+$/);
    const url = `${api.url}/v1/agents/${agentId}/chat/${item.data.itemId}/stream`;

    for (const after of [Number(end!.id), Number(end!.id) + 5]) {
      const started = Date.now();
      const resumed = await fetch(url, {
        headers: {
          authorization: `Bearer ${api.tokens.read}`,
          accept: 'text/event-stream',
          'last-event-id': String(after),
        },
        signal: AbortSignal.timeout(5_000),
      });
      expect([resumed.status, await resumed.text()]).toEqual([204, '']);
      expect(Date.now() - started).toBeLessThan(2_000);
    }

    const source = openEventSource(url);
    try {
      await eventually(() => source.source.readyState === EventSource.CLOSED, 'the chat EventSource to stop');
      expect(source.statuses).toEqual([200, 204]);
      expect(source.messages.at(-1)).toMatchObject({ type: 'end', lastEventId: end!.id });
    } finally {
      source.source.close();
    }
  });
});
