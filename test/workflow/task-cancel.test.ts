import { pauseSignal, resumeSignal, roundWorkflowId } from '../../workflows/contract';
import { describeEvent } from '../../client/progress';
import type { TaskEvent } from '../../client';
import { roundStopKey } from '../../workflows/rules/step-placement';
import { submitTurn, toolTurn } from '../support/harness';
import { useScriptedHarness } from './task-support';
import { eventually } from '../support/eventually';

describe('cancellation', () => {
  const { h, agents } = useScriptedHarness();

  test('handle.cancel() during a streaming LLM call stops the stream and leaves the task cancelled within 5 s', async () => {
    h.llm.enqueue({ kind: 'hang' });
    const agentId = await h.createAgent();
    const { taskId, handle } = await h.client.startTask({
      agentId,
      title: 'Long think',
      description: 'never finishes',
    });
    await eventually(() => h.llm.requests.length > 0, 'the LLM call to start', 20_000);
    expect(h.llm.requests).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 500));

    const cancelledAt = Date.now();
    await handle.cancel();
    await h.llm.waitForAbortedRequests(1, 5_000);
    const streamStoppedMs = Date.now() - cancelledAt;
    await eventually(
      async () => (await h.client.getTaskRow(taskId)).state === 'cancelled',
      'the task row to say cancelled',
      Math.max(0, cancelledAt + 5_000 - Date.now()),
      50,
    );
    const cancelledMs = Date.now() - cancelledAt;
    expect(streamStoppedMs).toBeLessThan(5_000);
    expect(cancelledMs).toBeLessThan(5_000);
    // The row is written by the workflow's last activity; the workflow closes a workflow task later.
    await expect(handle.result()).rejects.toThrow(/cancel/i);
    const description = await handle.describe();
    expect(description.status.name).toBe('CANCELLED');
    expect(description.searchAttributes.TaskState).toEqual(['cancelled']);
  });

  /** Cancels and measures how long until PostgreSQL says `cancelled`. */
  async function cancelAndMeasure(taskId: string, alreadyCancelledAt?: number): Promise<number> {
    const handle = h.client.handle(taskId);
    const cancelledAt = alreadyCancelledAt ?? Date.now();
    if (alreadyCancelledAt === undefined) await handle.cancel();
    await eventually(
      async () => (await h.client.getTaskRow(taskId)).state === 'cancelled' || undefined,
      'the task to be cancelled',
      5_000,
    );
    await expect(handle.result()).rejects.toThrow(/cancel/i);
    const elapsed = Date.now() - cancelledAt;
    const description = await handle.describe();
    expect(description.status.name).toBe('CANCELLED');
    expect(description.searchAttributes.TaskState).toEqual(['cancelled']);
    return elapsed;
  }

  test.each([
    ['waiting for an approval', 'awaiting-approval'],
    ['waiting for review', 'review'],
    ['paused (blocked)', 'blocked'],
  ])('cancelled while %s: the task ends cancelled within 5 s', async (_label, where) => {
    const agentId = await h.createAgent();
    const taskId = agents.task(
      where === 'awaiting-approval'
        ? [toolTurn('shell_execute', { command: 'touch never.txt' })]
        : where === 'review'
          ? [submitTurn('done')]
          : [{ kind: 'hang' }],
    );
    const { handle } = await h.client.startTask({
      agentId,
      taskId,
      title: `Cancel ${where}`,
      description: 'cancelled',
    });
    if (where === 'awaiting-approval') await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1);
    if (where === 'review') await h.waitForStatus(taskId, (s) => s.state === 'review');
    if (where === 'blocked') {
      await agents.waitForRequests(taskId, 1);
      await handle.signal(pauseSignal, {});
      await h.waitForStatus(taskId, (s) => s.state === 'blocked');
    }
    expect(await cancelAndMeasure(taskId)).toBeLessThan(5_000);
    const status = await h.client.getStatus(taskId);
    expect(status).toMatchObject({ state: 'cancelled', pendingApprovals: [] });
    if (where === 'awaiting-approval') {
      const approvals = await h.db.db.selectFrom('approvals').select('status').where('task_id', '=', taskId).execute();
      expect(approvals.map((a) => a.status)).toEqual(['withdrawn']);
    }
  });

  /** A quick step, then one that streams until stopped: the second runs as a local activity. */
  async function startWithLocalHang(title: string) {
    const agentId = await h.createAgent();
    const taskId = agents.task([toolTurn('task_note', { note: 'quick' }), { kind: 'hang' }, submitTurn('resumed')]);
    const { handle } = await h.client.startTask({ agentId, taskId, title, description: 'a slow local step' });
    await agents.waitForRequests(taskId, 2);
    await new Promise((r) => setTimeout(r, 500));
    const round = await h.temporal.workflow.getHandle(roundWorkflowId(taskId, 1)).fetchHistory();
    // The hanging step is local: the round scheduled one activity only (the first step).
    expect((round.events ?? []).filter((e) => e.activityTaskScheduledEventAttributes)).toHaveLength(1);
    return { taskId, handle };
  }

  test('a cancel reaches a slow local step through its recorded stop request: the stream stops and the task is cancelled within 5 s', async () => {
    const { taskId, handle } = await startWithLocalHang('Cancel local');
    const abortedBefore = h.llm.abortedRequests;
    const cancelledAt = Date.now();
    await handle.cancel();
    await h.llm.waitForAbortedRequests(abortedBefore + 1, 5_000);
    expect(Date.now() - cancelledAt).toBeLessThan(5_000);
    expect(await cancelAndMeasure(taskId, cancelledAt)).toBeLessThan(5_000);
    const stops = await h.db.db
      .selectFrom('task_events')
      .select(['data', 'idem_key'])
      .where('task_id', '=', taskId)
      .where('type', '=', 'round-stop-requested')
      .execute();
    expect(stops).toEqual([{ data: { round: 1, attempt: 1, reason: 'cancel' }, idem_key: roundStopKey(1, 1) }]);
    expect(describeEvent({ type: 'round-stop-requested', data: stops[0]!.data } as TaskEvent)).toBe(
      'cancel requested: stopping round 1 (attempt 1)',
    );
  });

  test('a pause stops a slow local step within 5 s, and the resumed attempt is not stopped by it', async () => {
    const { taskId, handle } = await startWithLocalHang('Pause local');
    const pausedAt = Date.now();
    await handle.signal(pauseSignal, {});
    await h.waitForStatus(taskId, (s) => s.state === 'blocked', 5_000);
    expect(Date.now() - pausedAt).toBeLessThan(5_000);
    await handle.signal(resumeSignal);
    const status = await h.waitForStatus(taskId, (s) => s.state === 'review', 30_000);
    expect(status.submission).toBe('resumed');
    const round = await h.temporal.workflow.getHandle(roundWorkflowId(taskId, 1)).describe();
    expect(round.status.name).toBe('COMPLETED');
  });
});
