import {
  ScheduleAlreadyRunning,
  ScheduleNotFoundError,
  ScheduleOverlapPolicy,
  type Client,
  type ScheduleDescription,
  type ScheduleHandle,
  type ScheduleOptionsStartWorkflowAction,
  type ScheduleSpec,
  type WorkflowHandle,
} from '@temporalio/client';
import {
  AgentIdSearchAttribute,
  consolidationScheduleId,
  DEFAULT_TASK_QUEUE,
  heartbeatScheduleId,
  type ConsolidationWorkflowInput,
  type HeartbeatWorkflowInput,
} from '../workflows/contract';
import {
  clampHeartbeatInterval,
  DEFAULT_CONSOLIDATION_HOUR,
  DEFAULT_HEARTBEAT_INTERVAL_MS,
  HEARTBEAT_RUN_TIMEOUT_MS,
  heartbeatPhaseMs,
} from '../workflows/rules/heartbeat-rules';

export type AgentScheduleKind = 'heartbeat' | 'consolidation';

/** A consolidation (one report + one dream) that takes longer than this is stuck. */
export const CONSOLIDATION_RUN_TIMEOUT_MS = 60 * 60_000;
/** Daily consolidations of many agents are spread over this many minutes after the hour. */
export const CONSOLIDATION_SPREAD_MINUTES = 50;
/**
 * Schedule changes are applied by the server asynchronously and `describe` can lag behind them; each
 * helper waits (up to this long) until its change is visible, so that a following read-modify-write
 * (an interval change) cannot write back a stale paused state.
 */
export const SCHEDULE_APPLY_WAIT_MS = 10_000;
const SCHEDULE_APPLY_POLL_MS = 100;

export interface HeartbeatScheduleOptions {
  /** Default 30 minutes; between 5 minutes and 24 hours. */
  intervalMs?: number;
  /** Create the schedule paused (e.g. until the agent is set up). */
  paused?: boolean;
  note?: string;
}

export interface ConsolidationScheduleOptions {
  /** Local hour of day (0–23), default 23: the report covers the day that is ending. */
  hour?: number;
  /** IANA timezone, default UTC (use the agent's `timezone` config). */
  timezone?: string;
  paused?: boolean;
  note?: string;
}

export interface AgentScheduleInfo {
  scheduleId: string;
  paused: boolean;
  note?: string;
  /** Heartbeats: the interval in ms. */
  intervalMs?: number;
  nextRunAt?: Date;
  /** The most recent runs the schedule started, newest last. */
  recentRuns: Array<{ workflowId: string; runId: string; scheduledAt: Date; startedAt: Date }>;
}

/**
 * The Temporal Schedules that keep an agent alive between tasks: `heartbeat-{agentId}` (every 30
 * minutes by default) starts `heartbeatWorkflow`, and `consolidation-{agentId}` (daily) starts
 * `memoryConsolidationWorkflow`. Both skip a tick while the previous run is still going (overlap SKIP),
 * catch up at most one missed tick after downtime, and tag their runs with the `AgentId` search
 * attribute, so the Temporal UI lists and pauses them per agent.
 *
 * @example
 * const schedules = new AgentSchedules(temporalClient);
 * await schedules.createHeartbeat('reviewer', { intervalMs: 15 * 60_000 });
 * await schedules.createConsolidation('reviewer', { hour: 22, timezone: 'Europe/Berlin' });
 * await schedules.pause('heartbeat', 'reviewer', 'holiday');
 * await schedules.trigger('heartbeat', 'reviewer'); // one check-in now, even while paused
 */
export class AgentSchedules {
  readonly taskQueue: string;

  constructor(
    readonly temporal: Client,
    options: { taskQueue?: string } = {},
  ) {
    this.taskQueue = options.taskQueue ?? DEFAULT_TASK_QUEUE;
  }

  scheduleId(kind: AgentScheduleKind, agentId: string): string {
    return kind === 'heartbeat' ? heartbeatScheduleId(agentId) : consolidationScheduleId(agentId);
  }

  handle(kind: AgentScheduleKind, agentId: string): ScheduleHandle {
    return this.temporal.schedule.getHandle(this.scheduleId(kind, agentId));
  }

