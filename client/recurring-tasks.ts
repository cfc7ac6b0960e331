import {
  ScheduleAlreadyRunning,
  ScheduleNotFoundError,
  ScheduleOverlapPolicy,
  type Client,
  type ScheduleDescription,
  type ScheduleHandle,
  type ScheduleOptionsStartWorkflowAction,
  type ScheduleSpec,
} from '@temporalio/client';
import type { Kysely } from 'kysely';
import { findAgent } from '../activities/store/agents';
import type { Database } from '../schema/database';
import { waitUntilScheduleShows } from './schedules';
import {
  AgentIdSearchAttribute,
  DEFAULT_TASK_QUEUE,
  TASK_PRIORITIES,
  type TaskPriority,
  type TaskWorkflowInput,
} from '../workflows/contract';

/** Every recurring task's schedule id starts with this, so they never collide with agent schedules (`heartbeat-…`). */
export const RECURRING_SCHEDULE_PREFIX = 'recurring-';
/** Names a schedule id and its tasks' ids (`<name>-<timestamp>`): short, URL- and CLI-safe. */
export const RECURRING_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;
/** A task more often than every 5 minutes is a loop, not a recurring task (each run is a whole task with its own LLM calls). */
export const MIN_RECURRING_INTERVAL_MS = 5 * 60_000;
/** `list` reads at most this many schedules of the namespace (visibility pages through them). */
export const RECURRING_LIST_MAX = 1_000;

export interface RecurringTaskOptions {
  /** The recurring task's name: its schedule is `recurring-{name}`, its tasks `recurring-{name}-<time>`. */
  name: string;
  agentId: string;
  title: string;
  description?: string;
  priority?: TaskPriority;
  /** Exactly one of `cron` (e.g. `0 9 * * 1`) or `everyMs` (at least 5 minutes). */
  cron?: string;
  everyMs?: number;
  /** IANA timezone for `cron` (default UTC). */
  timezone?: string;
  paused?: boolean;
  note?: string;
  createdBy?: string;
}

export interface RecurringTaskInfo {
  name: string;
  scheduleId: string;
  agentId: string;
  title: string;
  paused: boolean;
  note?: string;
  /** The spec as written: `cron …` or `every N min`. */
  when: string;
  nextRunAt?: Date;
  /** Task ids of the most recent runs, newest last. */
  recentTaskIds: string[];
}

/** Bad input to a recurring-task command: the message says what to fix; nothing was changed. */
export class RecurringTaskError extends Error {
  override name = 'RecurringTaskError';
}

/**
 * Recurring tasks on Temporal Schedules. A recurring task is the schedule
 * `recurring-{name}` whose action starts `taskWorkflow` without a task id: every run is its own task,
 * whose id the workflow derives from its workflow id (`task-recurring-{name}-2026-12-01T09:00:00Z` →
 * task `recurring-{name}-2026-12-01T09:00:00Z`), with the title, description and priority given here.
 * Runs overlap freely (ALLOW_ALL): last week's task still waiting in review does not skip this week's.
 * After downtime, at most one missed run is caught up.
 *
 * @example
 * const recurring = new RecurringTasks(temporalClient, db);
 * await recurring.create({ name: 'weekly-report', agentId: 'scribe', title: 'Weekly report', cron: '0 9 * * 1' });
 * await recurring.pause('weekly-report', 'holiday');
 */
export class RecurringTasks {
  readonly taskQueue: string;

  constructor(
    readonly temporal: Client,
    readonly db: Kysely<Database>,
    options: { taskQueue?: string } = {},
  ) {
    this.taskQueue = options.taskQueue ?? DEFAULT_TASK_QUEUE;
  }

  scheduleId(name: string): string {
    return `${RECURRING_SCHEDULE_PREFIX}${name}`;
  }

  private handle(name: string): ScheduleHandle {
    return this.temporal.schedule.getHandle(this.scheduleId(checkName(name)));
  }

  /** Creates the recurring task. Refuses an unknown agent, a bad spec or a name already in use. */
  async create(options: RecurringTaskOptions): Promise<{ scheduleId: string }> {
    const name = checkName(options.name);
    if (!options.title.trim()) throw new RecurringTaskError('a recurring task needs a title');
    if (options.priority !== undefined && !(TASK_PRIORITIES as readonly string[]).includes(options.priority)) {
      throw new RecurringTaskError(`priority must be one of ${TASK_PRIORITIES.join(', ')}, got ${options.priority}`);
    }
    const spec = specOf(options);
    if (!(await findAgent(this.db, options.agentId)))
      throw new RecurringTaskError(`unknown agent "${options.agentId}": no recurring task was created`);
    const scheduleId = this.scheduleId(name);
    const input: TaskWorkflowInput = {
      agentId: options.agentId,
      title: options.title,
      ...(options.description ? { description: options.description } : {}),
      ...(options.priority ? { priority: options.priority } : {}),
      createdBy: options.createdBy ?? `schedule:${scheduleId}`,
    };
    const action: ScheduleOptionsStartWorkflowAction<(input: TaskWorkflowInput) => Promise<unknown>> = {
      type: 'startWorkflow',
      workflowType: 'taskWorkflow',
      workflowId: `task-${scheduleId}`,
      args: [input],
      taskQueue: this.taskQueue,
      typedSearchAttributes: [{ key: AgentIdSearchAttribute, value: options.agentId }],
      staticSummary: `${options.agentId}: ${options.title} (recurring)`.slice(0, 200),
    };
    try {
      await this.temporal.schedule.create({
        scheduleId,
        spec,
        action,
        policies: { overlap: ScheduleOverlapPolicy.ALLOW_ALL, catchupWindow: catchupWindowOf(options) },
        memo: { recurringTask: { name, agentId: options.agentId, title: options.title, when: whenOf(options) } },
        typedSearchAttributes: [{ key: AgentIdSearchAttribute, value: options.agentId }],
        state: { paused: options.paused ?? false, ...(options.note ? { note: options.note } : {}) },
      });
    } catch (error) {
      if (error instanceof ScheduleAlreadyRunning)
        throw new RecurringTaskError(`a recurring task named "${name}" exists: delete it first or pick another name`);
      throw error;
    }
    return { scheduleId };
  }

