import { randomUUID } from 'node:crypto';
import { WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, Worker } from '@temporalio/worker';
import { decideApprovalUpdate, TaskFailureType } from '../../workflows/contract';
import { INVALID_TRANSITION_ERROR } from '../../workflows/rules/task-state';
import { eventually } from '../support/eventually';
import { useHarness } from '../support/harness';
import { quietLogger } from '../support/quiet-logger';
import { ScriptedAgents } from './task-support';

/**
 * Workflow code throws only ApplicationFailures with stable types: such an error fails the workflow at
 * once, where any other error only fails the workflow task, which Temporal retries forever (a hang).
 */
describe('workflow failures have stable types and never hang', () => {
  const h = useHarness();

  test('an invalid task transition fails the workflow with type InvalidTaskTransition; a plain Error (the control) leaves it running', async () => {
    const { code } = await bundleWorkflowCode({
      workflowsPath: require.resolve('./fixtures/failing-workflows'),
      logger: quietLogger,
    });
    const taskQueue = `failures-${randomUUID()}`;
    const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS! });
    const worker = await Worker.create({ connection, taskQueue, workflowBundle: { code } });
    const running = worker.run();
    try {
      const illegal = await h.temporal.workflow.start('illegalTransitionWorkflow', {
        taskQueue,
        workflowId: `illegal-${randomUUID()}`,
        workflowTaskTimeout: '5 seconds',
      });
      const error = await illegal.result().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(WorkflowFailedError);
      expect((error as WorkflowFailedError).cause).toMatchObject({
        type: INVALID_TRANSITION_ERROR,
        nonRetryable: true,
        message: expect.stringContaining('illegal task transition completed → in_progress'),
      });

      const plain = await h.temporal.workflow.start('plainErrorWorkflow', {
        taskQueue,
        workflowId: `plain-${randomUUID()}`,
      });
      const failedTask = await eventually(async () => {
        const { events } = await plain.fetchHistory();
        return events?.find((e) => e.workflowTaskFailedEventAttributes);
      }, 'a failed workflow task');
      expect(failedTask.workflowTaskFailedEventAttributes?.failure?.message).toContain('a plain Error');
      expect((await plain.describe()).status.name).toBe('RUNNING');
      await plain.terminate('control done');
    } finally {
      worker.shutdown();
      await running;
      await connection.close();
    }
  });

  test("the decideApproval update's validator rejects with type InvalidDecision and the task goes on", async () => {
    await h.startWorker();
    const agents = new ScriptedAgents(h.llm);
    const agentId = await h.createAgent();
    const taskId = agents.task([{ kind: 'hang' }]);
    const { handle } = await h.client.startTask({ agentId, taskId, title: 'Hang', description: 'waits' });
    await agents.waitForRequests(taskId, 1);
    // Sent as any Temporal client would, past the client library's own check (it refuses first, in the
    // API's words: test/workflow/task-approvals.test.ts).
    const rejection = await handle
      .executeUpdate(decideApprovalUpdate, { args: [{ requestId: 'no-such-request', decision: 'approved' }] })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(rejection).toBeInstanceOf(WorkflowUpdateFailedError);
    expect((rejection as WorkflowUpdateFailedError).cause).toMatchObject({
      type: TaskFailureType.invalidDecision,
      message: expect.stringContaining('no pending approval request no-such-request'),
    });
    expect((await h.client.getStatus(taskId)).state).toBe('in_progress');
    await handle.cancel();
    await h.waitForStatus(taskId, (s) => s.state === 'cancelled');
  });
});