  /**
   * Creates the heartbeat schedule, or — when it exists — brings its interval and action up to date
   * (keeping its paused state). Returns the schedule id.
   */
  async createHeartbeat(agentId: string, options: HeartbeatScheduleOptions = {}): Promise<string> {
    const intervalMs = clampHeartbeatInterval(options.intervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS);
    const action: ScheduleOptionsStartWorkflowAction<(input: HeartbeatWorkflowInput) => Promise<unknown>> = {
      type: 'startWorkflow',
      workflowType: 'heartbeatWorkflow',
      workflowId: heartbeatScheduleId(agentId),
      args: [{ agentId }],
      taskQueue: this.taskQueue,
      workflowExecutionTimeout: HEARTBEAT_RUN_TIMEOUT_MS,
      typedSearchAttributes: [{ key: AgentIdSearchAttribute, value: agentId }],
      staticSummary: `heartbeat of ${agentId}`,
    };
    return this.upsert('heartbeat', agentId, heartbeatSpec(agentId, intervalMs), action, intervalMs, options);
  }

  /** Creates (or updates) the daily consolidation schedule: daily report + dream. */
  async createConsolidation(agentId: string, options: ConsolidationScheduleOptions = {}): Promise<string> {
    const hour = options.hour ?? DEFAULT_CONSOLIDATION_HOUR;
    if (!Number.isInteger(hour) || hour < 0 || hour > 23)
      throw new Error(`consolidation hour must be 0–23, got ${hour}`);
    const minute = Math.floor(heartbeatPhaseMs(agentId, CONSOLIDATION_SPREAD_MINUTES * 60_000) / 60_000);
    const spec: ScheduleSpec = {
      calendars: [{ hour, minute }],
      ...(options.timezone ? { timezone: options.timezone } : {}),
    };
    const action: ScheduleOptionsStartWorkflowAction<(input: ConsolidationWorkflowInput) => Promise<unknown>> = {
      type: 'startWorkflow',
      workflowType: 'memoryConsolidationWorkflow',
      workflowId: consolidationScheduleId(agentId),
      args: [{ agentId }],
      taskQueue: this.taskQueue,
      workflowExecutionTimeout: CONSOLIDATION_RUN_TIMEOUT_MS,
      typedSearchAttributes: [{ key: AgentIdSearchAttribute, value: agentId }],
      staticSummary: `memory consolidation of ${agentId}`,
    };
    return this.upsert('consolidation', agentId, spec, action, 24 * 60 * 60_000, options);
  }

  /** Changes the heartbeat interval (5 min – 24 h); the phase within the interval stays per agent. */
  async setHeartbeatInterval(agentId: string, intervalMs: number): Promise<void> {
    const every = clampHeartbeatInterval(intervalMs);
    await this.handle('heartbeat', agentId).update((previous) => ({
      ...previous,
      spec: heartbeatSpec(agentId, every),
      policies: { ...previous.policies, catchupWindow: every },
      state: { paused: previous.state.paused, note: previous.state.note },
    }));
    await this.waitUntilVisible('heartbeat', agentId, (d) => d.spec.intervals?.[0]?.every === every);
  }

  async pause(kind: AgentScheduleKind, agentId: string, note = 'paused by an operator'): Promise<void> {
    await this.handle(kind, agentId).pause(note);
    await this.waitUntilVisible(kind, agentId, (d) => d.state.paused);
  }

  async resume(kind: AgentScheduleKind, agentId: string, note = 'resumed by an operator'): Promise<void> {
    await this.handle(kind, agentId).unpause(note);
    await this.waitUntilVisible(kind, agentId, (d) => !d.state.paused);
  }

  /** Starts one run now (also while paused). Skipped when a run of this schedule is still going. */
  async trigger(kind: AgentScheduleKind, agentId: string): Promise<void> {
    await this.handle(kind, agentId).trigger(ScheduleOverlapPolicy.SKIP);
  }

  /**
   * Starts one heartbeat now outside the schedule, skipping the idle check (`force`): for "check in
   * now, whatever changed". `trigger('heartbeat', …)` instead runs the schedule's own action, which may
   * be skipped as idle. The run is tagged with AgentId like scheduled ones.
   */
  async checkInNow(agentId: string): Promise<WorkflowHandle> {
    return this.temporal.workflow.start('heartbeatWorkflow', {
      workflowId: `${heartbeatScheduleId(agentId)}-manual-${Date.now()}`,
      taskQueue: this.taskQueue,
      args: [{ agentId, force: true } satisfies HeartbeatWorkflowInput],
      workflowExecutionTimeout: HEARTBEAT_RUN_TIMEOUT_MS,
      typedSearchAttributes: [{ key: AgentIdSearchAttribute, value: agentId }],
      staticSummary: `heartbeat of ${agentId} (manual)`,
    });
  }

