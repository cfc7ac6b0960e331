/**
 * The human side of the task lifecycle, beside `AgentsClient`: create tasks with their place in the
 * graph (parent, dependencies), approve or reject a task an agent created, retry a failed task, rerun a
 * finished one, archive, cancel (which cascades to subtasks and to tasks waiting on it), list and
 * inspect tasks; and the notification inbox.
 */
import { randomUUID } from 'node:crypto';
import { type Client, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Kysely } from 'kysely';
import type { Database, NotificationRow, TaskRow } from '../schema/database';
import { addTaskEvent, findTask } from '../activities/store/tasks';
import { PRIORITY_RANK, recordNewTask, TaskGraphError } from '../activities/store/task-graph';
import { listNotifications, markNotificationsRead, type NotificationFilter } from '../activities/store/notifications';
import { ignoreGone, propagateTaskState, startTaskWorkflow } from '../activities/task-propagation';
import {
  AgentIdSearchAttribute,
  DEFAULT_TASK_QUEUE,
  taskApprovalSignal,
  TaskIdSearchAttribute,
  TaskStateSearchAttribute,
  OrgIdSearchAttribute,
  taskWorkflowId,
  type TaskWorkflowInput,
} from '../workflows/contract';
import { TASK_LIST_PAGE_MAX } from '../workflows/rules/task-graph';
import type { TaskPriority } from '../workflows/rules/priority';
import { TERMINAL_STATES, type TaskState } from '../workflows/rules/task-state';

export { TaskGraphError };
export type { NotificationFilter, NotificationRow };

/** A lifecycle command that does not apply to the task as it is: nothing was changed. */
export class TaskAdminError extends Error {
  readonly type = 'TaskAdminError';
  constructor(message: string) {
    super(message);
    this.name = 'TaskAdminError';
  }
}

/** Which states each command accepts (retry from failed; rerun from completed or cancelled). */
const ACCEPTS = {
  retry: ['failed'],
  rerun: ['completed', 'cancelled'],
  archive: ['completed', 'failed', 'rejected', 'cancelled'],
} as const satisfies Record<string, readonly TaskState[]>;

export interface CreateTaskOptions {
  agentId: string;
  title: string;
  description?: string;
  taskId?: string;
  priority?: TaskPriority;
  createdBy?: string;
  parentTaskId?: string;
  dependsOn?: string[];
}

export interface TaskTree {
  task: TaskRow;
  dependsOn: TaskRow[];
  subtasks: TaskTree[];
}

/** Deepest subtask level `tree` shows: deeper levels are a plan that went wrong, not one to print. */
const TREE_MAX_DEPTH = 5;

export class TaskAdmin {
  readonly taskQueue: string;

  constructor(
    readonly temporal: Client,
    readonly db: Kysely<Database>,
    options: { taskQueue?: string } = {},
  ) {
    this.taskQueue = options.taskQueue ?? DEFAULT_TASK_QUEUE;
  }

  /**
   * Records a task (with parent and dependencies, validated; a cycle is impossible for a new task) and
   * starts its workflow. Bad input (unknown agent, parent or dependency) throws `TaskGraphError` and
   * records nothing.
   */
  async createTask(options: CreateTaskOptions): Promise<{ taskId: string; workflowId: string }> {
    if (!options.title.trim()) throw new TaskAdminError('a task needs a title');
    const { row } = await recordNewTask(this.db, {
      id: options.taskId ?? randomUUID(),
      agentId: options.agentId,
      title: options.title,
      description: options.description ?? options.title,
      priority: options.priority ?? 'medium',
      createdBy: options.createdBy ?? 'human',
      ...(options.parentTaskId ? { parentTaskId: options.parentTaskId } : {}),
      ...(options.dependsOn?.length ? { dependsOn: options.dependsOn } : {}),
    });
    const { workflowId } = await startTaskWorkflow(this.temporal, this.taskQueue, {
      id: row.id,
      agentId: row.agent_id,
      title: row.title,
    });
    return { taskId: row.id, workflowId };
  }

