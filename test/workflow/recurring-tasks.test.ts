import { randomUUID } from 'node:crypto';
import { RecurringTaskError, RecurringTasks } from '../../client/recurring-tasks';
import { runRecurringTaskCommand } from '../../client/recurring-task-commands';
import { useHarness, submitTurn, textTurn } from '../support/harness';
import { eventually } from '../support/eventually';
import { offersTools } from './task-support';

/**
 * Recurring tasks on Temporal Schedules, on the real Temporal server and PostgreSQL with the fake
 * provider: a schedule triggered twice creates two tasks (their ids derived from the runs' workflow
 * ids), each run by the agent; list, pause, resume and delete through the CLI handler; bad input refused.
 */
describe('recurring tasks', () => {
  const h = useHarness({
    beforeClose: async () => {
      await recurring.delete(name).catch(() => undefined);
    },
  });
  let recurring: RecurringTasks;
  let agentId: string;
  const name = `weekly-${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    recurring = new RecurringTasks(h.temporal, h.db.db, { taskQueue: h.taskQueue });
    agentId = await h.createAgent();
    h.llm.setResponder((request) =>
      offersTools(request) ? submitTurn('weekly report written') : textTurn('Nothing to add.'),
    );
    await h.startWorker();
  });

  const tasksOfSchedule = () =>
    h.db.db
      .selectFrom('tasks')
      .selectAll()
      .where('agent_id', '=', agentId)
      .where('id', 'like', `recurring-${name}-%`)
      .orderBy('created_at')
      .execute();

  test('a schedule triggered twice creates two tasks, each run by the agent', async () => {
    // Daily: it never fires by itself during the test; the triggers create the tasks.
    const created = await runRecurringTaskCommand(recurring, {
      action: 'create',
      name,
      agentId,
      title: 'Weekly report',
      priority: 'high',
      everyMinutes: String(24 * 60),
    });
    expect(created).toEqual([`recurring task ${name} created (schedule recurring-${name})`]);

    await runRecurringTaskCommand(recurring, { action: 'trigger', name });
    const [first] = await eventually(
      async () => ((await tasksOfSchedule()).length === 1 ? tasksOfSchedule() : undefined),
      'the first task',
    );
    // A run's workflow id carries its time to the second: trigger again in a later second.
    await new Promise((r) => setTimeout(r, 1_100 - (Date.now() % 1_000)));
    await runRecurringTaskCommand(recurring, { action: 'trigger', name });
    const tasks = await eventually(
      async () => {
        const rows = await tasksOfSchedule();
        return rows.length === 2 && rows.every((r) => r.state === 'review') ? rows : undefined;
      },
      'two tasks in review',
      60_000,
    );

    expect(tasks[0]!.id).toBe(first!.id);
    expect(new Set(tasks.map((t) => t.id)).size).toBe(2);
    for (const task of tasks) {
      expect(task.id).toMatch(new RegExp(`^recurring-${name}-\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}Z$`));
      expect([task.title, task.priority, task.agent_id]).toEqual(['Weekly report', 'high', agentId]);
      expect((await h.client.getStatus(task.id)).submission).toBe('weekly report written');
    }

    const info = await eventually(async () => {
      const d = await recurring.describe(name);
      return d && d.recentTaskIds.length === 2 ? d : undefined;
    }, 'the schedule lists both runs');
    expect(info).toMatchObject({
      agentId,
      title: 'Weekly report',
      paused: false,
      when: 'every 1440 min',
      recentTaskIds: tasks.map((t) => t.id),
    });
  }, 90_000);

  test('list, pause, resume and delete', async () => {
    const listed = await eventually(async () => {
      const lines = await runRecurringTaskCommand(recurring, { action: 'list', agentId });
      return lines.some((l) => l.startsWith(name)) ? lines : undefined;
    }, 'the schedule in the list');
    expect(listed.find((l) => l.startsWith(name))).toContain(`active  ${agentId}  every 1440 min  Weekly report`);

    await runRecurringTaskCommand(recurring, { action: 'pause', name, note: 'holiday' });
    expect(await recurring.describe(name)).toMatchObject({ paused: true, note: 'holiday' });
    await runRecurringTaskCommand(recurring, { action: 'resume', name });
    expect((await recurring.describe(name))?.paused).toBe(false);

    expect(await runRecurringTaskCommand(recurring, { action: 'delete', name })).toEqual([
      `recurring task ${name} deleted (the tasks it created stay)`,
    ]);
    expect(await recurring.describe(name)).toBeUndefined();
    expect(await tasksOfSchedule()).toHaveLength(2);
  }, 60_000);

  test('bad input is refused and creates nothing', async () => {
    const bad = `bad-${randomUUID().slice(0, 8)}`;
    await expect(recurring.create({ name: bad, agentId: 'nobody', title: 'x', everyMs: 60 * 60_000 })).rejects.toThrow(
      'unknown agent "nobody": no recurring task was created',
    );
    await expect(recurring.create({ name: bad, agentId, title: 'x', everyMs: 60_000 })).rejects.toThrow(
      'the interval must be at least 5 minutes',
    );
    await expect(recurring.create({ name: bad, agentId, title: 'x', cron: '0 9 * *' })).rejects.toThrow(
      'must have 5 fields',
    );
    await expect(recurring.create({ name: bad, agentId, title: 'x' })).rejects.toThrow(
      'give exactly one of a cron expression or an interval',
    );
    await expect(
      recurring.create({ name: 'Bad Name', agentId, title: 'x', everyMs: 60 * 60_000 }),
    ).rejects.toBeInstanceOf(RecurringTaskError);
    await expect(recurring.pause(bad)).rejects.toThrow(`no recurring task named "${bad}"`);
    expect(await recurring.describe(bad)).toBeUndefined();
  });
});