  /** Deletes the schedule; runs it already started finish normally. A missing schedule is not an error. */
  async delete(kind: AgentScheduleKind, agentId: string): Promise<void> {
    try {
      await this.handle(kind, agentId).delete();
    } catch (error) {
      if (!(error instanceof ScheduleNotFoundError)) throw error;
    }
  }

  /** Both schedules of an agent, e.g. when the agent is removed. */
  async deleteAll(agentId: string): Promise<void> {
    await this.delete('heartbeat', agentId);
    await this.delete('consolidation', agentId);
  }

  /** The schedule's state and recent runs, or undefined when it does not exist. */
  async describe(kind: AgentScheduleKind, agentId: string): Promise<AgentScheduleInfo | undefined> {
    let d: ScheduleDescription;
    try {
      d = await this.handle(kind, agentId).describe();
    } catch (error) {
      if (error instanceof ScheduleNotFoundError) return undefined;
      throw error;
    }
    const interval = d.spec.intervals?.[0];
    return {
      scheduleId: d.scheduleId,
      paused: d.state.paused,
      ...(d.state.note ? { note: d.state.note } : {}),
      ...(interval ? { intervalMs: interval.every } : {}),
      ...(d.info.nextActionTimes[0] ? { nextRunAt: d.info.nextActionTimes[0] } : {}),
      recentRuns: d.info.recentActions.map((a) => ({
        workflowId: a.action.workflow.workflowId,
        runId: a.action.workflow.firstExecutionRunId,
        scheduledAt: a.scheduledAt,
        startedAt: a.takenAt,
      })),
    };
  }

  private async upsert(
    kind: AgentScheduleKind,
    agentId: string,
    spec: ScheduleSpec,
    action: ScheduleOptionsStartWorkflowAction<(input: { agentId: string }) => Promise<unknown>>,
    catchupWindowMs: number,
    options: { paused?: boolean; note?: string },
  ): Promise<string> {
    const scheduleId = this.scheduleId(kind, agentId);
    // After downtime, run at most the one most recent missed tick (queued heartbeats collapse).
    const policies = { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: catchupWindowMs };
    try {
      await this.temporal.schedule.create({
        scheduleId,
        spec,
        action,
        policies,
        typedSearchAttributes: [{ key: AgentIdSearchAttribute, value: agentId }],
        state: { paused: options.paused ?? false, ...(options.note ? { note: options.note } : {}) },
      });
    } catch (error) {
      if (!(error instanceof ScheduleAlreadyRunning)) throw error;
      let paused = false;
      await this.handle(kind, agentId).update((previous) => {
        paused = options.paused ?? previous.state.paused;
        return {
          ...previous,
          spec,
          action,
          policies: { ...previous.policies, ...policies },
          state: { paused, note: options.note ?? previous.state.note },
        };
      });
      const every = spec.intervals?.[0]?.every;
      await this.waitUntilVisible(
        kind,
        agentId,
        (d) => d.state.paused === paused && (every === undefined || d.spec.intervals?.[0]?.every === every),
      );
    }
    return scheduleId;
  }

  private async waitUntilVisible(
    kind: AgentScheduleKind,
    agentId: string,
    applied: (d: ScheduleDescription) => boolean,
  ): Promise<void> {
    await waitUntilScheduleShows(this.handle(kind, agentId), applied);
  }
}

/**
 * Polls `describe` until a schedule change is visible or SCHEDULE_APPLY_WAIT_MS passed (the change was
 * accepted either way), so a following read-modify-write cannot write back a stale state.
 */
export async function waitUntilScheduleShows(
  handle: ScheduleHandle,
  applied: (d: ScheduleDescription) => boolean,
): Promise<void> {
  const deadline = Date.now() + SCHEDULE_APPLY_WAIT_MS;
  while (Date.now() < deadline) {
    if (applied(await handle.describe())) return;
    await new Promise((r) => setTimeout(r, SCHEDULE_APPLY_POLL_MS));
  }
}

function heartbeatSpec(agentId: string, intervalMs: number): ScheduleSpec {
  return { intervals: [{ every: intervalMs, offset: heartbeatPhaseMs(agentId, intervalMs) }] };
}
