import { randomUUID } from 'node:crypto';
import type { RecordedRequest } from '../fake-llm';
import { reflectionWorkflowId, type ReflectionWorkflowResult } from '../../workflows/contract';
import { REFLECTION_MAX_PER_DAY } from '../../workflows/rules/memory-limits';
import { useHarness, submitTurn, textTurn, toolTurn } from '../support/harness';

const MEMORY_TOOLS = [
  'clear_notebook',
  'clear_working_memory',
  'memory_delete',
  'memory_list',
  'memory_save',
  'memory_search',
  'memory_search_longterm',
  'memory_update',
  'memory_update_longterm',
  'update_notebook',
  'update_working_memory',
];

/** postTaskReflectionWorkflow, id `reflection-{taskId}`: the agent reflects on an accepted task. */
describe('post-task reflection', () => {
  const h = useHarness({ worker: true });
  beforeEach(() => h.llm.reset());

  const bodyText = (r: RecordedRequest) => JSON.stringify(r.body);
  const isReflection = (r: RecordedRequest) => bodyText(r).includes('[POST-TASK REFLECTION');

  async function reflect(taskId: string, agentId: string): Promise<ReflectionWorkflowResult> {
    return h.temporal.workflow.execute('postTaskReflectionWorkflow', {
      workflowId: reflectionWorkflowId(taskId),
      taskQueue: h.taskQueue,
      args: [{ taskId, agentId }],
    });
  }

  /** A finished task recorded directly (state, rounds, notes), for prompt and rate-limit checks. */
  async function acceptedTask(agentId: string, rounds: number): Promise<string> {
    const id = `t-${randomUUID().slice(0, 8)}`;
    const created = new Date(Date.now() - 2 * 60 * 60_000);
    await h.db.db
      .insertInto('tasks')
      .values({
        id,
        agent_id: agentId,
        title: `Task ${id}`,
        description: 'd',
        state: 'completed',
        round: rounds,
        result_summary: 'Fixed it.',
        created_at: created,
        completed_at: new Date(),
      })
      .execute();
    for (let i = 0; i < 10; i++) {
      await h.db.db
        .insertInto('task_events')
        .values({ task_id: id, type: 'note-added', data: JSON.stringify({ note: `note ${i} ${'n'.repeat(300)}` }) })
        .execute();
    }
    return id;
  }

  test('runs after the task workflow has finished, with the trace, and saves insights with memory tools only', async () => {
    const agentId = await h.createAgent();
    h.llm.enqueue(toolTurn('task_note', { note: 'checked the config first' }), submitTurn('Fixed the login redirect'));
    const { taskId, handle } = await h.client.startTask({
      agentId,
      title: 'Fix the login redirect',
      description: 'Users land on a 404 after login.',
    });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    // Accepting starts the reflection (an abandoned child of the task workflow): script it first.
    h.llm.enqueue(
      toolTurn('memory_save', {
        content: 'Login redirects are configured in auth/routes.ts, check there first',
        type: 'insight',
        tags: ['insight', 'domain:auth'],
      }),
      textTurn('Saved one insight about where login redirects live.'),
    );
    await h.client.review(taskId, { decision: 'accept' });
    expect((await handle.result()).state).toBe('completed');

    const result = (await h.temporal.workflow
      .getHandle(reflectionWorkflowId(taskId))
      .result()) as ReflectionWorkflowResult;
    expect(result).toEqual({ taskId, status: 'completed', toolIterations: 1 });

    const requests = h.llm.requests.filter(isReflection);
    expect(requests.length).toBeGreaterThanOrEqual(1);
    const prompt = bodyText(requests[0]!);
    for (const part of [
      '[POST-TASK REFLECTION — Task',
      'Rounds: 1',
      'Duration:',
      'Tool calls: 2',
      'Result summary: Fixed the login redirect',
      'checked the config first',
      '## Reflect on what worked',
      'skill',
    ]) {
      expect(prompt).toContain(part);
    }
    const offered = ((requests[0]!.body.tools as Array<{ name: string }>) ?? []).map((t) => t.name).sort();
    expect(offered).toEqual(MEMORY_TOOLS);

    const saved = await h.db.db.selectFrom('memory_observations').selectAll().where('agent_id', '=', agentId).execute();
    expect(saved).toHaveLength(1);
    expect(saved[0]).toMatchObject({ type: 'insight', tags: ['insight', 'domain:auth'] });
    const row = await h.db.db
      .selectFrom('memory_reflections')
      .selectAll()
      .where('task_id', '=', taskId)
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({ status: 'completed', tool_iterations: 1 });
    const description = await h.temporal.workflow.getHandle(reflectionWorkflowId(taskId)).describe();
    expect(description.status.name).toBe('COMPLETED');
    // It ran on after the task workflow had closed (parent-close policy ABANDON).
    expect(description.closeTime!.getTime()).toBeGreaterThan((await handle.describe()).closeTime!.getTime());

    // Started again for the same task: nothing new.
    const requestsBefore = h.llm.requests.length;
    await h.temporal.workflow.execute('postTaskReflectionWorkflow', {
      workflowId: `${reflectionWorkflowId(taskId)}-again`,
      taskQueue: h.taskQueue,
      args: [{ taskId, agentId }],
    });
    expect(h.llm.requests).toHaveLength(requestsBefore);
  });

  test('a revised task gets "what went wrong" guidance and the last 8 notes at 200 characters', async () => {
    const agentId = await h.createAgent();
    const taskId = await acceptedTask(agentId, 3);
    h.llm.enqueue(textTurn('Nothing new to save.'));
    expect(await reflect(taskId, agentId)).toMatchObject({ status: 'completed', toolIterations: 0 });
    const prompt = bodyText(h.llm.requests[0]!);
    expect(prompt).toContain('Rounds: 3 (2 revisions)');
    expect(prompt).toContain('## Reflect on what went wrong');
    expect(prompt).toContain('Duration: 2 h 0 min');
    expect(prompt).not.toContain('note 1 ');
    expect(prompt).toContain(`note 2 ${'n'.repeat(193)}`);
    expect(prompt).toContain(`note 9 ${'n'.repeat(193)}`);
    expect(prompt).not.toContain('n'.repeat(194));
  });

  test(`at most ${REFLECTION_MAX_PER_DAY} reflections per agent per day, counted in PostgreSQL`, async () => {
    const agentId = await h.createAgent();
    h.llm.setResponder(() => textTurn('Noted.'));
    const tasks = [];
    for (let i = 0; i < REFLECTION_MAX_PER_DAY + 1; i++) tasks.push(await acceptedTask(agentId, 1));
    // The six start at once; the row lock keeps the count exact.
    const results = await Promise.all(tasks.map((t) => reflect(t, agentId)));
    expect(results.filter((r) => r.status === 'completed')).toHaveLength(REFLECTION_MAX_PER_DAY);
    expect(results.filter((r) => r.status === 'rate-limited')).toHaveLength(1);
    expect(h.llm.requests.filter(isReflection)).toHaveLength(REFLECTION_MAX_PER_DAY);
    const rows = await h.db.db
      .selectFrom('memory_reflections')
      .select('status')
      .where('agent_id', '=', agentId)
      .execute();
    expect(rows.map((r) => r.status).sort()).toEqual([
      ...Array(REFLECTION_MAX_PER_DAY).fill('completed'),
      'rate-limited',
    ]);
    // Another agent has its own budget.
    const other = await h.createAgent();
    expect((await reflect(await acceptedTask(other, 1), other)).status).toBe('completed');
  });
});
