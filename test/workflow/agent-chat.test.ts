import { ConversationClient, DeliveryRejectedError, type ChatEvent } from '../../client/chat';
import { UnknownAgentError } from '../../client';
import { agentWorkflowId, channelSessionId, deliverUpdate } from '../../workflows/agent-contract';
import { MAILBOX_TEXT_MAX_CHARS } from '../../workflows/rules/mailbox';
import type { RecordedRequest } from '../fake-llm';
import { eventually } from '../support/eventually';
import { createHarness, useHarness, type Harness } from '../support/harness';

const FIRST_ANSWER = 'Hello Ann! I am listening, and this answer streams in small pieces.';
const SECOND_ANSWER = 'Yes, I remember: you said hello a moment ago.';

async function collect(events: AsyncIterable<ChatEvent>): Promise<ChatEvent[]> {
  const out: ChatEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}

/** Agent workflows live for ever: end the ones a test started, so the shared dev server stays tidy. */
async function endAgents(h: Harness): Promise<void> {
  const agents = await h.db.db.selectFrom('mailbox_items').select('agent_id').distinct().execute();
  for (const { agent_id } of agents)
    await h.temporal.workflow
      .getHandle(agentWorkflowId(agent_id))
      .terminate('test finished')
      .catch(() => undefined);
}

const lastUserText = (r: RecordedRequest): string => JSON.stringify(r.body.messages).slice(-400);

describe.each(['anthropic', 'openai'] as const)('chatting with an agent on %s', (provider) => {
  const h = useHarness({
    worker: true,
    provider,
    beforeClose: async () => {
      await endAgents(h);
    },
  });
  let conv: ConversationClient;
  beforeAll(async () => {
    conv = new ConversationClient(h.client, { connectionString: h.db.url });
  });

  test('deltas arrive in order, the answer is complete, and the next message reuses the channel’s session', async () => {
    const agentId = await h.createAgent();
    h.llm.enqueue(
      { kind: 'message', content: [{ type: 'text', text: FIRST_ANSWER }], stopReason: 'end_turn', chunkDelayMs: 10 },
      { kind: 'message', content: [{ type: 'text', text: SECOND_ANSWER }], stopReason: 'end_turn', chunkDelayMs: 10 },
    );
    const first = await collect(conv.chat(agentId, 'hello there', { from: { type: 'human', id: 'ann' } }));
    const deltas = first.filter((e): e is Extract<ChatEvent, { type: 'delta' }> => e.type === 'delta');
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.map((d) => d.seq)).toEqual([...deltas.map((d) => d.seq)].sort((a, b) => a - b));
    expect(deltas.map((d) => d.text).join('')).toBe(FIRST_ANSWER);
    expect(first.at(-1)).toMatchObject({ type: 'end', stoppedBy: 'answer' });

    const second = await collect(conv.chat(agentId, 'do you remember me?', { from: { type: 'human', id: 'ann' } }));
    expect(
      second
        .filter((e) => e.type === 'delta')
        .map((e) => (e as { text: string }).text)
        .join(''),
    ).toBe(SECOND_ANSWER);
    // The second request carries the first exchange: same session, only the new message added.
    const secondRequest = h.llm.requests.at(-1)!;
    const history = JSON.stringify(secondRequest.body.messages);
    expect(history).toContain('hello there');
    expect(history).toContain(FIRST_ANSWER);
    expect(lastUserText(secondRequest)).toContain('do you remember me?');
    const sessions = await h.db.db.selectFrom('sessions').select('id').where('agent_id', '=', agentId).execute();
    expect(sessions.map((s) => s.id)).toEqual([channelSessionId(`dm:human:ann`, agentId)]);

    // The stream ends just before the run reports back to the agent workflow.
    const mailbox = await eventually(async () => {
      const v = await conv.mailbox(agentId);
      return v.attention === 'idle' ? v : undefined;
    }, 'the agent to be idle');
    expect(mailbox.items.map((i) => [i.kind, i.status])).toEqual([
      ['chat', 'completed'],
      ['chat', 'completed'],
    ]);
  });
});

