import { Context } from '@temporalio/activity';
import type { ForkInput, UsageTotals } from '../workflows/contract';
import { asFailure } from './fork/errors';
import { prepareFork } from './fork/prepare';
import { forkedAgent, loadFork } from './fork/runtime';
import type { ActivityDeps } from './deps';
import { unknownAgent, unknownTask } from './errors';
import { usageTotals } from './llm/usage';
import { agentConfig, findAgent } from './store/agents';
import {
  recordApprovalDecision,
  recordApprovalRequest,
  type ApprovalDecisionInput,
  type ApprovalRequestInput,
} from './store/approvals';
import { startGates, type StartGates } from './store/task-graph';
import { writeTaskApproval, writeTaskBlockers, writeTaskState, type TaskStateChange } from './store/task-state';
import { findTask, recordTask, type RecordTaskInput } from './store/tasks';
import { applyPropagation, planPropagation } from './task-propagation';

/** What the task workflow needs of its task: the agent, the title, the model label for summaries, the row's state. */
export interface TaskContext {
  agentId: string;
  title: string;
  modelLabel: string;
  state: string;
  /** The task's organisation (its assignee's): a run started without `OrgId` tags itself with it. */
  org?: string;
}

/** Activities of the task workflow: its row, its gates, its approvals. */
export function createTaskActivities(deps: ActivityDeps) {
  const { db } = deps;
  return {
    /** Records an approval request (idempotent by request id) with the call's arguments. */
    async recordApprovalRequest(input: ApprovalRequestInput): Promise<{ requestedAt: string }> {
      return recordApprovalRequest(db, input);
    },

    /**
     * Records who decided what, and when; returns how long the request waited (for the approval-wait
     * metric), or nothing when it was already decided (a retry).
     */
    async recordApprovalDecision(input: ApprovalDecisionInput): Promise<{ waitedSeconds?: number }> {
      return recordApprovalDecision(db, input);
    },

    /** The task's start gates: a pending human approval, and the dependencies not yet completed. */
    async taskStartGates(input: { taskId: string }): Promise<StartGates> {
      return startGates(db, input.taskId);
    },

    /** A blocked task's new reason to wait (a dependency failed or was cancelled): on its row and timeline. */
    async recordTaskBlockers(input: { taskId: string; message: string }): Promise<void> {
      await writeTaskBlockers(db, input);
    },

    /** Records a human's approve/reject of a task an agent created (idempotent). */
    async recordTaskApproval(input: {
      taskId: string;
      approved: boolean;
      decidedBy?: string;
      comment?: string;
    }): Promise<void> {
      await writeTaskApproval(db, input);
    },

    /**
     * Mirrors the workflow's task state into PostgreSQL, with a timeline event. A final state wakes the
     * tasks waiting on this one; cancelled or rejected cancels its subtasks and waiting dependants.
     * After an interrupted attempt (→ blocked or failed) it returns what the task's recorded LLM calls
     * used in total: the attempt never reported its own usage, so the workflow takes this instead.
     */
    async recordTaskState(input: TaskStateChange): Promise<UsageTotals | undefined> {
      return recordTaskState(input);
    },

    /**
     * The start of a fresh task in one activity (one workflow task fewer and two activities fewer per
     * task than `loadTaskContext`, `taskStartGates`, `recordTaskState` in turn): records the task, and
     * when the row is pending with no gate (no approval awaited, no unfinished dependency) moves it to
     * `in_progress` for `start.round` as `recordTaskState` would. Otherwise it returns the gates and
     * the workflow waits on them as before. Each part is idempotent, so a retry is safe.
     */
    async openTask(
      input: RecordTaskInput & { fork?: ForkInput; start: { round: number; eventKey: string } },
    ): Promise<{ context: TaskContext; gates?: StartGates; started: boolean }> {
      const { start, ...record } = input;
      const context = await loadTaskContext(record);
      if (context.state !== 'pending' && context.state !== 'in_progress') return { context, started: false };
      const gates = await startGates(db, input.taskId);
      if (gates.awaitApproval || gates.blockedBy.length > 0) return { context, gates, started: false };
      await recordTaskState({
        taskId: input.taskId,
        state: 'in_progress',
        round: start.round,
        eventKey: start.eventKey,
      });
      return { context, started: true };
    },

    /**
     * Records the task from the workflow's input (idempotent by task id; see `recordTask`) and returns
     * what the workflow needs: the agent's model label and the row's state. Histories recorded before
     * tasks recorded themselves passed only `{ taskId }`: then the row must exist.
     */
    async loadTaskContext(input: (RecordTaskInput & { fork?: ForkInput }) | { taskId: string }): Promise<TaskContext> {
      return loadTaskContext(input);
    },
  };

  async function recordTaskState(input: TaskStateChange): Promise<UsageTotals | undefined> {
    // Planned before the write: it reads the dependants as they were when this state was reached.
    const propagation = await planPropagation(db, input.taskId, input.state);
    await writeTaskState(db, input);
    if (propagation.cancel.length || propagation.wake.length)
      await applyPropagation(Context.current().client, propagation);
    if (input.state !== 'blocked' && input.state !== 'failed') return undefined;
    const { calls: _calls, ...recorded } = await usageTotals(db, { taskId: input.taskId });
    return recorded;
  }

  async function loadTaskContext(
    input: (RecordTaskInput & { fork?: ForkInput }) | { taskId: string },
  ): Promise<TaskContext> {
    // A fork started by any Temporal client is made here (idempotent: the client or eval may have made it).
    if ('fork' in input && input.fork)
      await prepareFork(db, input.taskId, input.fork, { createdBy: input.createdBy }).catch((e: unknown) =>
        Promise.reject(asFailure(e)),
      );
    const task = 'agentId' in input ? (await recordTask(db, input)).task : await findTask(db, input.taskId);
    if (!task) throw unknownTask(input.taskId);
    const found = await findAgent(db, task.agent_id);
    if (!found) throw unknownAgent(task.agent_id);
    const fork = await loadFork(db, task.id, task.fork_of);
    const config = agentConfig(fork ? forkedAgent(found, fork) : found);
    const route = deps.router.candidates({ provider: config.provider, model: config.model, tier: config.tier });
    return {
      agentId: task.agent_id,
      title: task.title,
      modelLabel: route[0]?.model ?? config.model ?? 'default model',
      state: task.state,
      org: task.org,
    };
  }
}
