import { A2A_THREAD_MESSAGE_BUDGET } from '../../activities/mailbox/send';
import { agentDmChannel, agentWorkflowId, ConversationClient, type ChatEvent } from '../../client/chat';
import type { RecordedRequest, ScriptedResponse } from '../fake-llm';
import { eventually } from '../support/eventually';
import { useHarness } from '../support/harness';
import { requestMessagesText, requestSystemText, requestToolNames } from '../support/requests';
import { randomUUID } from 'node:crypto';
import { submitTurn, textTurn, toolTurn } from '../support/harness';

describe('agents message each other', () => {
  const h = useHarness({
    worker: true,
    beforeClose: async () => {
      for (const id of started)
        await h.temporal.workflow
          .getHandle(agentWorkflowId(id))
          .terminate('test finished')
          .catch(() => undefined);
    },
  });
  let conv: ConversationClient;
  const started: string[] = [];
  beforeAll(async () => {
    conv = new ConversationClient(h.client, { connectionString: h.db.url });
  });

  test('agent_send_message reaches the other agent, who answers in its own run; a forced ping-pong stops at the thread’s budget', async () => {
    const alice = await h.createAgent();
    const bob = await h.createAgent();
    started.push(alice, bob);
    // Alice, asked by a human, messages Bob once; after that every model turn answers in text, so the two
    // agents would answer each other for ever without the budget.
    h.llm.setResponder((r: RecordedRequest): ScriptedResponse => {
      const body = JSON.stringify(r.body.messages);
      if (body.includes('ask bob') && !body.includes('tool_result') && !body.includes('tool_call_id')) {
        return {
          kind: 'message',
          content: [
            {
              type: 'tool_use',
              name: 'agent_send_message',
              input: { to: bob, text: 'Bob, what is the release date?' },
            },
          ],
          stopReason: 'tool_use',
        };
      }
      return {
        kind: 'message',
        content: [{ type: 'text', text: `reply #${h.llm.requests.length}` }],
        stopReason: 'end_turn',
      };
    });
    try {
      const events: ChatEvent[] = [];
      for await (const e of conv.chat(alice, 'please ask bob about the release', {
        from: { type: 'human', id: 'ann' },
      }))
        events.push(e);
      expect(events.find((e) => e.type === 'tool')).toMatchObject({ names: ['agent_send_message'] });

      const channel = agentDmChannel(alice, bob);
      const messages = await eventually(
        async () => {
          const rows = await h.db.db
            .selectFrom('mailbox_items')
            .selectAll()
            .where('channel', '=', channel)
            .orderBy('created_at')
            .execute();
          const idle =
            (await conv.mailbox(alice)).attention === 'idle' && (await conv.mailbox(bob)).attention === 'idle';
          return rows.length >= A2A_THREAD_MESSAGE_BUDGET && idle && rows.every((r) => r.status === 'completed')
            ? rows
            : undefined;
        },
        'the conversation to end',
        90_000,
      );

      expect(messages).toHaveLength(A2A_THREAD_MESSAGE_BUDGET);
      expect(messages[0]).toMatchObject({
        agent_id: bob,
        from_id: alice,
        text: 'Bob, what is the release date?',
        reply_to: null,
      });
      // One thread, strictly alternating, each a reply to the previous one.
      expect(new Set(messages.map((m) => m.thread_id))).toEqual(new Set([messages[0]!.id]));
      for (let i = 1; i < messages.length; i++) {
        expect(messages[i]!.agent_id).toBe(messages[i - 1]!.from_id);
        expect(messages[i]!.reply_to).toBe(messages[i - 1]!.id);
      }
      expect(messages.at(-1)!.result).toMatch(
        /reply not sent: the thread's reply budget \(8 agent messages\) is used up/,
      );
      // Bob answered in his own session for the DM channel.
      const bobSession = await h.db.db.selectFrom('sessions').select('id').where('agent_id', '=', bob).execute();
      expect(bobSession.map((s) => s.id)).toEqual([`channel_${channel}_${bob}`]);

      // Each answer ran in the a2a scenario (its prompt section and tool set), the human's chat in chat's.
      const a2a = h.llm.requests.filter((r) => requestMessagesText(r).includes('[MESSAGE from agent'));
      const chat = h.llm.requests.filter((r) => requestMessagesText(r).includes('ask bob'));
      expect(a2a).toHaveLength(A2A_THREAD_MESSAGE_BUDGET);
      for (const r of a2a) {
        expect(requestSystemText(r)).toContain('### Agent-to-agent message');
        expect(requestSystemText(r)).not.toContain('### Chat');
        // The sender's identity, in Tier 3.
        expect(requestSystemText(r)).toMatch(
          new RegExp(`This message is from .+ \\(agent[^)]*, id (${alice}|${bob})\\)\\.`),
        );
        expect(requestToolNames(r)).toEqual(
          expect.arrayContaining(['agent_send_message', 'agent_send_group_message', 'notify_user', 'task_create']),
        );
        expect(requestToolNames(r)).not.toContain('file_write');
        expect(requestToolNames(r)).not.toContain('edit_agent_file');
      }
      expect(chat.length).toBeGreaterThan(0);
      for (const r of chat) {
        expect(requestSystemText(r)).toContain('### Chat');
        expect(requestSystemText(r)).not.toContain('### Agent-to-agent message');
        expect(requestSystemText(r)).toContain('This message is from ann (human, id ann).');
        expect(requestToolNames(r)).toEqual(
          expect.arrayContaining(['file_write', 'agent_send_message', 'agent_send_group_message']),
        );
        expect(requestToolNames(r)).not.toContain('notify_user');
      }
    } finally {
      h.llm.setResponder(undefined);
    }
  }, 120_000);

  test('from a task round: agent_send_message names the task, and the colleague’s answer joins the running round (no separate a2a run)', async () => {
    const alice = await h.createAgent();
    const bob = await h.createAgent();
    started.push(alice, bob);
    const taskId = randomUUID();
    const fromBob = `[MESSAGE from agent ${bob} · item `;
    h.llm.setResponder((r: RecordedRequest): ScriptedResponse => {
      const messages = requestMessagesText(r);
      // Bob's a2a run: the message names its sender and Alice's task.
      if (messages.includes(`[MESSAGE from agent ${alice}`)) return textTurn('Staging listens on port 8443.');
      if (!messages.includes(`Task ID: ${taskId}`)) return textTurn('Summary: nothing to add.');
      if (messages.includes(fromBob)) return submitTurn('staging port confirmed by bob: 8443');
      if (!messages.includes('Message delivered to'))
        return toolTurn('agent_send_message', { to: bob, text: 'Bob, which port does staging use?' });
      // Meanwhile the round keeps working (slowly) until the answer arrives.
      return { ...toolTurn('file_read', { path: 'NOTES.md' }), chunkDelayMs: 200 };
    });
    try {
      await h.client.startTask({
        agentId: alice,
        taskId,
        title: 'Staging port',
        description: 'Find out which port staging uses; ask bob.',
      });
      await h.waitForStatus(taskId, (s) => s.state === 'review', 90_000);

      const taskRequests = h.llm.requests.filter((r) => requestMessagesText(r).includes(`Task ID: ${taskId}`));
      expect(requestToolNames(taskRequests[0]!)).toContain('agent_send_message');
      // Bob's copy names the task; his answer came back to Alice on the same thread, with the task.
      const [asked] = await h.db.db
        .selectFrom('mailbox_items')
        .selectAll()
        .where('agent_id', '=', bob)
        .where('from_id', '=', alice)
        .execute();
      expect(asked).toMatchObject({ kind: 'message', task_id: taskId, text: 'Bob, which port does staging use?' });
      const [answer] = await h.db.db
        .selectFrom('mailbox_items')
        .selectAll()
        .where('agent_id', '=', alice)
        .where('from_id', '=', bob)
        .execute();
      expect(answer).toMatchObject({
        kind: 'message',
        task_id: taskId,
        reply_to: asked!.id,
        thread_id: asked!.id,
        status: 'completed',
        result: `handed to the running round of task ${taskId}`,
      });
      // The round read it as a message it can answer with reply_to; Alice never ran an a2a run for it.
      const last = taskRequests.at(-1)!;
      // (the request's messages are JSON: the line break is escaped)
      expect(requestMessagesText(last)).toContain(`${fromBob}${answer!.id}]\\nStaging listens on port 8443.`);
      expect(requestMessagesText(last)).not.toContain(`[COMMENT from agent:${bob}]`);
      const aliceA2a = h.llm.requests.filter(
        (r) => requestSystemText(r).includes('### Agent-to-agent message') && requestMessagesText(r).includes(fromBob),
      );
      expect(aliceA2a).toEqual([]);
      const bobA2a = h.llm.requests.filter((r) =>
        requestMessagesText(r).includes(`[MESSAGE from agent ${alice} · item ${asked!.id} · about task ${taskId}]`),
      );
      expect(bobA2a).toHaveLength(1);
    } finally {
      h.llm.setResponder(undefined);
    }
  }, 120_000);
});
