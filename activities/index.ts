import { composeActivities } from './compose';
import type { ActivityDeps } from './deps';
import { createMailboxActivities } from './mailbox/mailbox-activities';
import { createMemoryActivities } from './memory/memory-activities';
import { createStepActivities } from './step/step-activities';
import { createStreamActivities } from './streams/stream-activities';
import { createSubagentActivities } from './subagents';
import { createTaskActivities } from './task-activities';
import { createApprovalActivities } from './approvals/activities';
import { createForkActivities } from './fork/activities';

export type { ActivityDeps } from './deps';
export type { TaskContext } from './task-activities';
export { TOOL_HEARTBEAT_INTERVAL_MS } from './step/with-tools';

/**
 * The worker's activities, closed over their dependencies (database, LLM router). Workflows import
 * this module as a type only. An activity name defined by two groups throws here, at worker start.
 */
export function createActivities(deps: ActivityDeps) {
  return composeActivities({
    /** Heartbeat, reflection, daily report and dream. */
    memory: createMemoryActivities(deps),
    /** Run streams: run events, end markers and pruning. */
    streams: createStreamActivities(deps),
    /** The agent's mailbox and chat turns. */
    mailbox: createMailboxActivities(deps),
    /** Sub-agents: the final answer a sub-agent gives its parent. */
    subagents: createSubagentActivities(deps),
    /** The LLM loop: the step, its tools, one tool call through the ledger. */
    step: createStepActivities(deps),
    /** The task's row, gates and approvals. */
    task: createTaskActivities(deps),
    /** Approvals under a policy: the request with its policy, and the audit trail. */
    approvals: createApprovalActivities(deps),
    /** Forks and evals. */
    forks: createForkActivities(deps),
  });
}

export type Activities = ReturnType<typeof createActivities>;