  /** Lets a task an agent created start (it waits in `pending` for this). */
  async approve(taskId: string, options: { by?: string; comment?: string } = {}): Promise<void> {
    await this.decide(taskId, 'approve', options);
  }

  /** Rejects a task an agent created: it ends `rejected`, and the tasks waiting on it are cancelled. */
  async reject(taskId: string, options: { by?: string; comment?: string } = {}): Promise<void> {
    await this.decide(taskId, 'reject', options);
  }

  /** A failed task starts again in a fresh round (new session; its description and notes carry over). */
  async retry(taskId: string, options: { by?: string } = {}): Promise<{ workflowId: string; round: number }> {
    return this.restart(taskId, 'retry', options.by);
  }

  /** A completed or cancelled task runs again in a fresh round. */
  async rerun(taskId: string, options: { by?: string } = {}): Promise<{ workflowId: string; round: number }> {
    return this.restart(taskId, 'rerun', options.by);
  }

  /** Archives a finished task (completed, failed, rejected or cancelled). Archiving a dependency releases the tasks waiting on it. */
  async archive(taskId: string, options: { by?: string } = {}): Promise<void> {
    const task = await this.requireState(taskId, 'archive', ACCEPTS.archive);
    await this.db
      .updateTable('tasks')
      .set({ state: 'archived', updated_at: new Date() })
      .where('id', '=', task.id)
      .where('state', '=', task.state)
      .execute();
    await addTaskEvent(
      this.db,
      task.id,
      'state-changed',
      { state: 'archived', from: task.state, by: options.by ?? 'human' },
      `archived:${task.round}`,
    );
    await propagateTaskState(this.db, this.temporal, task.id, 'archived');
  }

  /**
   * Cancels a task that has not finished: its workflow stops (an in-flight LLM call or command within
   * seconds) and records `cancelled`, which cancels its unfinished subtasks and the tasks waiting on it,
   * recursively. Returns the ids cancelled directly by this call.
   */
  async cancel(taskId: string): Promise<void> {
    const task = await this.requireTask(taskId);
    if ((TERMINAL_STATES as readonly string[]).includes(task.state))
      throw new TaskAdminError(`task ${taskId} is ${task.state}: a finished task cannot be cancelled`);
    const reached = await ignoreGone(this.temporal.workflow.getHandle(taskWorkflowId(taskId)).cancel());
    if (!reached) {
      // No workflow runs for it (it was never started): record the cancellation and cascade here.
      await this.db
        .updateTable('tasks')
        .set({ state: 'cancelled', updated_at: new Date(), completed_at: new Date() })
        .where('id', '=', taskId)
        .execute();
      await addTaskEvent(this.db, taskId, 'state-changed', { state: 'cancelled' }, `cancelled-without-workflow`);
      await propagateTaskState(this.db, this.temporal, taskId, 'cancelled');
    }
  }

  /** Tasks by priority, then most recently updated. */
  async list(
    filter: { agentId?: string; states?: string[]; parentTaskId?: string; limit?: number } = {},
  ): Promise<TaskRow[]> {
    let query = this.db.selectFrom('tasks').selectAll();
    if (filter.agentId) query = query.where('agent_id', '=', filter.agentId);
    if (filter.states?.length) query = query.where('state', 'in', filter.states);
    if (filter.parentTaskId) query = query.where('parent_task_id', '=', filter.parentTaskId);
    return query
      .orderBy(PRIORITY_RANK)
      .orderBy('updated_at', 'desc')
      .limit(Math.min(filter.limit ?? TASK_LIST_PAGE_MAX, TASK_LIST_PAGE_MAX))
      .execute();
  }

