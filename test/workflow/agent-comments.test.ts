import { agentWorkflowId, ConversationClient } from '../../client/chat';
import type { RecordedRequest, ScriptedResponse } from '../fake-llm';
import { eventually } from '../support/eventually';
import { useHarness } from '../support/harness';
import { requestSystemText, requestToolNames } from '../support/requests';

const STEPS = 3;

describe('a comment on a running task', () => {
  const h = useHarness({
    worker: true,
    beforeClose: async () => {
      if (agentId)
        await h.temporal.workflow
          .getHandle(agentWorkflowId(agentId))
          .terminate('test finished')
          .catch(() => undefined);
    },
  });
  let agentId: string;

  test('gets a threaded answer (replyTo = the comment) while the round keeps working and sees it', async () => {
    h.llm.setResponder((r: RecordedRequest): ScriptedResponse => {
      const body = JSON.stringify(r.body.messages);
      if (body.includes('[COMMENT on task'))
        return {
          kind: 'message',
          content: [{ type: 'text', text: 'Thanks: I will add a summary.' }],
          stopReason: 'end_turn',
        };
      const done = (body.match(/"tool_result"/g) ?? []).length;
      if (done < STEPS) {
        return {
          kind: 'message',
          content: [{ type: 'tool_use', name: 'file_write', input: { path: `step-${done}.txt`, content: `${done}` } }],
          stopReason: 'tool_use',
          chunkDelayMs: 100,
        };
      }
      return {
        kind: 'message',
        content: [{ type: 'tool_use', name: 'task_submit_review', input: { summary: 'steps written' } }],
        stopReason: 'tool_use',
      };
    });
    agentId = await h.createAgent();
    const conv = new ConversationClient(h.client, { connectionString: h.db.url });
    const { taskId } = await h.client.startTask({ agentId, title: 'Write steps', description: 'write the steps' });
    await eventually(() => h.llm.requests.length >= 1, 'the first LLM request');
    const { itemId, channel } = await conv.deliver(agentId, {
      kind: 'comment',
      from: { type: 'human', id: 'ann' },
      taskId,
      text: 'please also add a summary',
    });
    expect(channel).toBe(`task:${taskId}`);

    await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);
    const answer = await eventually(
      async () => {
        const events = await h.client.events(taskId);
        return events.find((e) => e.type === 'comment-answered');
      },
      'the threaded answer',
      30_000,
    );
    expect(answer.data).toEqual({ replyTo: itemId, from: agentId, text: 'Thanks: I will add a summary.' });
    // The round saw the comment in a later turn, as before.
    const taskRequests = h.llm.requests.filter((r) => !JSON.stringify(r.body.messages).includes('[COMMENT on task'));
    // The answer ran in the comment_response scenario: its prompt section and tool set, not chat's.
    const answerRequests = h.llm.requests.filter((r) => JSON.stringify(r.body.messages).includes('[COMMENT on task'));
    expect(answerRequests).toHaveLength(1);
    expect(requestSystemText(answerRequests[0]!)).toContain('### Comment response');
    expect(requestSystemText(answerRequests[0]!)).not.toContain('### Chat');
    expect(requestToolNames(answerRequests[0]!)).toEqual(expect.arrayContaining(['task_comment', 'notify_user']));
    expect(requestToolNames(answerRequests[0]!)).not.toContain('file_write');
    expect(
      taskRequests.some((r) =>
        JSON.stringify(r.body.messages).includes('[COMMENT from human:ann] please also add a summary'),
      ),
    ).toBe(true);
    const item = (await conv.mailbox(agentId)).items.find((i) => i.itemId === itemId)!;
    expect(item).toMatchObject({ status: 'completed', result: 'seen by the running round; answered in the thread' });
  }, 90_000);
});
