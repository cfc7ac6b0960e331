import { pauseSignal } from '../../workflows/contract';
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
  async function cancelAndMeasure(taskId: string): Promise<number> {
    const handle = h.client.handle(taskId);
    const cancelledAt = Date.now();
    await handle.cancel();
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
});
