import { Context } from '@temporalio/activity';
import type { Kysely } from 'kysely';
import type { Database } from '../schema/database';
import type { TaskState } from '../workflows/rules/task-state';
import type { UsageTotals } from '../workflows/contract';
import { usageTotals } from './llm/usage';
import { storableText } from './security/binary';
import { unknownAgent, unknownTask } from './errors';
import { runLlmStep, type ChatRouter, type LlmStepInput } from './llm-step';
import { agentConfig, findAgent } from './store/agents';
import { addTaskEvent, findTask, recordTask, updateTaskState, type RecordTaskInput } from './store/tasks';
import { findMessage } from './store/sessions';
import { assistantMessageKey, type ExecuteToolInput } from './tools/execute';
import type { Scenario } from './tools/registry';
import { runStepWithTools, runToolWithLedger } from './step-with-tools';
import type { ToolUseBlock } from './llm/types';
import { createSubagentActivities } from './subagents';
import { createMemoryActivities } from './memory/activities';
import { startGates, type StartGates } from './store/task-graph';
import { applyPropagation, planPropagation } from './task-graph';
import { createStreamActivities } from './streams/activities';
import { createMailboxActivities } from './mailbox/activities';
import { createForkActivities } from './fork/activities';
import { prepareFork } from './fork/prepare';
import { asFailure } from './fork/errors';
import { forkedAgent, loadFork } from './fork/runtime';
import type { ForkInput } from '../workflows/contract';

export interface ActivityDeps {
  db: Kysely<Database>;
  router: ChatRouter;
}

export { TOOL_HEARTBEAT_INTERVAL_MS } from './step-with-tools';

/**
 * The worker's activities, closed over their dependencies (database, LLM router). Workflows import
 * this module as a type only.
 */