  /** A task with its dependencies and its subtasks, recursively. */
  async tree(taskId: string, depth = 0): Promise<TaskTree> {
    const task = await this.requireTask(taskId);
    const dependsOn = await this.db
      .selectFrom('task_dependencies')
      .innerJoin('tasks', 'tasks.id', 'task_dependencies.depends_on')
      .selectAll('tasks')
      .where('task_dependencies.task_id', '=', taskId)
      .execute();
    const children =
      depth >= TREE_MAX_DEPTH
        ? []
        : await this.db
            .selectFrom('tasks')
            .select('id')
            .where('parent_task_id', '=', taskId)
            .orderBy('created_at')
            .execute();
    return { task, dependsOn, subtasks: await Promise.all(children.map((c) => this.tree(c.id, depth + 1))) };
  }

  // ---- notifications ------------------------------------------------------------------------

  /** The inbox, newest first. */
  async notifications(filter: NotificationFilter = {}): Promise<NotificationRow[]> {
    return listNotifications(this.db, filter);
  }

  /** Marks notifications read; returns how many were unread. */
  async markRead(ids: string[], by?: string): Promise<number> {
    return markNotificationsRead(this.db, ids, by);
  }

  // ---- internals -----------------------------------------------------------------------------

  private async decide(
    taskId: string,
    decision: 'approve' | 'reject',
    options: { by?: string; comment?: string },
  ): Promise<void> {
    const task = await this.requireTask(taskId);
    if (task.state !== 'pending' || !task.needs_approval) {
      throw new TaskAdminError(
        `task ${taskId} is ${task.state}${task.state === 'pending' ? ' but does not wait for approval' : ''}: only a pending task an agent created can be approved or rejected`,
      );
    }
    await this.temporal.workflow
      .getHandle(taskWorkflowId(taskId))
      .signal(taskApprovalSignal, { decision, decidedBy: options.by, comment: options.comment });
  }

  /** Starts a new run of `task-{id}` that begins with a fresh round after the task's last one. */
  private async restart(
    taskId: string,
    kind: 'retry' | 'rerun',
    by: string | undefined,
  ): Promise<{ workflowId: string; round: number }> {
    const task = await this.requireState(taskId, kind, ACCEPTS[kind]);
    const input: TaskWorkflowInput = {
      taskId: task.id,
      agentId: task.agent_id,
      restart: { kind, afterRound: task.round },
    };
    await addTaskEvent(
      this.db,
      task.id,
      `${kind}-requested`,
      { by: by ?? 'human', from: task.state, round: task.round + 1 },
      `${kind}:${task.round}`,
    );
    const workflowId = taskWorkflowId(task.id);
    try {
      await this.temporal.workflow.start('taskWorkflow', {
        workflowId,
        taskQueue: this.taskQueue,
        args: [input],
        typedSearchAttributes: [
          { key: AgentIdSearchAttribute, value: task.agent_id },
          { key: TaskIdSearchAttribute, value: task.id },
          { key: TaskStateSearchAttribute, value: 'pending' },
          { key: OrgIdSearchAttribute, value: task.org },
        ],
        staticSummary: `${task.agent_id}: ${task.title} (${kind})`.slice(0, 200),
      });
    } catch (error) {
      if (error instanceof WorkflowExecutionAlreadyStartedError)
        throw new TaskAdminError(`task ${taskId} is already running again`);
      throw error;
    }
    return { workflowId, round: task.round + 1 };
  }

  private async requireTask(taskId: string): Promise<TaskRow> {
    const task = await findTask(this.db, taskId);
    if (!task) throw new TaskAdminError(`unknown task ${JSON.stringify(taskId)}`);
    return task;
  }

  private async requireState(taskId: string, command: string, accepted: readonly TaskState[]): Promise<TaskRow> {
    const task = await this.requireTask(taskId);
    if (!(accepted as readonly string[]).includes(task.state)) {
      throw new TaskAdminError(
        `cannot ${command} task ${taskId}: it is ${task.state}; ${command} applies to ${accepted.join(', ')} tasks`,
      );
    }
    return task;
  }
}
