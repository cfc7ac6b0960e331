import { randomUUID } from 'node:crypto';
import { WorkflowFailedError } from '@temporalio/client';
import { TaskFailureType, type TaskWorkflowResult } from '../../workflows/contract';
import type { RecordedRequest } from '../fake-llm';
import { useHarness, submitTurn, textTurn } from '../support/harness';
import { eventually } from '../support/eventually';
import { temporalCli } from '../support/temporal-cli';

const TASK_PROMPT = /\[TASK EXECUTION — Task ID: ([^\]\s]+)\]/;
const isTaskExecution = (r: RecordedRequest) => Array.isArray(r.body.tools) && TASK_PROMPT.test(JSON.stringify(r.body));
const taskIdOf = (r: RecordedRequest) => TASK_PROMPT.exec(JSON.stringify(r.body))?.[1];

/**
 * The raw-start contract: the Temporal CLI alone (no TypeScript client, no row written beforehand)
 * starts agent work, as a Go or Python service, the Web UI or a Schedule would.
 */
describe('any Temporal client can start a task', () => {
  const h = useHarness({ worker: true });
  let agentId: string;
  beforeAll(async () => {
    agentId = await h.createAgent();
    // Every task submits at once; anything else (the post-task reflection) gets a plain answer.
    h.llm.setResponder((request) =>
      isTaskExecution(request) ? submitTurn(`submitted ${taskIdOf(request)}`) : textTurn('noted'),
    );
  });

  const start = (workflowId: string, input: Record<string, unknown>) =>
    temporalCli([
      'workflow',
      'start',
      '--type',
      'taskWorkflow',
      '--task-queue',
      h.taskQueue,
      '--workflow-id',
      workflowId,
      '--input',
      JSON.stringify(input),
    ]);
  const taskRows = (taskId: string) => h.db.db.selectFrom('tasks').selectAll().where('id', '=', taskId).execute();
  const failureOf = async (workflowId: string) => {
    const error = await h.temporal.workflow
      .getHandle(workflowId)
      .result()
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(WorkflowFailedError);
    return (error as WorkflowFailedError).cause as Error & { type?: string; nonRetryable?: boolean };
  };

  test('temporal workflow start creates the task, which reaches review and completes on a reviewDecision signal; a second start makes no second task', async () => {
    const taskId = `raw-${randomUUID().slice(0, 8)}`;
    const input = {
      taskId,
      agentId,
      title: 'Started by the CLI',
      description: 'no row exists yet',
      priority: 'high',
      createdBy: 'ops',
    };
    await start(`task-${taskId}`, input);
    const status = await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(status.submission).toBe(`submitted ${taskId}`);
    // The row follows the workflow's state a moment later (the state write is an activity).
    await eventually(async () => (await taskRows(taskId))[0]?.state === 'review', 'the row in review');
    expect(await taskRows(taskId)).toEqual([
      expect.objectContaining({
        agent_id: agentId,
        title: 'Started by the CLI',
        priority: 'high',
        created_by: 'ops',
        state: 'review',
      }),
    ]);

    // The same workflow id while it runs: the CLI hands back the running execution; nothing new starts.
    const runId = (await h.temporal.workflow.getHandle(`task-${taskId}`).describe()).runId;
    expect(await start(`task-${taskId}`, input)).toContain(runId);

    await temporalCli([
      'workflow',
      'signal',
      '--workflow-id',
      `task-${taskId}`,
      '--name',
      'reviewDecision',
      '--input',
      JSON.stringify({ decision: 'accept', decidedBy: 'cli' }),
    ]);
    const result: TaskWorkflowResult = await h.temporal.workflow.getHandle(`task-${taskId}`).result();
    expect(result.state).toBe('completed');

    // After it ended, a second start (same or another workflow id) fails and leaves the one task as it was.
    await start(`task-${taskId}`, input);
    const again = await failureOf(`task-${taskId}`);
    expect(again).toMatchObject({ type: TaskFailureType.taskConflict, nonRetryable: true });
    expect(again.message).toMatch(/already ended \(completed\)/);
    expect(await taskRows(taskId)).toEqual([expect.objectContaining({ state: 'completed' })]);
    const created = await h.db.db
      .selectFrom('task_events')
      .select('id')
      .where('task_id', '=', taskId)
      .where('type', '=', 'task-created')
      .execute();
    expect(created).toHaveLength(1);
    expect(h.llm.requests.filter((r) => isTaskExecution(r) && taskIdOf(r) === taskId)).toHaveLength(1);
  });

  test('an unknown agent fails the workflow at once, non-retryably, with type UnknownAgent and a clear message', async () => {
    const taskId = `raw-${randomUUID().slice(0, 8)}`;
    await start(`task-${taskId}`, { taskId, agentId: 'nobody-here', title: 'Orphan' });
    const cause = await failureOf(`task-${taskId}`);
    expect(cause).toMatchObject({ type: TaskFailureType.unknownAgent, nonRetryable: true });
    expect(cause.message).toMatch(/unknown agent "nobody-here": create it first/);
    expect(await taskRows(taskId)).toEqual([]);
  });

  test('malformed input fails with InvalidTaskInput naming what is wrong', async () => {
    const noTitle = `raw-${randomUUID().slice(0, 8)}`;
    await start(`task-${noTitle}`, { taskId: noTitle, agentId });
    expect((await failureOf(`task-${noTitle}`)).message).toMatch(/has no title/);
    const badPriority = `raw-${randomUUID().slice(0, 8)}`;
    await start(`task-${badPriority}`, { taskId: badPriority, agentId, title: 't', priority: 'asap' });
    const cause = await failureOf(`task-${badPriority}`);
    expect(cause).toMatchObject({ type: TaskFailureType.invalidInput, nonRetryable: true });
    expect(cause.message).toMatch(/priority must be one of low, medium, high, urgent, got "asap"/);
    // A forged carry (a state the loop cannot resume in) would spin the workflow: refused instead.
    const forged = `raw-${randomUUID().slice(0, 8)}`;
    await start(`task-${forged}`, { taskId: forged, agentId, title: 't', carry: { state: 'blocked', round: 1 } });
    expect((await failureOf(`task-${forged}`)).message).toMatch(/carry is written by the workflow/);
    // A field the contract does not have is refused, not dropped: `budget` is not `costBudgetUsd`.
    const misspelt = `raw-${randomUUID().slice(0, 8)}`;
    await start(`task-${misspelt}`, { taskId: misspelt, agentId, title: 't', budget: 0.01 });
    const unknown = await failureOf(`task-${misspelt}`);
    expect(unknown).toMatchObject({ type: TaskFailureType.invalidInput, nonRetryable: true });
    expect(unknown.message).toMatch(/^taskWorkflow input: unknown field "budget": a task's input has only taskId, /);
    expect(await taskRows(misspelt)).toEqual([]);
  });

  test('a Temporal Schedule that starts taskWorkflow creates one task per run, its id derived from the run’s workflow id', async () => {
    const scheduleId = `nightly-${randomUUID().slice(0, 8)}`;
    await temporalCli([
      'schedule',
      'create',
      '--schedule-id',
      scheduleId,
      '--interval',
      '24h',
      '--overlap-policy',
      'AllowAll',
      '--type',
      'taskWorkflow',
      '--task-queue',
      h.taskQueue,
      '--workflow-id',
      `task-${scheduleId}`,
      '--input',
      JSON.stringify({ agentId, title: 'Nightly report', description: 'summarise the day' }),
    ]);
    try {
      const rows = () =>
        h.db.db.selectFrom('tasks').selectAll().where('id', 'like', `${scheduleId}-%`).orderBy('created_at').execute();
      // A trigger has its own overlap policy (default: skip while a run is open; these wait in review).
      const trigger = () =>
        temporalCli(['schedule', 'trigger', '--schedule-id', scheduleId, '--overlap-policy', 'AllowAll']);
      await trigger();
      await eventually(async () => (await rows()).length === 1, 'the first scheduled task');
      // Run ids carry the time to the second: a second trigger in the same second would be the same run.
      await new Promise((r) => setTimeout(r, 1_100));
      await trigger();
      const both = await eventually(
        async () => ((await rows()).length === 2 ? rows() : undefined),
        'the second scheduled task',
      );
      for (const row of both) {
        expect(row).toMatchObject({ agent_id: agentId, title: 'Nightly report' });
        expect(row.id).toMatch(new RegExp(`^${scheduleId}-\\d{4}-\\d\\d-\\d\\dT`));
        await h.waitForStatus(row.id, (s) => s.state === 'review');
      }
      expect(new Set(both.map((r) => r.id)).size).toBe(2);
      for (const row of both) await h.client.handle(row.id).terminate('test over');
    } finally {
      await temporalCli(['schedule', 'delete', '--schedule-id', scheduleId]);
    }
  });
});
