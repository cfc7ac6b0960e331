import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { type Client, WorkflowNotFoundError, type WorkflowHandle } from '@temporalio/client';
import type { Kysely } from 'kysely';
import type { Database, TaskRow } from '../schema/database';
import { AGENT_ID_PATTERN, findAgent, IDENTITY_FILES, upsertAgent, type AgentConfig, type AgentDefinition } from '../activities/store/agents';
import { addTaskEvent } from '../activities/store/tasks';
import { usageTotals, type UsageTotalsRow } from '../activities/llm/usage';
import {
  AgentIdSearchAttribute,
  approvalDecisionSignal,
  commentSignal,
  decideApprovalUpdate,
  DEFAULT_TASK_QUEUE,
  pauseSignal,
  resumeSignal,
  reviewDecisionSignal,
  statusQuery,
  TaskIdSearchAttribute,
  TaskStateSearchAttribute,
  taskWorkflowId,
  type ApprovalDecision,
  type RecordedApprovalDecision,
  type ReviewDecision,
  type TaskStatus,
  type TaskWorkflowResult,
} from '../workflows/contract';
import type { taskWorkflow } from '../workflows/task';

export * from '../workflows/contract';
export type { AgentConfig, AgentDefinition } from '../activities/store/agents';

export class UnknownAgentError extends Error {
  readonly type = 'UnknownAgent';
  constructor(readonly agentId: string) {
    super(`unknown agent ${JSON.stringify(agentId)}: create it first with upsertAgent / upsertAgentFromFolder`);
    this.name = 'UnknownAgentError';
  }
}

export interface StartTaskOptions {
  agentId: string;
  title: string;
  description: string;
  /** Defaults to a random id. Starting the same id twice is refused. */
  taskId?: string;
  priority?: 'low' | 'medium' | 'high' | 'urgent';
  createdBy?: string;
  /** How long a tool call waits for a human decision (default 24 h). */
  approvalTimeoutMs?: number;
}

export interface TaskEvent {
  id: string;
  type: string;
  data: Record<string, unknown>;
  createdAt: Date;
}

/**
 * The typed client for backend services: defines agents, starts tasks and follows, steers and
 * decides them. Wraps `@temporalio/client` (the workflows) and the database (agents, tasks, events).
 */
export class AgentsClient {
  readonly taskQueue: string;

  constructor(
    readonly temporal: Client,
    readonly db: Kysely<Database>,
    options: { taskQueue?: string } = {},
  ) {
    this.taskQueue = options.taskQueue ?? DEFAULT_TASK_QUEUE;
  }

  /** Creates or replaces an agent (identity files, config, workspace). */
  async upsertAgent(agent: AgentDefinition): Promise<{ id: string; contentHash: string }> {
    const row = await upsertAgent(this.db, agent);
    return { id: row.id, contentHash: row.content_hash };
  }

  /**
   * Reads SOUL.md, AGENTS.md, HEARTBEAT.md, TOOLS.md (missing ones are empty; at least SOUL.md or
   * AGENTS.md must exist) and an optional `agent.json` ({ name, description, config }) from a folder.
   */
  async upsertAgentFromFolder(folder: string, options: { id?: string; workspaceDir: string; config?: AgentConfig }): Promise<{ id: string; contentHash: string }> {
    const read = async (name: string): Promise<string | undefined> => readFile(path.join(folder, name), 'utf8').catch(() => undefined);
    const [soul, agents, heartbeat, tools, manifest] = await Promise.all([
      read(IDENTITY_FILES.soul_md),
      read(IDENTITY_FILES.agents_md),
      read(IDENTITY_FILES.heartbeat_md),
      read(IDENTITY_FILES.tools_md),
      read('agent.json'),
    ]);
    if (soul === undefined && agents === undefined) {
      throw new Error(`${folder} has neither SOUL.md nor AGENTS.md: an agent needs at least one identity file`);
    }
    const meta = manifest ? (JSON.parse(manifest) as { name?: string; description?: string; config?: AgentConfig }) : {};
    const id = options.id ?? path.basename(path.resolve(folder)).toLowerCase();
    if (!AGENT_ID_PATTERN.test(id)) throw new Error(`agent id ${JSON.stringify(id)} is invalid; pass options.id`);
    return this.upsertAgent({
      id,
      name: meta.name ?? id,
      description: meta.description,
      files: { soul: soul ?? '', agents: agents ?? '', heartbeat: heartbeat ?? '', tools: tools ?? '' },
      config: { ...meta.config, ...options.config },
      workspaceDir: options.workspaceDir,
    });
  }

  /**
   * Records the task and starts its workflow `task-{taskId}`. Refused before any workflow runs when
   * the agent does not exist (`UnknownAgentError`).
   */
  async startTask(options: StartTaskOptions): Promise<{ taskId: string; workflowId: string; handle: WorkflowHandle<typeof taskWorkflow> }> {
    const agent = await findAgent(this.db, options.agentId);
    if (!agent) throw new UnknownAgentError(options.agentId);
    if (!options.title.trim()) throw new Error('a task needs a title');
    const taskId = options.taskId ?? randomUUID();
    await this.db
      .insertInto('tasks')
      .values({
        id: taskId,
        agent_id: agent.id,
        title: options.title,
        description: options.description,
        state: 'pending',
        priority: options.priority ?? 'medium',
        created_by: options.createdBy ?? null,
      })
      .execute();
    await addTaskEvent(this.db, taskId, 'task-created', { title: options.title, agentId: agent.id }, 'created');
    const workflowId = taskWorkflowId(taskId);
    const handle = await this.temporal.workflow.start<typeof taskWorkflow>('taskWorkflow', {
      workflowId,
      taskQueue: this.taskQueue,
      args: [{ taskId, agentId: agent.id, approvalTimeoutMs: options.approvalTimeoutMs }],
      typedSearchAttributes: [
        { key: AgentIdSearchAttribute, value: agent.id },
        { key: TaskIdSearchAttribute, value: taskId },
        { key: TaskStateSearchAttribute, value: 'pending' },
      ],
      staticSummary: `${agent.name}: ${options.title}`.slice(0, 200),
    });
    return { taskId, workflowId, handle };
  }