export function createActivities(deps: ActivityDeps) {
  const { db } = deps;
  return {
    /** Heartbeat, reflection, daily report and dream (issue 5). */
    ...createMemoryActivities(deps),
    /** Run streams: run events, end markers and pruning (issue 11). */
    ...createStreamActivities(deps),
    /** The agent's mailbox and chat turns (issue 11). */
    ...createMailboxActivities(deps),
    /** Sub-agents (issue 12): the final answer a sub-agent gives its parent. */
    ...createSubagentActivities(deps),
    /** Forks and evals (issue 25). */
    ...createForkActivities(deps),

    /** See `runLlmStep`: one idempotent, cancellable LLM call over the session stored in PostgreSQL. */
    async llmStep(input: LlmStepInput) {
      return runLlmStep(db, deps.router, input);
    },

    /**
     * One loop iteration in one activity: the LLM step, then the auto-allowed tool calls it asked for,
     * through the ledger (see `runStepWithTools`). Calls that need a human come back as `deferred`.
     */
    async llmStepWithTools(input: LlmStepInput) {
      return runStepWithTools(db, deps.router, input);
    },

    /** Runs one tool call exactly once (ledger), or reports that it needs approval. */
    async executeTool(input: ExecuteToolInput & { scenario: Scenario }) {
      return runToolWithLedger(db, input);
    },

    /** Records an approval request (idempotent by request id) with the call's arguments. */
    async recordApprovalRequest(input: {
      requestId: string;
      agentId: string;
      taskId?: string;
      workflowId: string;
      sessionId: string;
      attempt: number;
      turn: number;
      toolCallId: string;
      tool: string;
      summary: string;
      reason: string;
    }): Promise<{ requestedAt: string }> {
      const message = await findMessage(db, input.sessionId, assistantMessageKey(input.attempt, input.turn));
      const call = message?.content.find((b): b is ToolUseBlock => b.type === 'tool_use' && b.id === input.toolCallId);
      const row = await db
        .insertInto('approvals')
        .values({
          id: input.requestId,
          task_id: input.taskId ?? null,
          agent_id: input.agentId,
          workflow_id: input.workflowId,
          tool: input.tool,
          args: JSON.stringify(call?.input ?? null),
          summary: input.summary,
          status: 'pending',
        })
        .onConflict((oc) => oc.column('id').doUpdateSet({ summary: input.summary }))
        .returning('requested_at')
        .executeTakeFirstOrThrow();
      if (input.taskId) {
        await addTaskEvent(db, input.taskId, 'approval-requested', { requestId: input.requestId, tool: input.tool, summary: input.summary, reason: input.reason }, `approval-req:${input.requestId}`);
      }
      return { requestedAt: row.requested_at.toISOString() };
    },

    /**
     * Records who decided what, and when; returns how long the request waited (for the approval-wait
     * metric), or nothing when it was already decided (a retry).
     */
    async recordApprovalDecision(input: {
      requestId: string;
      taskId?: string;
      status: 'approved' | 'rejected' | 'timed_out';
      decidedBy?: string;
      comment?: string;
    }): Promise<{ waitedSeconds?: number }> {
      const decided = await db
        .updateTable('approvals')
        .set({
          status: input.status,
          // A person's words: stored escaped (a NUL would fail this write on every retry).
          decided_by: input.decidedBy === undefined ? null : storableText(input.decidedBy),
          comment: input.comment === undefined ? null : storableText(input.comment),
          decided_at: new Date(),
        })
        .where('id', '=', input.requestId)
        .where('status', '=', 'pending')
        .returning(['requested_at', 'decided_at'])
        .executeTakeFirst();
      if (input.taskId) {
        await addTaskEvent(db, input.taskId, 'approval-decided', { ...input }, `approval-dec:${input.requestId}`);
      }
      return decided?.decided_at ? { waitedSeconds: Math.max(0, (decided.decided_at.getTime() - decided.requested_at.getTime()) / 1000) } : {};
    },

    /** The task's start gates: a pending human approval, and the dependencies not yet completed. */
    async taskStartGates(input: { taskId: string }): Promise<StartGates> {
      return startGates(db, input.taskId);
    },

    /** A blocked task's new reason to wait (a dependency failed or was cancelled): on its row and timeline. */
    async recordTaskBlockers(input: { taskId: string; message: string }): Promise<void> {
      await db.updateTable('tasks').set({ last_error: input.message, updated_at: new Date() }).where('id', '=', input.taskId).execute();
      await addTaskEvent(db, input.taskId, 'blockers-changed', { message: input.message });
    },

    /** Records a human's approve/reject of a task an agent created (idempotent). */
    async recordTaskApproval(input: { taskId: string; approved: boolean; decidedBy?: string; comment?: string }): Promise<void> {
      if (input.approved) await db.updateTable('tasks').set({ needs_approval: false, updated_at: new Date() }).where('id', '=', input.taskId).execute();
      await addTaskEvent(db, input.taskId, input.approved ? 'task-approved' : 'task-rejected', { decidedBy: input.decidedBy, comment: input.comment }, 'approval-gate');
    },

    /**
     * Mirrors the workflow's task state into PostgreSQL, with a timeline event. A final state wakes the
     * tasks waiting on this one; cancelled or rejected cancels its subtasks and waiting dependants.
     * After an interrupted attempt (→ blocked or failed) it returns what the task's recorded LLM calls
     * used in total: the attempt never reported its own usage, so the workflow takes this instead.
     */
    async recordTaskState(input: { taskId: string; state: TaskState; round: number; lastError?: string; eventKey: string }): Promise<UsageTotals | undefined> {
      return recordTaskState(input);
    },

    /**
     * The start of a fresh task in one activity (one workflow task fewer and two activities fewer per
     * task than `loadTaskContext`, `taskStartGates`, `recordTaskState` in turn): records the task, and
     * when the row is pending with no gate (no approval awaited, no unfinished dependency) moves it to
     * `in_progress` for `start.round` as `recordTaskState` would. Otherwise it returns the gates and
     * the workflow waits on them as before. Each part is idempotent, so a retry is safe.
     */
    async openTask(input: RecordTaskInput & { fork?: ForkInput; start: { round: number; eventKey: string } }): Promise<{ context: TaskContext; gates?: StartGates; started: boolean }> {
      const { start, ...record } = input;
      const context = await loadTaskContext(record);
      if (context.state !== 'pending' && context.state !== 'in_progress') return { context, started: false };
      const gates = await startGates(db, input.taskId);
      if (gates.awaitApproval || gates.blockedBy.length > 0) return { context, gates, started: false };
      await recordTaskState({ taskId: input.taskId, state: 'in_progress', round: start.round, eventKey: start.eventKey });
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

  async function recordTaskState(input: { taskId: string; state: TaskState; round: number; lastError?: string; eventKey: string }): Promise<UsageTotals | undefined> {
    const propagation = await planPropagation(db, input.taskId, input.state);
    await updateTaskState(db, input.taskId, input.state, { round: input.round, lastError: input.lastError ?? null });
    if (['blocked', 'cancelled', 'failed'].includes(input.state)) {
      // The attempt that asked is gone: its undecided requests can no longer be answered.
      await db.updateTable('approvals').set({ status: 'withdrawn', decided_at: new Date() }).where('task_id', '=', input.taskId).where('status', '=', 'pending').execute();
    }
    await addTaskEvent(db, input.taskId, 'state-changed', { state: input.state, round: input.round, error: input.lastError }, input.eventKey);
    if (propagation.cancel.length || propagation.wake.length) await applyPropagation(Context.current().client, propagation);
    if (input.state !== 'blocked' && input.state !== 'failed') return undefined;
    const { calls: _calls, ...recorded } = await usageTotals(db, { taskId: input.taskId });
    return recorded;
  }

  async function loadTaskContext(input: (RecordTaskInput & { fork?: ForkInput }) | { taskId: string }): Promise<TaskContext> {
    // A fork started by any Temporal client is made here (idempotent: the client or eval may have made it).
    if ('fork' in input && input.fork) await prepareFork(db, input.taskId, input.fork, { createdBy: input.createdBy }).catch((e: unknown) => Promise.reject(asFailure(e)));
    const task = 'agentId' in input ? (await recordTask(db, input)).task : await findTask(db, input.taskId);
    if (!task) throw unknownTask(input.taskId);
    const found = await findAgent(db, task.agent_id);
    if (!found) throw unknownAgent(task.agent_id);
    const fork = await loadFork(db, task.id, task.fork_of);
    const config = agentConfig(fork ? forkedAgent(found, fork) : found);
    const route = deps.router.candidates({ provider: config.provider, model: config.model, tier: config.tier });
    return { agentId: task.agent_id, title: task.title, modelLabel: route[0]?.model ?? config.model ?? 'default model', state: task.state };
  }
}

/** What the task workflow needs of its task: the agent, the title, the model label for summaries, the row's state. */
export interface TaskContext {
  agentId: string;
  title: string;
  modelLabel: string;
  state: string;
}

export type Activities = ReturnType<typeof createActivities>;
