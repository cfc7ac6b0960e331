import { WithStartWorkflowOperation, type Client } from '@temporalio/client';
import { agentWorkflowId, deliverUpdate, type DeliverInput, type DeliverResult } from '../../workflows/agent-contract';

/**
 * The one delivery to an agent's mailbox: the `deliver` update with start, so an idle agent's entity
 * workflow is started (or the running one used) and the item is stored before this resolves. With
 * `updateId`, a retried delivery (an activity retry, a client resend) is the same update and is
 * stored once. Validation and retries on a run that continued as new belong to the caller.
 */
export async function deliverToAgent(
  client: Client,
  taskQueue: string,
  agentId: string,
  input: DeliverInput,
  options: { updateId?: string } = {},
): Promise<DeliverResult> {
  return client.workflow.executeUpdateWithStart(deliverUpdate, {
    ...(options.updateId !== undefined ? { updateId: options.updateId } : {}),
    args: [input],
    startWorkflowOperation: new WithStartWorkflowOperation('agentWorkflow', {
      workflowId: agentWorkflowId(agentId),
      taskQueue,
      args: [{ agentId }],
      workflowIdConflictPolicy: 'USE_EXISTING',
    }),
  });
}