describe('the mailbox refuses bad input and triages by the seed’s rules', () => {
  let h: Harness;
  let conv: ConversationClient;
  beforeAll(async () => {
    h = await createHarness();
    await h.startWorker();
    conv = new ConversationClient(h.client, { connectionString: h.db.url });
  });
  afterAll(async () => {
    await endAgents(h);
    await h.close();
  });

  const countItems = async (agentId: string) =>
    (await h.db.db.selectFrom('mailbox_items').select('id').where('agent_id', '=', agentId).execute()).length;

  test('unknown agent, empty or oversized text, unknown channel or task: a clear error and nothing stored', async () => {
    await expect(
      conv.deliver('nobody-here', { kind: 'chat', from: { type: 'human', id: 'ann' }, text: 'hi' }),
    ).rejects.toThrow(UnknownAgentError);
    await expect(
      conv.deliver('nobody-here', { kind: 'chat', from: { type: 'human', id: 'ann' }, text: 'hi' }),
    ).rejects.toThrow(/unknown agent "nobody-here"/);

    const agentId = await h.createAgent();
    const human = { type: 'human' as const, id: 'ann' };
    await expect(conv.deliver(agentId, { kind: 'chat', from: human, text: '   ' })).rejects.toThrow(/text is empty/);
    await expect(
      conv.deliver(agentId, { kind: 'chat', from: human, text: 'x'.repeat(MAILBOX_TEXT_MAX_CHARS + 1) }),
    ).rejects.toThrow(/the limit is 32000/);
    // PostgreSQL cannot store a NUL: refused at once by the validator (it used to fail the write ten times, about a minute).
    const nulAt = Date.now();
    await expect(conv.deliver(agentId, { kind: 'chat', from: human, text: 'a\u0000b' })).rejects.toThrow(
      /text contains a NUL character \(U\+0000\)/,
    );
    expect(Date.now() - nulAt).toBeLessThan(10_000);
    await expect(
      conv.deliver(agentId, { kind: 'chat', from: human, text: 'hi', channel: 'room:team-1' }),
    ).rejects.toThrow(/unknown channel "room:team-1"/);
    await expect(
      conv.deliver(agentId, { kind: 'chat', from: human, text: 'hi', channel: 'group:team-1' }),
    ).rejects.toThrow(/unknown group "team-1"/);
    await expect(
      conv.deliver(agentId, { kind: 'chat', from: human, text: 'hi', channel: 'task:no-such-task' }),
    ).rejects.toThrow(DeliveryRejectedError);
    await expect(
      conv.deliver(agentId, { kind: 'chat', from: human, text: 'hi', channel: 'task:no-such-task' }),
    ).rejects.toThrow(/unknown task "no-such-task"/);
    // The workflow's own validator refuses what a raw Temporal client sends, before any history is written.
    const handle = h.temporal.workflow.getHandle(agentWorkflowId(agentId));
    await expect(
      handle.executeUpdate(deliverUpdate, { args: [{ kind: 'chat', from: human, text: '' }] }),
    ).rejects.toMatchObject({
      cause: { type: 'InvalidDelivery', message: expect.stringMatching(/text is empty/) },
    });
    expect(await countItems(agentId)).toBe(0);

    // A valid item afterwards is accepted: the refusals left the agent working.
    h.llm.enqueue({ kind: 'message', content: [{ type: 'text', text: 'ok' }], stopReason: 'end_turn' });
    const events = await collect(conv.chat(agentId, 'still there?', { from: human }));
    expect(events.at(-1)).toMatchObject({ type: 'end', stoppedBy: 'answer' });
    expect(await countItems(agentId)).toBe(1);
  });

  test('an urgent chat preempts an agent message, a low item waits, a duplicate message is merged, and all are handled', async () => {
    const agentId = await h.createAgent();
    let hungOnce = false;
    h.llm.setResponder((r) => {
      const body = JSON.stringify(r.body.messages);
      if (body.includes('PING FROM BOB') && !hungOnce) {
        hungOnce = true;
        return { kind: 'hang' };
      }
      return {
        kind: 'message',
        content: [{ type: 'text', text: `answered ${r.body.messages ? 'ok' : ''}` }],
        stopReason: 'end_turn',
      };
    });
    try {
      const bob = { type: 'agent' as const, id: 'bob' };
      const message = await conv.deliver(agentId, {
        kind: 'message',
        from: bob,
        text: 'PING FROM BOB',
        channel: 'dm:a2a:bob',
      });
      await eventually(
        async () => ((await conv.mailbox(agentId)).focus?.itemId === message.itemId ? true : undefined),
        'the message to be in focus',
      );
      await eventually(() => hungOnce, 'the message’s LLM call');

      const low = await conv.deliver(agentId, {
        kind: 'notification',
        from: { type: 'system', id: 'ci' },
        text: 'nightly build green',
        priority: 'low',
      });
      const queuedMessage = await conv.deliver(agentId, {
        kind: 'message',
        from: bob,
        text: 'second note from bob',
        channel: 'dm:a2a:bob',
      });
      const duplicate = await conv.deliver(agentId, {
        kind: 'message',
        from: bob,
        text: 'third note from bob',
        channel: 'dm:a2a:bob',
      });
      expect(duplicate).toMatchObject({ status: 'merged', mergedInto: queuedMessage.itemId });

      const urgent = await conv.deliver(agentId, {
        kind: 'chat',
        from: { type: 'human', id: 'ann' },
        text: 'urgent: stop and answer me',
      });
      let view = await conv.mailbox(agentId);
      const byId = (id: string) => view.items.find((i) => i.itemId === id)!;
      expect(byId(low.itemId)).toMatchObject({ decision: 'wait', priority: 3 });
      expect(byId(urgent.itemId)).toMatchObject({
        decision: 'preempt',
        reason: expect.stringMatching(/^R1: preempts message/),
      });
      expect(byId(duplicate.itemId)).toMatchObject({ status: 'merged', decision: 'merge' });
      expect(byId(queuedMessage.itemId).mergedCount).toBe(1);

      view = await eventually(
        async () => {
          const v = await conv.mailbox(agentId);
          return v.attention === 'idle' && v.items.every((i) => ['completed', 'merged'].includes(i.status))
            ? v
            : undefined;
        },
        'every item handled',
        60_000,
      );
      expect(view.counters).toMatchObject({ preempted: 1, merged: 1 });
      // Order of handling: the urgent chat before the preempted message (picked again) and the low item last.
      const rows = await h.db.db
        .selectFrom('mailbox_items')
        .select(['id', 'status', 'updated_at', 'text'])
        .where('agent_id', '=', agentId)
        .execute();
      const doneAt = (id: string) => rows.find((r) => r.id === id)!.updated_at.getTime();
      expect(doneAt(urgent.itemId)).toBeLessThan(doneAt(message.itemId));
      expect(doneAt(message.itemId)).toBeLessThan(doneAt(low.itemId));
      expect(rows.find((r) => r.id === queuedMessage.itemId)!.text).toBe(
        'second note from bob\n\n---\n\nthird note from bob',
      );
    } finally {
      h.llm.setResponder(undefined);
    }
  });
});
