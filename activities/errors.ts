import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../workflows/failure-types';

/** Stable failure types that cross the activity boundary (STYLE.md habit 4), from the one registry. */
export const UNKNOWN_AGENT = FailureType.UnknownAgent;
export const UNKNOWN_TASK = FailureType.UnknownTask;

export function unknownAgent(agentId: string): ApplicationFailure {
  return ApplicationFailure.create({
    message: `unknown agent ${JSON.stringify(agentId)}: create it first (client.upsertAgent, or \`npm run agents -- agent upsert <folder>\`)`,
    type: UNKNOWN_AGENT,
    nonRetryable: true,
  });
}

export function unknownTask(taskId: string): ApplicationFailure {
  return ApplicationFailure.create({
    message: `unknown task ${JSON.stringify(taskId)}`,
    type: UNKNOWN_TASK,
    nonRetryable: true,
  });
}