  /** The recurring tasks of the namespace (optionally of one agent), by name. */
  async list(filter: { agentId?: string } = {}): Promise<RecurringTaskInfo[]> {
    const names: string[] = [];
    for await (const summary of this.temporal.schedule.list()) {
      if (summary.scheduleId.startsWith(RECURRING_SCHEDULE_PREFIX))
        names.push(summary.scheduleId.slice(RECURRING_SCHEDULE_PREFIX.length));
      if (names.length >= RECURRING_LIST_MAX) break;
    }
    const infos = (await Promise.all(names.sort().map((name) => this.describe(name)))).filter(
      (i): i is RecurringTaskInfo => i !== undefined,
    );
    return infos.filter((i) => !filter.agentId || i.agentId === filter.agentId);
  }

  /** One recurring task, or undefined when there is none by that name. */
  async describe(name: string): Promise<RecurringTaskInfo | undefined> {
    let d: ScheduleDescription;
    try {
      d = await this.handle(name).describe();
    } catch (error) {
      if (error instanceof ScheduleNotFoundError) return undefined;
      throw error;
    }
    // The server turns cron strings into calendar specs: the memo keeps what was written.
    const memo = (d.memo?.recurringTask ?? {}) as { agentId?: string; title?: string; when?: string };
    return {
      name,
      scheduleId: d.scheduleId,
      agentId: memo.agentId ?? '',
      title: memo.title ?? '',
      paused: d.state.paused,
      ...(d.state.note ? { note: d.state.note } : {}),
      when: memo.when ?? 'unknown',
      ...(d.info.nextActionTimes[0] ? { nextRunAt: d.info.nextActionTimes[0] } : {}),
      recentTaskIds: d.info.recentActions.map((a) => a.action.workflow.workflowId.replace(/^task-/, '')),
    };
  }

  async pause(name: string, note = 'paused by an operator'): Promise<void> {
    await this.existing(name, (h) => h.pause(note));
    await this.waitUntilVisible(name, (d) => d.state.paused);
  }

  async resume(name: string, note = 'resumed by an operator'): Promise<void> {
    await this.existing(name, (h) => h.unpause(note));
    await this.waitUntilVisible(name, (d) => !d.state.paused);
  }

  /** Creates one task now (also while paused), beside any still running. */
  async trigger(name: string): Promise<void> {
    await this.existing(name, (h) => h.trigger(ScheduleOverlapPolicy.ALLOW_ALL));
  }

  /** Deletes the recurring task; the tasks it already created stay and finish normally. */
  async delete(name: string): Promise<void> {
    await this.existing(name, (h) => h.delete());
  }

  private async existing(name: string, act: (handle: ScheduleHandle) => Promise<void>): Promise<void> {
    try {
      await act(this.handle(name));
    } catch (error) {
      if (error instanceof ScheduleNotFoundError) throw new RecurringTaskError(`no recurring task named "${name}"`);
      throw error;
    }
  }

  private async waitUntilVisible(name: string, applied: (d: ScheduleDescription) => boolean): Promise<void> {
    await waitUntilScheduleShows(this.handle(name), applied);
  }
}

function checkName(name: string): string {
  if (!RECURRING_NAME_PATTERN.test(name))
    throw new RecurringTaskError(
      `recurring task name "${name}" must match ${RECURRING_NAME_PATTERN} (lowercase letters, digits, - and _)`,
    );
  return name;
}

function specOf(options: RecurringTaskOptions): ScheduleSpec {
  if ((options.cron === undefined) === (options.everyMs === undefined))
    throw new RecurringTaskError('give exactly one of a cron expression or an interval');
  if (options.cron !== undefined) {
    if (options.cron.trim().split(/\s+/).length !== 5)
      throw new RecurringTaskError(
        `cron "${options.cron}" must have 5 fields (minute hour day month weekday), e.g. "0 9 * * 1"`,
      );
    return { cronExpressions: [options.cron.trim()], ...(options.timezone ? { timezone: options.timezone } : {}) };
  }
  const every = options.everyMs!;
  if (!Number.isFinite(every) || every < MIN_RECURRING_INTERVAL_MS) {
    throw new RecurringTaskError(
      `the interval must be at least ${MIN_RECURRING_INTERVAL_MS / 60_000} minutes, got ${every} ms`,
    );
  }
  return { intervals: [{ every }] };
}

function whenOf(options: RecurringTaskOptions): string {
  return options.cron !== undefined
    ? `cron ${options.cron.trim()}${options.timezone ? ` (${options.timezone})` : ''}`
    : `every ${Math.round(options.everyMs! / 60_000)} min`;
}

/** Catch up at most one missed run after downtime: the window is one period (a day for cron). */
function catchupWindowOf(options: RecurringTaskOptions): number {
  return options.everyMs ?? 24 * 60 * 60_000;
}
