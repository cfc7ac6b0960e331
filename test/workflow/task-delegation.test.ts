import { randomUUID } from 'node:crypto';
import type { RecordedRequest, ScriptedResponse } from '../fake-llm';
import { TaskAdmin, TaskAdminError } from '../../client/task-admin';
import { runTaskAdminCommand } from '../../client/task-admin-commands';
import { useHarness, submitTurn, textTurn, toolTurn } from '../support/harness';
import { parameterNames, unofferedToolNames } from '../support/tool-mentions';
import { toolsForScenario } from '../../activities/tools/registry';
import { bodyText, isReflection, lastToolResults, offersTools } from './task-support';
import { eventually } from '../support/eventually';
import { Worker } from '@temporalio/worker';
import { taskWorkflowId } from '../../workflows/contract';

/**
 * Agents that delegate, on the real Temporal server and PostgreSQL with the fake provider: a lead
 * agent breaks its task into three subtasks for a worker agent, two of them dependent; they unblock in
 * order as each completes, and cancelling the parent stops them all. Also the approval gate for
 * agent-created tasks, bad input (unknown assignee, dependency cycle) and the notification inbox.
 */
describe('task delegation', () => {
  const h = useHarness();
  let admin: TaskAdmin;
  let lead: string;
  let worker: string;
  let gatedLead: string;
  /** A scripted agent per task title (other tasks submit at once); the task prompt names the task, so scripts need no ids up front. */
  const scripts = new Map<
    string,
    (turn: { request: RecordedRequest; index: number; taskId: string }) => ScriptedResponse
  >();
  const seen = new Map<string, number>();
  const requests: RecordedRequest[] = [];

  const TASK_PROMPT = /\[TASK EXECUTION — Task ID: ([^\]\s]+)\]\\n\\n# ([^\\]+)/;
  const createdId = (r: RecordedRequest): string => {
    const text = lastToolResults(r)[0]?.text ?? '';
    const id = /task ([0-9a-f-]{36})/.exec(text)?.[1];
    if (!id) throw new Error(`no task id in the last tool result: ${text}`);
    return id;
  };

  beforeAll(async () => {
    admin = new TaskAdmin(h.temporal, h.db.db, { taskQueue: h.taskQueue });
    lead = await h.createAgent();
    worker = await h.createAgent();
    gatedLead = await h.createAgent({ tasksNeedApproval: true });
    h.llm.setResponder((request) => {
      requests.push(request);
      if (isReflection(request) || !offersTools(request)) return textTurn('Nothing to add.');
      const text = bodyText(request);
      if (text.includes('[HEARTBEAT CHECK-IN]')) {
        const index = seen.get('heartbeat') ?? 0;
        seen.set('heartbeat', index + 1);
        return heartbeatScript[index] ?? textTurn('HEARTBEAT_OK');
      }
      const match = TASK_PROMPT.exec(JSON.stringify(request.body.messages ?? ''));
      if (!match) return { kind: 'error', status: 400, message: 'no task prompt' };
      const [, taskId, title] = match as unknown as [string, string, string];
      const script = scripts.get(title);
      if (!script) return submitTurn(`done: ${title}`); // the worker's subtasks: done at once
      const index = seen.get(taskId) ?? 0;
      seen.set(taskId, index + 1);
      return script({ request, index, taskId });
    });
    await h.startWorker();
  });

  /** The lead's plan: Design, then Build after Design, then Test after Build. */
  function planScript(prefix: string) {
    scripts.set(`${prefix} export`, ({ request, index, taskId }) => {
      switch (index) {
        case 0:
          return toolTurn('task_create', {
            title: `${prefix} design`,
            assignee: worker,
            parent_task_id: taskId,
            priority: 'high',
          });
        case 1:
          return toolTurn('task_create', {
            title: `${prefix} build`,
            assignee: worker,
            parent_task_id: taskId,
            depends_on: [createdId(request)],
          });
        case 2:
          return toolTurn('task_create', {
            title: `${prefix} test`,
            assignee: worker,
            parent_task_id: taskId,
            depends_on: [createdId(request)],
          });
        case 3:
          return toolTurn('task_list', { scope: 'created' });
        default:
          return submitTurn('Planned the work as three subtasks.');
      }
    });
  }

  async function subtasksOf(parentId: string, count = 3) {
    return eventually(async () => {
      const rows = await h.db.db
        .selectFrom('tasks')
        .selectAll()
        .where('parent_task_id', '=', parentId)
        .orderBy('created_at')
        .execute();
      return rows.length === count ? rows : undefined;
    }, `${count} subtasks of ${parentId}`);
  }

  const stateOf = async (taskId: string) =>
    (await h.db.db.selectFrom('tasks').select('state').where('id', '=', taskId).executeTakeFirstOrThrow()).state;

  /** Each task workflow's latest run replays whole on this code, as a worker restart or a query on a closed task makes it. */
  async function expectWholeReplays(taskIds: string[]): Promise<void> {
    for (const taskId of taskIds) {
      const history = await h.temporal.workflow.getHandle(taskWorkflowId(taskId)).fetchHistory();
      await expect(
        Worker.runReplayHistory({ workflowBundle: { codePath: process.env.TEST_WORKFLOW_BUNDLE! } }, history),
      ).resolves.toBeUndefined();
    }
  }

  test('a parent with three subtasks, two dependent: they unblock in order as each completes', async () => {
    planScript('CSV');
    const parent = randomUUID();
    await h.client.startTask({
      agentId: lead,
      taskId: parent,
      title: 'CSV export',
      description: 'Ship the CSV export.',
    });
    const [design, build, check] = await subtasksOf(parent);
    expect([design!.title, build!.title, check!.title]).toEqual(['CSV design', 'CSV build', 'CSV test']);
    expect([design!.agent_id, design!.created_by, design!.priority]).toEqual([worker, `agent:${lead}`, 'high']);

    await h.waitForStatus(parent, (s) => s.state === 'review');
    await h.waitForStatus(design!.id, (s) => s.state === 'review');
    const blockedBuild = await h.waitForStatus(build!.id, (s) => s.state === 'blocked');
    expect(blockedBuild.lastError).toContain(`waiting for ${design!.id} (`);
    await h.waitForStatus(check!.id, (s) => s.state === 'blocked');
    // task_list showed the lead what it created, by priority.
    const listResult = lastToolResults(requests.filter((r) => bodyText(r).includes(`Task ID: ${parent}`)).at(-1)!)[0]!
      .text;
    expect(listResult.split('\n')[0]).toContain('[high] CSV design');

    await h.client.review(design!.id, { decision: 'accept' });
    await h.waitForStatus(build!.id, (s) => s.state === 'review');
    expect(await stateOf(check!.id)).toBe('blocked');
    await h.client.review(build!.id, { decision: 'accept' });
    await h.waitForStatus(check!.id, (s) => s.state === 'review');
    await h.client.review(check!.id, { decision: 'accept' });
    await h.waitForStatus(check!.id, (s) => s.state === 'completed');

    // In order: each dependant started only after its dependency completed.
    const at = async (taskId: string, state: string) => {
      const events = await h.db.db
        .selectFrom('task_events')
        .select(['data', 'created_at'])
        .where('task_id', '=', taskId)
        .where('type', '=', 'state-changed')
        .execute();
      return events.find((e) => e.data.state === state)!.created_at.getTime();
    };
    expect(await at(build!.id, 'in_progress')).toBeGreaterThanOrEqual(await at(design!.id, 'completed'));
    expect(await at(check!.id, 'in_progress')).toBeGreaterThanOrEqual(await at(build!.id, 'completed'));

    // A dependant opens with a local activity and then reads its gates behind a patch: a patch marker
    // follows a local activity's marker in one workflow task, and the history still replays whole.
    await expectWholeReplays([parent, design!.id, build!.id, check!.id]);

    // What a human sees with `agents task tree <parent>`: the subtasks indented, each with what it waits for.
    const tree = await runTaskAdminCommand(admin, { action: 'tree', taskId: parent });
    expect(tree).toHaveLength(4);
    expect(tree[2]).toMatch(
      new RegExp(`^  ${build!.id}  \\[medium\\] completed +${worker}  CSV build  \\(after ${design!.id} completed\\)$`),
    );

    // Every prompt sent in this delegation named only tools offered in that very call.
    for (const request of requests.filter(offersTools)) {
      const offered = new Set(((request.body.tools as Array<{ name: string }>) ?? []).map((t) => t.name));
      const scenarioTools = [...toolsForScenario('task').values()].filter((t) => offered.has(t.name));
      const system = request.body.system as Array<{ text: string }>;
      const texts = [...system.map((s) => s.text), ...messageTexts(request)];
      expect(texts.flatMap((t) => unofferedToolNames(t, offered, parameterNames(scenarioTools)))).toEqual([]);
    }
  });

  test('cancelling the parent cancels its subtasks, running or blocked', async () => {
    planScript('PDF');
    const parent = randomUUID();
    await h.client.startTask({
      agentId: lead,
      taskId: parent,
      title: 'PDF export',
      description: 'Ship the PDF export.',
    });
    const subtasks = await subtasksOf(parent);
    await h.waitForStatus(subtasks[0]!.id, (s) => s.state === 'review');
    await h.waitForStatus(subtasks[2]!.id, (s) => s.state === 'blocked');
    await h.waitForStatus(parent, (s) => s.state === 'review');

    await admin.cancel(parent);
    for (const id of [parent, ...subtasks.map((s) => s.id)]) {
      await eventually(async () => ((await stateOf(id)) === 'cancelled' ? true : undefined), `task ${id} cancelled`);
      await eventually(
        async () => ((await h.client.handle(id).describe()).status.name === 'RUNNING' ? undefined : true),
        `workflow task-${id} closed`,
      );
    }
    await expect(admin.cancel(parent)).rejects.toThrow(/is cancelled: a finished task cannot be cancelled/);
  });

  test('approval gate: tasks an agent with tasksNeedApproval creates wait for a human; approve starts, reject ends them', async () => {
    scripts.set('Gated plan', ({ index, taskId }) =>
      index === 0
        ? toolTurn('task_create', { title: 'Gated one', assignee: worker, parent_task_id: taskId })
        : index === 1
          ? toolTurn('task_create', { title: 'Gated two', assignee: worker, parent_task_id: taskId })
          : submitTurn('Asked for two tasks.'),
    );
    const parent = randomUUID();
    await h.client.startTask({ agentId: gatedLead, taskId: parent, title: 'Gated plan', description: 'Plan.' });
    const [one, two] = await subtasksOf(parent, 2);
    const waiting = await h.waitForStatus(one!.id, (s) => s.phase === 'awaiting-approval');
    expect(waiting.state).toBe('pending');
    expect(one!.needs_approval).toBe(true);

    await admin.approve(one!.id, { by: 'rita' });
    await h.waitForStatus(one!.id, (s) => s.state === 'review');
    await h.waitForStatus(two!.id, (s) => s.phase === 'awaiting-approval');
    await admin.reject(two!.id, { by: 'rita', comment: 'not needed' });
    const rejected = await h.client.result(two!.id);
    expect(rejected).toMatchObject({ state: 'rejected', rounds: 0, error: 'rejected: not needed' });
    await expect(admin.approve(one!.id)).rejects.toThrow(TaskAdminError);
    await expect(admin.approve(one!.id)).rejects.toThrow(/only a pending task an agent created can be approved/);
  });

  test('bad input: an unknown assignee and a dependency cycle get clear errors, and nothing is written', async () => {
    let firstId = '';
    let secondId = '';
    scripts.set('Careful planning', ({ request, index, taskId }) => {
      switch (index) {
        case 0:
          return toolTurn('task_create', { title: 'Nobody', assignee: 'nobody-here' });
        case 1:
          return toolTurn('task_create', { title: 'Careful base', assignee: worker, parent_task_id: taskId });
        case 2:
          return toolTurn('task_create', {
            title: 'Careful first',
            assignee: worker,
            depends_on: [createdId(request)],
          });
        case 3:
          firstId = createdId(request);
          return toolTurn('task_create', { title: 'Careful second', assignee: worker, depends_on: [firstId] });
        case 4:
          secondId = createdId(request);
          return toolTurn('task_update', { task_id: firstId, add_dependencies: [secondId] });
        default:
          return submitTurn('Tried.');
      }
    });
    const parent = randomUUID();
    await h.client.startTask({
      agentId: lead,
      taskId: parent,
      title: 'Careful planning',
      description: 'Plan carefully.',
    });
    await h.waitForStatus(parent, (s) => s.state === 'review');
    const told = requests.filter((r) => bodyText(r).includes(`Task ID: ${parent}`)).map((r) => lastToolResults(r)[0]);
    expect(told[1]).toEqual({
      isError: true,
      text: expect.stringContaining('unknown agent "nobody-here": no task was created. Known agents:'),
    });
    expect(told[1]!.text).toMatch(/Known agents: agent-[0-9a-f]{8}/); // the first 20 by id: a real one to pick
    expect(await h.db.db.selectFrom('tasks').select('id').where('title', '=', 'Nobody').execute()).toEqual([]);
    expect(told[5]).toEqual({
      isError: true,
      text: `dependency cycle: ${firstId} → ${secondId} → ${firstId}. Each of these tasks would wait for itself forever; nothing was changed`,
    });
    const deps = await h.db.db
      .selectFrom('task_dependencies')
      .select(['task_id', 'depends_on'])
      .where('task_id', 'in', [firstId, secondId])
      .execute();
    expect(deps).toHaveLength(2); // first → base, second → first; no first → second
    expect(deps.some((d) => d.task_id === firstId && d.depends_on === secondId)).toBe(false);
    expect(await stateOf(firstId)).toBe('blocked');
  });

  test('a failed dependency keeps its dependant blocked; retry runs it in a fresh round and the dependant follows; rerun and archive', async () => {
    let failures = 0;
    scripts.set('Flaky fetch', ({ index }) =>
      index === 0 && failures++ === 0
        ? { kind: 'error', status: 401, message: 'invalid x-api-key' }
        : submitTurn('fetched'),
    );
    const fetch = await admin.createTask({ agentId: worker, title: 'Flaky fetch', description: 'Fetch the data.' });
    const report = await admin.createTask({ agentId: worker, title: 'Report on the data', dependsOn: [fetch.taskId] });
    expect(await h.client.result(fetch.taskId)).toMatchObject({ state: 'failed' });
    // A dead dependency does not release its dependant: it stays blocked and says why.
    await eventually(
      async () => ((await h.client.getStatus(report.taskId)).lastError?.includes('(failed)') ? true : undefined),
      'the dependant to see the failure',
    );
    expect(await stateOf(report.taskId)).toBe('blocked');
    await expect(admin.rerun(fetch.taskId)).rejects.toThrow(
      `cannot rerun task ${fetch.taskId}: it is failed; rerun applies to completed, cancelled tasks`,
    );

    expect(await admin.retry(fetch.taskId, { by: 'rita' })).toEqual({ workflowId: `task-${fetch.taskId}`, round: 2 });
    await h.waitForStatus(fetch.taskId, (s) => s.state === 'review' && s.round === 2);
    const sessions = await h.db.db
      .selectFrom('sessions')
      .select('id')
      .where('task_id', '=', fetch.taskId)
      .orderBy('id')
      .execute();
    expect(sessions.map((r) => r.id)).toEqual([`task_${fetch.taskId}_r1`, `task_${fetch.taskId}_r2`]);
    await h.client.review(fetch.taskId, { decision: 'accept' });
    await h.waitForStatus(report.taskId, (s) => s.state === 'review');
    await h.client.review(report.taskId, { decision: 'accept' });
    expect(await h.client.result(report.taskId)).toMatchObject({ state: 'completed' });

    // Rerun a completed task: a new round; archive it once it is finished again.
    await expect(admin.archive(report.taskId)).resolves.toBeUndefined();
    expect(await stateOf(report.taskId)).toBe('archived');
    await expect(admin.retry(report.taskId)).rejects.toThrow(/it is archived; retry applies to failed tasks/);
    await h.waitForStatus(fetch.taskId, (s) => s.state === 'completed');
    expect((await admin.rerun(fetch.taskId)).round).toBe(3);
    await h.waitForStatus(fetch.taskId, (s) => s.state === 'review' && s.round === 3);
    await eventually(
      async () => ((await stateOf(fetch.taskId)) === 'review' ? true : undefined),
      'the row to say review',
    );
    await expect(admin.archive(fetch.taskId)).rejects.toThrow(
      /it is review; archive applies to completed, failed, rejected, cancelled tasks/,
    );
    const events = (await h.client.events(fetch.taskId)).map((e) => e.type);
    expect(events).toEqual(expect.arrayContaining(['retry-requested', 'rerun-requested']));
    const tree = await admin.tree(fetch.taskId);
    expect(tree.task.id).toBe(fetch.taskId);
    // The retried and rerun runs (carried rounds, local-activity state moves) replay whole too.
    await expectWholeReplays([fetch.taskId, report.taskId]);
  });

  const heartbeatScript: ScriptedResponse[] = [];

  test('notify_user and request_user_approval outside a task land in the inbox, listed and marked read', async () => {
    const agentId = await h.createAgent();
    heartbeatScript.push(
      toolTurn('notify_user', {
        title: 'Nightly build',
        message: 'The nightly build is red since 02:00.',
        priority: 'high',
      }),
      toolTurn('request_user_approval', { question: 'May I drop the stale staging database?', options: ['yes', 'no'] }),
      textTurn('Reported the build and asked about staging.'),
    );
    const result = await h.temporal.workflow.execute('heartbeatWorkflow', {
      workflowId: `hb-test-${randomUUID()}`,
      taskQueue: h.taskQueue,
      args: [{ agentId, force: true }],
    });
    expect(result).toMatchObject({ outcome: 'acted', toolIterations: 2 });
    const inbox = await admin.notifications({ agentId, unreadOnly: true });
    expect(inbox.map((n) => [n.kind, n.title, n.priority, n.options])).toEqual([
      ['approval_request', 'May I drop the stale staging database?', 'high', ['yes', 'no']],
      ['notification', 'Nightly build', 'high', null],
    ]);
    const told = requests
      .filter((r) => bodyText(r).includes('[HEARTBEAT CHECK-IN]'))
      .slice(1)
      .map((r) => lastToolResults(r)[0]!);
    expect(told[0]!.text).toBe(`Notification ${inbox[1]!.id} delivered to the humans' inbox.`);
    expect(told[1]!.text).toContain(
      `delivered to the humans' inbox as ${inbox[0]!.id}. Nobody can answer within this run`,
    );
    const listed = await runTaskAdminCommand(admin, { action: 'notifications', agentId, unread: true });
    expect(listed[0]).toMatch(
      new RegExp(
        `^\\* ${inbox[0]!.id} .* high +${agentId}  QUESTION: May I drop the stale staging database\\? \\[yes / no\\]$`,
      ),
    );
    expect(
      await admin.markRead(
        inbox.map((n) => n.id),
        'rita',
      ),
    ).toBe(2);
    expect(await admin.notifications({ agentId, unreadOnly: true })).toEqual([]);
    expect((await admin.notifications({ agentId }))[0]).toMatchObject({ read_by: 'rita' });
  });
});

/** The text an Anthropic request carries in its messages: text blocks and tool results (not protocol keys). */
function messageTexts(request: RecordedRequest): string[] {
  const out: string[] = [];
  for (const message of (request.body.messages ?? []) as Array<{ content: unknown }>) {
    if (typeof message.content === 'string') out.push(message.content);
    else
      for (const block of message.content as Array<{ type: string; text?: string; content?: unknown }>) {
        if (block.type === 'text' && block.text) out.push(block.text);
        if (block.type === 'tool_result')
          out.push(typeof block.content === 'string' ? block.content : JSON.stringify(block.content));
      }
  }
  return out;
}
