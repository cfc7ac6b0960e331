import { randomUUID } from 'node:crypto';
import type { ScriptedResponse } from '../fake-llm';
import { dailyReportTitle } from '../../activities/memory/daily-report';
import { localDay } from '../../activities/memory';
import type { HeartbeatWorkflowResult } from '../../workflows/contract';
import { useHarness, submitTurn, textTurn, toolTurn } from '../support/harness';
import { bodyText } from './task-support';

/** An `Etc/GMT…` zone whose local hour now satisfies `wanted` (offsets −12…+14 cover every hour). */
function zoneWhereHourIs(wanted: (hour: number) => boolean): string {
  const utcHour = new Date().getUTCHours();
  for (let offset = -12; offset <= 14; offset++) {
    if (wanted((utcHour + offset + 24) % 24))
      return offset === 0 ? 'Etc/GMT' : `Etc/GMT${offset > 0 ? '-' : '+'}${Math.abs(offset)}`;
  }
  throw new Error('no zone found');
}

/**
 * The manager's daily report, on the real Temporal server and PostgreSQL with the fake
 * provider: after 20:00 in its timezone a manager's heartbeat asks for today's report, listing today's
 * tasks; the report sent with notify_user is stored, and the next check-in is idle again. Workers and
 * managers before 20:00 are not asked.
 */
describe('manager daily report', () => {
  const h = useHarness();
  const turns: ScriptedResponse[] = [];
  const prompts: string[] = [];
  beforeAll(async () => {
    h.llm.setResponder((request) => {
      const text = bodyText(request);
      if (text.includes('[HEARTBEAT CHECK-IN]')) {
        prompts.push(text);
        return turns.shift() ?? textTurn('HEARTBEAT_OK');
      }
      return Array.isArray(request.body.tools) && (request.body.tools as unknown[]).length
        ? submitTurn('done')
        : textTurn('ok');
    });
    await h.startWorker();
  });

  const heartbeat = (agentId: string, force: boolean): Promise<HeartbeatWorkflowResult> =>
    h.temporal.workflow.execute('heartbeatWorkflow', {
      workflowId: `hb-${agentId}-${randomUUID().slice(0, 8)}`,
      taskQueue: h.taskQueue,
      args: [{ agentId, force }],
    });

  test("after 20:00 a manager is asked for today's report once; it is stored; the next check-in is idle", async () => {
    // 20:00–22:59 local: far from midnight, so the day does not change during the test.
    const timezone = zoneWhereHourIs((hour) => hour >= 20 && hour <= 22);
    const manager = await h.createAgent({ position: 'manager', timezone });
    const day = localDay(new Date(), timezone);
    await h.db.db
      .insertInto('tasks')
      .values({
        id: randomUUID(),
        agent_id: manager,
        title: 'Plan the sprint',
        description: 'plan',
        state: 'completed',
      })
      .execute();

    turns.push(
      toolTurn('notify_user', {
        title: dailyReportTitle(day),
        message: 'Today: planned the sprint. Blocked: nothing. Next: start it.',
      }),
      textTurn('Reported.'),
    );
    const before = prompts.length;
    expect(await heartbeat(manager, false)).toMatchObject({ outcome: 'acted', toolIterations: 1 });
    const prompt = prompts[before]!;
    expect(prompt).toContain('## Daily Report Required');
    expect(prompt).toContain(`title \\"${dailyReportTitle(day)}\\"`);
    expect(prompt).toContain('- [completed] Plan the sprint (mine');
    expect(prompt).toContain('As a manager you are responsible for');
    const reports = await h.db.db
      .selectFrom('notifications')
      .select(['title', 'body'])
      .where('agent_id', '=', manager)
      .execute();
    expect(reports).toEqual([
      { title: dailyReportTitle(day), body: 'Today: planned the sprint. Blocked: nothing. Next: start it.' },
    ]);

    // Reported: nothing else changed, so the next check-in costs no LLM call; a forced one is not asked again.
    const calls = prompts.length;
    expect(await heartbeat(manager, false)).toMatchObject({ outcome: 'skipped' });
    expect(prompts.length).toBe(calls);
    expect(await heartbeat(manager, true)).toMatchObject({ outcome: 'ok' });
    expect(prompts[calls]).not.toContain('## Daily Report Required');
  }, 90_000);

  test('a worker after 20:00 and a manager before 20:00 are not asked', async () => {
    const worker = await h.createAgent({
      position: 'worker',
      timezone: zoneWhereHourIs((hour) => hour >= 20 && hour <= 22),
    });
    const early = await h.createAgent({
      position: 'manager',
      timezone: zoneWhereHourIs((hour) => hour >= 9 && hour <= 17),
    });
    for (const agentId of [worker, early]) {
      const before = prompts.length;
      expect(await heartbeat(agentId, true)).toMatchObject({ outcome: 'ok' });
      expect(prompts[before]).toContain('[HEARTBEAT CHECK-IN]');
      expect(prompts[before]).not.toContain('## Daily Report Required');
    }
  }, 90_000);
});
