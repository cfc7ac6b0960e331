import { agentWorkflowId } from '../../workflows/agent-contract';
import { eventually } from '../support/eventually';
import { useHarness } from '../support/harness';
import { readSse, startTestApi, type TestApi } from './api-support';

const ANSWER = 'Hello! I am listening, and this answer streams to you in many small pieces.';

/**
 * Chat over HTTP: POST a message, read the answer as SSE from the chat run's stored stream, cut the
 * connection mid-answer and resume on another API process with Last-Event-ID (no gap, no duplicate),
 * then see the item in the mailbox, sent from the token's name.
 */
describe('HTTP API: chat and mailbox', () => {
  const h = useHarness({
    worker: true,
    beforeClose: async () => {
      const agents = await h.db.db.selectFrom('mailbox_items').select('agent_id').distinct().execute();
      for (const { agent_id } of agents)
        await h.temporal.workflow
          .getHandle(agentWorkflowId(agent_id))
          .terminate('test finished')
          .catch(() => undefined);
      await api.close();
    },
  });
  let api: TestApi;

  beforeAll(async () => {
    api = await startTestApi(h);
  });

  test('the answer streams, resumes on another API process after a cut, and the mailbox shows the item from the token', async () => {
    const agentId = await h.createAgent();
    // This API's service token (created last so far): the sender `from` defaults to.
    const serviceName = (
      await h.db.db
        .selectFrom('api_tokens')
        .select('name')
        .where('scope', '=', 'service')
        .orderBy('created_at', 'desc')
        .executeTakeFirstOrThrow()
    ).name;
    const empty = await api.call('GET', `/v1/agents/${agentId}/mailbox`, { token: api.tokens.read });
    expect(empty).toMatchObject({ status: 200, body: { agentId, attention: 'idle', items: [] } });
    h.llm.enqueue({
      kind: 'message',
      content: [{ type: 'text', text: ANSWER }],
      stopReason: 'end_turn',
      chunkDelayMs: 15,
    });

    const first = readSse(
      `${api.url}/v1/agents/${agentId}/chat`,
      api.tokens.service,
      {},
      { body: { text: 'hello there' } },
    );
    const item = (await first.next())!;
    expect(item).toMatchObject({ event: 'item', data: { itemId: expect.any(String), status: 'queued' } });
    const seen: Array<{ id?: string; event?: string; data: any }> = [];
    while (!seen.some((m) => m.event === 'delta')) seen.push((await first.next())!);
    first.close();

    const other = await startTestApi(h);
    try {
      const resumed = readSse(`${other.url}/v1/agents/${agentId}/chat/${item.data.itemId}/stream`, other.tokens.read, {
        'last-event-id': seen.at(-1)!.id!,
      });
      for (let m = await resumed.next(); m; m = await resumed.next()) seen.push(m);
    } finally {
      await other.close();
    }
    for (const m of seen) expect(m.id).toBe(String(m.data.seq));
    expect(seen.map((m) => m.data.seq)).toEqual(seen.map((_, i) => i + 1));
    expect(
      seen
        .filter((m) => m.event === 'delta')
        .map((m) => m.data.text)
        .join(''),
    ).toBe(ANSWER);
    expect(seen.at(-1)).toMatchObject({ event: 'end', data: { data: { stoppedBy: 'answer' } } });

    const mailbox = await eventually(async () => {
      const m = await api.call('GET', `/v1/agents/${agentId}/mailbox`, { token: api.tokens.read });
      return m.body.attention === 'idle' && m.body.items.length === 1 ? m.body : undefined;
    }, 'the agent to be idle with the item');
    expect(mailbox.items[0]).toMatchObject({
      itemId: item.data.itemId,
      kind: 'chat',
      status: 'completed',
      from: { type: 'human', id: serviceName },
      channel: `dm:human:${serviceName}`,
    });
  });
});
