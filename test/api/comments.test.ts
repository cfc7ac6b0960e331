import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { agentWorkflowId } from '../../client/chat';
import type { ScriptedResponse } from '../fake-llm';
import { eventually } from '../support/eventually';
import { useHarness } from '../support/harness';
import { requestMessagesText } from '../support/requests';
import { startTestApi, type TestApi } from './api-support';

const run = promisify(execFile);
const text = (t: string): ScriptedResponse => ({
  kind: 'message',
  content: [{ type: 'text', text: t }],
  stopReason: 'end_turn',
});

/**
 * A person's comment routes @mentions the same way whichever door it came in by: the HTTP API, the CLI
 * or the client library (one implementation): the assignee answers in the thread, and so does each
 * agent mentioned, with the same events.
 */
describe("a person's task comment with an @mention", () => {
  const h = useHarness({
    worker: true,
    beforeClose: async () => {
      h.llm.setResponder(undefined);
      for (const id of [assignee, tester])
        await h.temporal.workflow
          .getHandle(agentWorkflowId(id))
          .terminate('test finished')
          .catch(() => undefined);
      await api.close();
    },
  });
  let api: TestApi;
  let assignee: string;
  let tester: string;
  beforeAll(async () => {
    api = await startTestApi(h);
    h.llm.setResponder((r) => {
      const body = requestMessagesText(r);
      if (body.includes('[MENTION in a comment')) return text('tester looked');
      if (body.includes('[COMMENT on task')) return text('assignee noted');
      return {
        kind: 'message',
        content: [{ type: 'tool_use', name: 'task_submit_review', input: { summary: 'done' } }],
        stopReason: 'tool_use',
      };
    });
    assignee = await h.createAgent();
    tester = await h.createAgent();
  });

  /** Comments this door made on a fresh task, and what followed: the mention items and the threaded answers. */
  async function commentThrough(door: (taskId: string, text: string) => Promise<{ mentioned: string[] }>) {
    const { taskId } = await h.client.startTask({ agentId: assignee, title: 'Ship it', description: 'ship it' });
    await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);
    const { mentioned } = await door(taskId, `@${tester} please check this`);
    const answers = await eventually(
      async () => {
        const events = (await h.client.events(taskId)).filter((e) => e.type === 'comment-answered');
        return events.length >= 2 ? events : undefined;
      },
      'two threaded answers',
      60_000,
    );
    const mentions = await h.db.db
      .selectFrom('mailbox_items')
      .select(['agent_id', 'from_type', 'from_id', 'channel'])
      .where('kind', '=', 'mention')
      .where('task_id', '=', taskId)
      .execute();
    return { taskId, mentioned, answers: answers.map((e) => [e.data.from, e.data.text]).sort(), mentions };
  }

  test('POST /v1/tasks/:id/comments, `agents task comment` and AgentsClient.comment each route it to the mentioned agent', async () => {
    const viaApi = await commentThrough(async (taskId, body) => {
      const response = await api.call('POST', `/v1/tasks/${taskId}/comments`, {
        token: api.tokens.service,
        body: { text: body },
      });
      expect(response.status).toBe(202);
      expect(response.body).toEqual({ ok: true, itemId: expect.any(String), mentioned: [tester] });
      return response.body;
    });
    const viaCli = await commentThrough(async (taskId, body) => {
      const { stdout } = await run(
        process.execPath,
        [require.resolve('tsx/cli'), 'client/cli.ts', 'task', 'comment', taskId, body],
        {
          env: { ...process.env, DATABASE_URL: h.db.url, TEMPORAL_TASK_QUEUE: h.taskQueue, USER: 'cli-person' },
          timeout: 60_000,
        },
      );
      expect(stdout).toMatch(new RegExp(`^comment \\S+ sent; mentioned: ${tester}$`, 'm'));
      return { mentioned: [tester] };
    });
    const viaClient = await commentThrough((taskId, body) => h.client.comment(taskId, body, 'lib-person'));

    const expected = [
      [assignee, 'assignee noted'],
      [tester, 'tester looked'],
    ].sort();
    for (const [door, outcome, author] of [
      ['api', viaApi, api.tokenNames.service],
      ['cli', viaCli, 'cli-person'],
      ['client', viaClient, 'lib-person'],
    ] as const) {
      expect([door, outcome.mentioned]).toEqual([door, [tester]]);
      expect([door, outcome.answers]).toEqual([door, expected]);
      expect([door, outcome.mentions]).toEqual([
        door,
        [{ agent_id: tester, from_type: 'human', from_id: author, channel: `task:${outcome.taskId}` }],
      ]);
    }
  }, 240_000);
});
