import { runScheduleCommand } from '../../client/schedule-commands';
import { AgentSchedules } from '../../client/schedules';
import { AgentIdSearchAttribute, type HeartbeatWorkflowResult } from '../../workflows/contract';
import { DEFAULT_HEARTBEAT_INTERVAL_MS } from '../../workflows/rules/heartbeat-rules';
import { useHarness, textTurn } from '../support/harness';
import { eventually } from '../support/eventually';

/** The per-agent Temporal Schedules, against the real dev server. */
describe('agent schedules', () => {
  const h = useHarness({
    worker: true,
    beforeClose: async () => {
      for (const [kind, agentId] of created) await schedules.delete(kind, agentId);
    },
  });
  let schedules: AgentSchedules;
  const created: Array<['heartbeat' | 'consolidation', string]> = [];
  beforeAll(async () => {
    schedules = new AgentSchedules(h.temporal, { taskQueue: h.taskQueue });
  });

  test('heartbeat schedule: created, paused, triggered now, its run tagged with AgentId, resumed, re-timed, deleted', async () => {
    h.llm.setResponder(() => textTurn('HEARTBEAT_OK'));
    const agentId = await h.createAgent();
    created.push(['heartbeat', agentId]);

    expect(await schedules.createHeartbeat(agentId)).toBe(`heartbeat-${agentId}`);
    let info = (await schedules.describe('heartbeat', agentId))!;
    expect(info).toMatchObject({
      scheduleId: `heartbeat-${agentId}`,
      paused: false,
      intervalMs: DEFAULT_HEARTBEAT_INTERVAL_MS,
      recentRuns: [],
    });
    expect(info.nextRunAt!.getTime() - Date.now()).toBeLessThanOrEqual(DEFAULT_HEARTBEAT_INTERVAL_MS);
    const raw = await schedules.handle('heartbeat', agentId).describe();
    expect(raw.policies.overlap).toBe('SKIP');
    expect(raw.action).toMatchObject({
      workflowType: 'heartbeatWorkflow',
      taskQueue: h.taskQueue,
      args: [{ agentId }],
    });

    await schedules.pause('heartbeat', agentId, 'maintenance window');
    expect(await schedules.describe('heartbeat', agentId)).toMatchObject({ paused: true, note: 'maintenance window' });

    // Trigger now works while paused: one check-in, started by the schedule.
    await schedules.trigger('heartbeat', agentId);
    const run = await eventually(
      async () => (await schedules.describe('heartbeat', agentId))!.recentRuns[0],
      'the triggered run',
    );
    expect(run.workflowId.startsWith(`heartbeat-${agentId}`)).toBe(true);
    const handle = h.temporal.workflow.getHandle(run.workflowId, run.runId);
    const result: HeartbeatWorkflowResult = await handle.result();
    expect(result).toMatchObject({ agentId, outcome: 'ok' });
    const description = await handle.describe();
    expect(description.typedSearchAttributes.get(AgentIdSearchAttribute)).toBe(agentId);
    expect(description.type).toBe('heartbeatWorkflow');
    // Operators find it by agent in the UI / CLI: `AgentId = "<id>"`.
    const listed = await eventually(async () => {
      for await (const w of h.temporal.workflow.list({
        query: `AgentId = "${agentId}" AND WorkflowType = "heartbeatWorkflow"`,
      })) {
        if (w.workflowId === run.workflowId) return w;
      }
      return undefined;
    }, 'the run in visibility');
    expect(listed.runId).toBe(run.runId);

    // Nothing changed since that run, yet a manual check-in is never skipped as idle.
    const manual = await schedules.checkInNow(agentId);
    expect(await manual.result()).toMatchObject({ agentId, outcome: 'ok' });
    expect((await manual.describe()).typedSearchAttributes.get(AgentIdSearchAttribute)).toBe(agentId);

    await schedules.resume('heartbeat', agentId);
    expect((await schedules.describe('heartbeat', agentId))!.paused).toBe(false);

    await schedules.setHeartbeatInterval(agentId, 15 * 60_000);
    info = (await schedules.describe('heartbeat', agentId))!;
    expect(info).toMatchObject({ intervalMs: 15 * 60_000, paused: false });
    await expect(schedules.setHeartbeatInterval(agentId, 60_000)).rejects.toThrow(/between 5 minutes and 24 hours/);

    // Creating again updates instead of failing, keeping the paused state.
    await schedules.pause('heartbeat', agentId);
    await schedules.createHeartbeat(agentId, { intervalMs: 60 * 60_000 });
    expect(await schedules.describe('heartbeat', agentId)).toMatchObject({ intervalMs: 60 * 60_000, paused: true });

    await schedules.delete('heartbeat', agentId);
    expect(await schedules.describe('heartbeat', agentId)).toBeUndefined();
    await schedules.delete('heartbeat', agentId); // idempotent
  });

  test('consolidation schedule: daily at a local hour, triggered now', async () => {
    h.llm.setResponder(() =>
      textTurn('I reviewed my tasks today. Nothing is blocked. Tomorrow I continue with the backlog.'),
    );
    const agentId = await h.createAgent();
    created.push(['consolidation', agentId]);
    expect(await schedules.createConsolidation(agentId, { hour: 22, timezone: 'Europe/Berlin' })).toBe(
      `consolidation-${agentId}`,
    );
    const raw = await schedules.handle('consolidation', agentId).describe();
    expect(raw.spec.timezone).toBe('Europe/Berlin');
    expect(raw.spec.calendars?.[0]).toMatchObject({ hour: [{ start: 22, end: 22, step: 1 }] });
    expect(raw.action).toMatchObject({ workflowType: 'memoryConsolidationWorkflow' });

    await schedules.trigger('consolidation', agentId);
    const run = await eventually(
      async () => (await schedules.describe('consolidation', agentId))!.recentRuns[0],
      'the triggered run',
    );
    const result = await h.temporal.workflow.getHandle(run.workflowId, run.runId).result();
    expect(result).toMatchObject({ agentId, dailyReport: 'written', dream: 'too-few' });
    const log = await h.db.db
      .selectFrom('memory_daily_logs')
      .select('content')
      .where('agent_id', '=', agentId)
      .executeTakeFirstOrThrow();
    expect(log.content).toContain('Nothing is blocked.');
  });

  test('the CLI schedule commands drive the same schedules', async () => {
    h.llm.setResponder(() => textTurn('HEARTBEAT_OK'));
    const agentId = await h.createAgent();
    created.push(['heartbeat', agentId], ['consolidation', agentId]);
    const cli = (args: Omit<Parameters<typeof runScheduleCommand>[1], 'agentId'>) =>
      runScheduleCommand(schedules, { agentId, ...args });

    expect(await cli({ action: 'create', everyMinutes: 20, hour: 21 })).toEqual([
      `heartbeat-${agentId}: every 20 min`,
      `consolidation-${agentId}: daily at 21:xx UTC`,
    ]);
    await cli({ action: 'pause', kind: 'all', note: 'weekend' });
    const shown = await cli({ action: 'show' });
    expect(shown[0]).toMatch(new RegExp(`^heartbeat-${agentId}: paused \\(weekend\\) · every 20 min`));
    expect(shown[1]).toMatch(new RegExp(`^consolidation-${agentId}: paused \\(weekend\\)`));
    await cli({ action: 'interval', everyMinutes: 45 });
    await cli({ action: 'resume', kind: 'heartbeat' });
    expect(await schedules.describe('heartbeat', agentId)).toMatchObject({ paused: false, intervalMs: 45 * 60_000 });
    expect(await schedules.describe('consolidation', agentId)).toMatchObject({ paused: true });
    expect(await cli({ action: 'trigger', kind: 'heartbeat' })).toEqual([`heartbeat-${agentId}: triggered`]);
    const run = await eventually(
      async () => (await schedules.describe('heartbeat', agentId))!.recentRuns[0],
      'the triggered run',
    );
    expect(await h.temporal.workflow.getHandle(run.workflowId, run.runId).result()).toMatchObject({ outcome: 'ok' });
    await cli({ action: 'delete' });
    expect(await cli({ action: 'show' })).toEqual([`heartbeat-${agentId}: none`, `consolidation-${agentId}: none`]);
  });
});
