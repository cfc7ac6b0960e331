import { randomUUID } from 'node:crypto';
import { OrgIdSearchAttribute, roundWorkflowId, taskWorkflowId } from '../../workflows/contract';
import { eventually } from '../support/eventually';
import { submitTurn, textTurn, useHarness } from '../support/harness';
import { temporalCli } from '../support/temporal-cli';

/**
 * Runs carry their organisation as the `OrgId` search attribute, so an operator filters the Web UI and
 * `temporal workflow list` by it: a task started by the client carries it from the start and hands it
 * to its round; a task started by a raw Temporal client tags itself once its task is recorded.
 */
describe('the OrgId search attribute (real Temporal server)', () => {
  const h = useHarness({ worker: true });
  const org = `acme-${randomUUID().slice(0, 8)}`;
  let agentId: string;
  beforeAll(async () => {
    agentId = await h.createAgent({ org });
    h.llm.setResponder((request) =>
      Array.isArray(request.body.tools) && JSON.stringify(request.body).includes('TASK EXECUTION')
        ? submitTurn('done')
        : textTurn('noted'),
    );
  });
  const orgOf = async (workflowId: string) =>
    (await h.temporal.workflow.getHandle(workflowId).describe()).typedSearchAttributes.get(OrgIdSearchAttribute);

  test("a client-started task and its round carry the agent's organisation; the list filters by it", async () => {
    const { taskId } = await h.client.startTask({ agentId, title: 'Tagged', description: 'tagged' });
    expect(await orgOf(taskWorkflowId(taskId))).toBe(org);
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(await orgOf(roundWorkflowId(taskId, 1))).toBe(org);
    const listed = await eventually(async () => {
      const ids: string[] = [];
      for await (const run of h.temporal.workflow.list({ query: `OrgId = "${org}"` })) ids.push(run.workflowId);
      return ids.includes(roundWorkflowId(taskId, 1)) ? ids : undefined;
    }, 'the visibility store to list the runs');
    expect(listed).toEqual(expect.arrayContaining([taskWorkflowId(taskId), roundWorkflowId(taskId, 1)]));
    expect(listed.every((id) => id.includes(taskId))).toBe(true);
  });

  test('a raw Temporal start (no OrgId) tags itself once its task is recorded', async () => {
    const taskId = `raw-org-${randomUUID().slice(0, 8)}`;
    await temporalCli([
      'workflow',
      'start',
      '--type',
      'taskWorkflow',
      '--task-queue',
      h.taskQueue,
      '--workflow-id',
      taskWorkflowId(taskId),
      '--input',
      JSON.stringify({ taskId, agentId, title: 'raw start' }),
    ]);
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(await orgOf(taskWorkflowId(taskId))).toBe(org);
    expect(await orgOf(roundWorkflowId(taskId, 1))).toBe(org);
  });
});
