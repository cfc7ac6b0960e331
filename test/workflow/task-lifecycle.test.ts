import {
  reflectionWorkflowId,
  roundWorkflowId,
  reviewDecisionSignal,
  statusQuery,
  taskWorkflowId,
  type ReflectionWorkflowResult,
} from '../../workflows/contract';
import { submitTurn, toolTurn } from '../support/harness';
import {
  activitySummaries,
  toolCallSummaries,
  bodyText,
  currentDetails,
  historiesOfAllRuns,
  isReflection,
  useScriptedHarness,
} from './task-support';

/**
 * The task lifecycle on the real Temporal server and PostgreSQL: a revision round with a fresh session,
 * accept, the post-task reflection started as an abandoned child, and what an operator sees (search
 * attributes, activity summaries, current details).
 */
describe('task lifecycle', () => {
  const { h, agents } = useScriptedHarness();

  test('revise opens round 2 (child task-{id}-r2, fresh session with the feedback and notes); accept completes and starts the reflection', async () => {
    const agentId = await h.createAgent();
    const taskId = agents.task([
      toolTurn('task_note', { note: 'The parser drops the last line when there is no trailing newline' }),
      submitTurn('Fixed the parser (v1)'),
      // Round 2
      toolTurn('file_write', { path: 'parser.test.txt', content: 'case: no trailing newline' }),
      submitTurn('Fixed the parser and added a test (v2)'),
    ]);
    const { handle } = await h.client.startTask({
      agentId,
      taskId,
      title: 'Fix the parser',
      description: 'The CSV parser loses data.',
    });

    const inReview = await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(inReview).toMatchObject({ round: 1, submission: 'Fixed the parser (v1)', phase: 'awaiting-review' });
    // What an operator sees in the Temporal UI while the task waits for review.
    const described = await handle.describe();
    expect(described.searchAttributes).toMatchObject({ AgentId: [agentId], TaskId: [taskId], TaskState: ['review'] });
    expect(await currentDetails(handle)).toMatch(/review · round 1 .*awaiting-review/);
    const [round1] = await historiesOfAllRuns(h.temporal.workflow.getHandle(roundWorkflowId(taskId, 1)));
    const summaries = activitySummaries(round1!);
    expect(summaries[0]).toMatch(/^llm .+ · round 1 turn 0$/);
    expect(toolCallSummaries(round1!)).toContain(
      'task_note: The parser drops the last line when there is no trailing newline',
    );
    expect(summaries.every((s) => s.length > 0)).toBe(true);

    await h.client.review(taskId, { decision: 'revise', feedback: 'Please add a regression test.', decidedBy: 'rita' });
    const second = await h.waitForStatus(taskId, (s) => s.state === 'review' && s.round === 2);
    expect(second.submission).toBe('Fixed the parser and added a test (v2)');

    // Round 2 is its own child workflow with its own session, opened by a prompt that carries the
    // description, the notes of round 1 and the reviewer's feedback, but none of round 1's conversation.
    const r2 = await h.temporal.workflow.getHandle(roundWorkflowId(taskId, 2)).describe();
    expect(r2.status.name).toBe('COMPLETED');
    expect(r2.raw.workflowExecutionInfo?.parentExecution?.workflowId).toBe(taskWorkflowId(taskId));
    const opening = agents.requests(taskId)[2]!;
    const openingText = JSON.stringify(opening.body.messages);
    for (const part of [
      '🔴 REVISION REQUIRED',
      'Please add a regression test.',
      'The CSV parser loses data.',
      'The parser drops the last line when there is no trailing newline',
    ]) {
      expect(openingText).toContain(part);
    }
    expect(openingText).not.toContain('Fixed the parser (v1)');
    const sessions = await h.db.db
      .selectFrom('sessions')
      .select('id')
      .where('task_id', '=', taskId)
      .orderBy('id')
      .execute();
    expect(sessions.map((s) => s.id)).toEqual([`task_${taskId}_r1`, `task_${taskId}_r2`]);
    const firstOfR2 = await h.db.db
      .selectFrom('messages')
      .select(['kind', 'content'])
      .where('session_id', '=', `task_${taskId}_r2`)
      .orderBy('id')
      .executeTakeFirstOrThrow();
    expect(firstOfR2.kind).toBe('task_prompt');
    expect(JSON.stringify(firstOfR2.content)).toContain(`[TASK EXECUTION — Task ID: ${taskId}]`);

    await h.client.review(taskId, { decision: 'accept', decidedBy: 'rita' });
    const result = await handle.result();
    expect(result).toMatchObject({
      taskId,
      state: 'completed',
      rounds: 2,
      submission: 'Fixed the parser and added a test (v2)',
    });
    expect(result.usage.inputTokens).toBeGreaterThan(0);

    const task = await handle.describe();
    expect(task.searchAttributes.TaskState).toEqual(['completed']);
    const row = await h.client.getTaskRow(taskId);
    expect(row).toMatchObject({ state: 'completed', round: 2 });
    const states = (await h.client.events(taskId))
      .filter((e) => e.type === 'state-changed')
      .map((e) => `${String(e.data.state)}@${String(e.data.round)}`);
    expect(states).toEqual(['in_progress@1', 'review@1', 'in_progress@2', 'review@2', 'completed@2']);

    // The reflection was started by the task workflow and ran on after it had closed (ABANDON).
    const reflection = h.temporal.workflow.getHandle(reflectionWorkflowId(taskId));
    const reflected = (await reflection.result()) as ReflectionWorkflowResult;
    expect(reflected).toMatchObject({ taskId, status: 'completed' });
    const reflectionInfo = await reflection.describe();
    expect(reflectionInfo.raw.workflowExecutionInfo?.parentExecution?.workflowId).toBe(taskWorkflowId(taskId));
    expect(reflectionInfo.closeTime!.getTime()).toBeGreaterThan(task.closeTime!.getTime());
    const reflectionPrompt = h.llm.requests.find((r) => isReflection(r) && bodyText(r).includes(taskId));
    expect(bodyText(reflectionPrompt!)).toContain('Rounds: 2');
  });

  test('a review decision sent while the task is still in progress is ignored, not applied to the next submission', async () => {
    const agentId = await h.createAgent();
    const slowNote = { ...toolTurn('task_note', { note: 'working' }), chunkDelayMs: 100 };
    const taskId = agents.task([slowNote, submitTurn('done')]);
    const { handle } = await h.client.startTask({ agentId, taskId, title: 'Hold', description: 'wait' });
    await agents.waitForRequests(taskId, 1);
    // The client refuses it as the API does; a raw signal (any Temporal client) is ignored by the workflow.
    await expect(h.client.review(taskId, { decision: 'accept' })).rejects.toThrow(/not waiting for review/);
    await handle.signal(reviewDecisionSignal, { decision: 'accept' });
    const status = await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(status.round).toBe(1);
    await new Promise((r) => setTimeout(r, 500));
    expect((await h.client.getStatus(taskId)).state).toBe('review');
    await h.client.review(taskId, { decision: 'accept' });
    expect((await handle.result()).state).toBe('completed');
  });

  test('getStatus follows a running round: iteration, phase and usage so far, equal to the recorded calls, not the last report', async () => {
    const agentId = await h.createAgent();
    const notes = [0, 1, 2].map((i) => toolTurn('task_note', { note: `step ${i}` }));
    const taskId = agents.task([...notes, { kind: 'hang' }]);
    const { handle } = await h.client.startTask({
      agentId,
      taskId,
      title: 'Steps',
      description: 'three notes, then think',
    });
    await agents.waitForRequests(taskId, 4);
    // The fused loop tells the task workflow nothing while no human is needed: its own answer lags.
    const reported = await handle.query(statusQuery);
    expect(reported.iteration).toBe(0);
    const status = await h.waitForStatus(taskId, (s) => s.iteration === 3);
    expect(status).toMatchObject({ state: 'in_progress', round: 1, phase: 'thinking' });
    const recorded = await h.client.agentUsage(agentId);
    expect(recorded.calls).toBe(3);
    expect(status.usage.inputTokens).toBe(recorded.inputTokens);
    expect(status.usage.outputTokens).toBe(recorded.outputTokens);
    expect(status.usage.costUsd).toBeCloseTo(recorded.costUsd, 9);
    expect(status.roundUsage).toEqual(status.usage);
    await handle.cancel();
    await h.waitForStatus(taskId, (s) => s.state === 'cancelled');
  });

  test('a paused attempt’s usage is kept: after pause and after the resumed attempt, status usage equals the recorded calls', async () => {
    const agentId = await h.createAgent();
    const notes = [0, 1].map((i) => toolTurn('task_note', { note: `step ${i}` }));
    const taskId = agents.task([...notes, { kind: 'hang' }, submitTurn('done after the pause')]);
    const { handle } = await h.client.startTask({
      agentId,
      taskId,
      title: 'Pause me',
      description: 'two notes, then wait',
    });
    await agents.waitForRequests(taskId, 3);
    await h.client.pause(taskId);
    const blocked = await h.waitForStatus(taskId, (s) => s.state === 'blocked');
    const beforeResume = await h.client.agentUsage(agentId);
    expect(beforeResume.calls).toBe(2);
    expect(blocked.usage.inputTokens).toBe(beforeResume.inputTokens);
    expect(blocked.usage.costUsd).toBeCloseTo(beforeResume.costUsd, 9);
    await h.client.resume(taskId);
    const review = await h.waitForStatus(taskId, (s) => s.state === 'review');
    const recorded = await h.client.agentUsage(agentId);
    expect(recorded.calls).toBe(3);
    expect(review.usage.inputTokens).toBe(recorded.inputTokens);
    expect(review.usage.outputTokens).toBe(recorded.outputTokens);
    expect(review.usage.costUsd).toBeCloseTo(recorded.costUsd, 9);
    await handle.cancel();
  });
});