  handle(taskId: string): WorkflowHandle<typeof taskWorkflow> {
    return this.temporal.workflow.getHandle<typeof taskWorkflow>(taskWorkflowId(taskId));
  }

  /** Live status from the workflow (`status` query); falls back to the stored row once it is gone. */
  async getStatus(taskId: string): Promise<TaskStatus> {
    try {
      return await this.handle(taskId).query(statusQuery);
    } catch (error) {
      if (!(error instanceof WorkflowNotFoundError)) throw error;
      const task = await this.getTaskRow(taskId);
      return {
        taskId,
        agentId: task.agent_id,
        state: task.state as TaskStatus['state'],
        round: task.round,
        iteration: 0,
        phase: 'finished',
        pendingApprovals: [],
        usage: await this.usageFromCalls(taskId),
        ...(task.last_error ? { lastError: task.last_error } : {}),
      };
    }
  }

  async getTaskRow(taskId: string): Promise<TaskRow> {
    const task = await this.db.selectFrom('tasks').selectAll().where('id', '=', taskId).executeTakeFirst();
    if (!task) throw new Error(`unknown task ${taskId}`);
    return task;
  }

  /** Requests cancellation: stops an in-flight LLM stream or command and leaves the task `cancelled`. */
  async cancel(taskId: string): Promise<void> {
    await this.handle(taskId).cancel();
  }

  /** Decides a pending approval through the validated update; returns the recorded decision. */
  async decideApproval(taskId: string, decision: ApprovalDecision): Promise<RecordedApprovalDecision> {
    return this.handle(taskId).executeUpdate(decideApprovalUpdate, { args: [decision] });
  }

  /** Same decision by signal (fire-and-forget; unknown ids are ignored by the workflow). */
  async signalApproval(taskId: string, decision: ApprovalDecision): Promise<void> {
    await this.handle(taskId).signal(approvalDecisionSignal, decision);
  }

  async review(taskId: string, decision: ReviewDecision): Promise<void> {
    await this.handle(taskId).signal(reviewDecisionSignal, decision);
  }

  /** Pauses the task (→ blocked) after its current step; `resume` continues the same round and session. */
  async pause(taskId: string, reason?: string): Promise<void> {
    await this.handle(taskId).signal(pauseSignal, { reason });
  }

  async resume(taskId: string): Promise<void> {
    await this.handle(taskId).signal(resumeSignal);
  }

  async comment(taskId: string, text: string, from?: string): Promise<void> {
    await this.handle(taskId).signal(commentSignal, { text, from });
  }

  async result(taskId: string): Promise<TaskWorkflowResult> {
    return this.handle(taskId).result();
  }

  /** Task events after `afterId` (the durable timeline: state changes, LLM calls, tools, approvals). */
  async events(taskId: string, afterId = '0'): Promise<TaskEvent[]> {
    const rows = await this.db
      .selectFrom('task_events')
      .select(['id', 'type', 'data', 'created_at'])
      .where('task_id', '=', taskId)
      .where('id', '>', afterId)
      .orderBy('id')
      .execute();
    return rows.map((r) => ({ id: r.id, type: r.type, data: r.data, createdAt: r.created_at }));
  }

  /**
   * Follows a task: yields each new event and status change until the task reaches one of `until`
   * (default: review or any terminal state). Polls every `intervalMs`.
   */
  async *follow(
    taskId: string,
    options: { until?: TaskStatus['state'][]; intervalMs?: number; signal?: AbortSignal } = {},
  ): AsyncGenerator<{ kind: 'event'; event: TaskEvent } | { kind: 'status'; status: TaskStatus }> {
    const until = options.until ?? ['review', 'completed', 'failed', 'cancelled', 'rejected', 'archived'];
    let afterId = '0';
    let lastStatus = '';
    for (;;) {
      for (const event of await this.events(taskId, afterId)) {
        afterId = event.id;
        yield { kind: 'event', event };
      }
      const status = await this.getStatus(taskId);
      const key = JSON.stringify([status.state, status.phase, status.iteration, status.pendingApprovals.length]);
      if (key !== lastStatus) {
        lastStatus = key;
        yield { kind: 'status', status };
      }
      if (until.includes(status.state)) return;
      if (options.signal?.aborted) return;
      await new Promise((r) => setTimeout(r, options.intervalMs ?? 500));
    }
  }

  /** LLM spend of one task, from the recorded calls (also after its workflow is gone). */
  private async usageFromCalls(taskId: string): Promise<TaskStatus['usage']> {
    const { calls: _calls, ...totals } = await usageTotals(this.db, { taskId });
    return totals;
  }

  /** An agent's LLM spend (tokens by kind, cost, call count), optionally since a date. */
  async agentUsage(agentId: string, options: { since?: Date } = {}): Promise<UsageTotalsRow> {
    return usageTotals(this.db, { agentId, since: options.since });
  }
}
