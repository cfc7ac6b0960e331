import { randomUUID } from 'node:crypto';
import type { ScriptedResponse } from '../fake-llm';
import type { HeartbeatWorkflowResult } from '../../workflows/contract';
import { useHarness, submitTurn, textTurn, toolTurn } from '../support/harness';
import { eventually } from '../support/eventually';
import { bodyText, lastToolResults } from './task-support';

/**
 * The heartbeat's goal loop with its whole whitelist: a check-in sets a goal; the next one sees it as
 * an active goal, creates a task for a colleague and notifies a human; each check-in counts one
 * iteration; an idle check-in afterwards costs no LLM call at all.
 */
describe('heartbeat goals', () => {
  const h = useHarness();
  const heartbeatTurns: ScriptedResponse[] = [];
  const heartbeatRequests: string[] = [];
  beforeAll(async () => {
    h.llm.setResponder((request) => {
      const text = bodyText(request);
      // A colleague answering a heartbeat's message has nothing to add.
      if (text.includes('### Agent-to-agent message')) return textTurn('[NO_RESPONSE]');
      if (text.includes('[HEARTBEAT CHECK-IN]')) {
        heartbeatRequests.push(text);
        return heartbeatTurns.shift() ?? textTurn('HEARTBEAT_OK');
      }
      return Array.isArray(request.body.tools) && (request.body.tools as unknown[]).length
        ? submitTurn('drafted')
        : textTurn('ok');
    });
    await h.startWorker();
  });

  const heartbeat = (agentId: string, force: boolean): Promise<HeartbeatWorkflowResult> =>
    h.temporal.workflow.execute('heartbeatWorkflow', {
      workflowId: `hb-${agentId}-${randomUUID().slice(0, 8)}`,
      taskQueue: h.taskQueue,
      args: [{ agentId, force }],
    });

  test('a check-in with a due goal creates a task and notifies a human; an idle one costs 0 tokens', async () => {
    const agentId = await h.createAgent();
    const colleague = await h.createAgent();
    heartbeatTurns.push(
      toolTurn('goal_create', {
        title: 'Publish the release notes',
        criteria: 'the notes are published',
        max_iterations: 3,
      }),
      textTurn('Set a goal.'),
    );
    expect(await heartbeat(agentId, true)).toMatchObject({ outcome: 'acted', toolIterations: 1 });
    const [goal] = await h.db.db.selectFrom('goals').selectAll().where('agent_id', '=', agentId).execute();
    expect(goal).toMatchObject({
      title: 'Publish the release notes',
      status: 'active',
      current_iteration: 1,
      max_iterations: 3,
    });

    heartbeatTurns.push(
      toolTurn('task_create', { title: 'Draft the release notes', assignee: colleague, priority: 'high' }),
      toolTurn('notify_user', { message: 'Asked for a draft of the release notes.', title: 'Release notes' }),
      textTurn('Delegated the draft.'),
    );
    const before = heartbeatRequests.length;
    expect(await heartbeat(agentId, true)).toMatchObject({ outcome: 'acted', toolIterations: 2 });
    const prompt = heartbeatRequests[before]!;
    expect(prompt).toContain('## Active Goals');
    expect(prompt).toContain(
      `Publish the release notes [${goal!.id}] (active · iteration 1/3) — done when: the notes are published`,
    );
    const created = await h.db.db
      .selectFrom('tasks')
      .selectAll()
      .where('created_by', '=', `agent:${agentId}`)
      .execute();
    expect(created.map((t) => [t.title, t.agent_id, t.priority])).toEqual([
      ['Draft the release notes', colleague, 'high'],
    ]);
    const inbox = await h.db.db.selectFrom('notifications').selectAll().where('agent_id', '=', agentId).execute();
    expect(inbox.map((n) => [n.kind, n.title])).toEqual([['notification', 'Release notes']]);
    expect(
      (
        await h.db.db
          .selectFrom('goals')
          .select('current_iteration')
          .where('id', '=', goal!.id)
          .executeTakeFirstOrThrow()
      ).current_iteration,
    ).toBe(2);

    // Nothing changed since: the next check-in is skipped without an LLM call.
    const checkInsBefore = heartbeatRequests.length;
    expect(await heartbeat(agentId, false)).toMatchObject({ outcome: 'skipped', toolIterations: 0 });
    expect(heartbeatRequests.length).toBe(checkInsBefore);
    const calls = await h.db.db
      .selectFrom('llm_calls')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('agent_id', '=', agentId)
      .executeTakeFirstOrThrow();
    expect(Number(calls.n)).toBe(5); // the two check-ins that acted: 2 + 3 LLM calls, none for the skipped one

    // The third check-in that runs uses the goal's last iteration: it stops until its limit is raised.
    heartbeatTurns.push(toolTurn('goal_status', {}), textTurn('HEARTBEAT_OK'));
    await heartbeat(agentId, true);
    expect(
      await h.db.db
        .selectFrom('goals')
        .select(['status', 'current_iteration'])
        .where('id', '=', goal!.id)
        .executeTakeFirstOrThrow(),
    ).toEqual({ status: 'max_iterations', current_iteration: 3 });
    heartbeatTurns.push(toolTurn('goal_update', { goal_id: goal!.id, status: 'completed' }), textTurn('Done.'));
    await heartbeat(agentId, true);
    const last = h.llm.requests.filter((r) => bodyText(r).includes('[HEARTBEAT CHECK-IN]')).at(-1)!;
    expect(lastToolResults(last)[0]!.text).toContain('(completed · iteration 3/3)');
  });

  test('a check-in messages a colleague with agent_send_message: the colleague triages it in its mailbox', async () => {
    const agentId = await h.createAgent();
    const colleague = await h.createAgent();
    heartbeatTurns.push(
      toolTurn('agent_send_message', { to: colleague, text: 'Are the release notes on your list?' }),
      textTurn('Asked the colleague.'),
    );
    const before = heartbeatRequests.length;
    expect(await heartbeat(agentId, true)).toMatchObject({ outcome: 'acted', toolIterations: 1 });
    expect(JSON.parse(heartbeatRequests[before]!).tools.map((t: { name: string }) => t.name)).toContain(
      'agent_send_message',
    );
    const last = h.llm.requests.filter((r) => bodyText(r).includes('[HEARTBEAT CHECK-IN]')).at(-1)!;
    expect(lastToolResults(last)[0]!.text).toMatch(new RegExp(`^Message delivered to ${colleague} \\(item `));
    const items = await h.db.db
      .selectFrom('mailbox_items')
      .select(['kind', 'from_type', 'from_id', 'text'])
      .where('agent_id', '=', colleague)
      .execute();
    expect(items).toEqual([
      { kind: 'message', from_type: 'agent', from_id: agentId, text: 'Are the release notes on your list?' },
    ]);
    // The colleague's agent workflow picks it and answers in an a2a run (here: nothing to add, so no reply is sent).
    await eventually(
      async () => {
        const item = await h.db.db
          .selectFrom('mailbox_items')
          .select('status')
          .where('agent_id', '=', colleague)
          .executeTakeFirstOrThrow();
        return item.status === 'completed' || undefined;
      },
      "the colleague's a2a run to complete the item",
      30_000,
    );
    expect(await h.db.db.selectFrom('mailbox_items').select('id').where('agent_id', '=', agentId).execute()).toEqual(
      [],
    );
  });
});
