/**
 * The CLI's `recurring` commands, over `RecurringTasks`. The handler is a plain function of parsed
 * arguments returning the lines to print (testable without a terminal); `addRecurringTaskCommands`
 * mounts it:
 *
 *   agents recurring create <name> --agent <id> --title <t> (--cron "<m h dom mon dow>" [--timezone <tz>] | --every <minutes>)
 *                           [--description <d>] [--priority <p>] [--paused]
 *   agents recurring list [--agent <id>]
 *   agents recurring pause|resume <name> [--note <text>]
 *   agents recurring trigger|delete <name>
 */
import type { Command } from 'commander';
import type { TaskPriority } from '../workflows/contract';
import type { RecurringTasks } from './recurring-tasks';

export type RecurringTaskCommand =
  | {
      action: 'create';
      name: string;
      agentId: string;
      title: string;
      description?: string;
      priority?: string;
      cron?: string;
      everyMinutes?: string;
      timezone?: string;
      paused?: boolean;
    }
  | { action: 'list'; agentId?: string }
  | { action: 'pause' | 'resume'; name: string; note?: string }
  | { action: 'trigger' | 'delete'; name: string };

/** Runs one command; returns the lines to print. Bad input throws a `RecurringTaskError` that says what to fix. */
export async function runRecurringTaskCommand(recurring: RecurringTasks, cmd: RecurringTaskCommand): Promise<string[]> {
  switch (cmd.action) {
    case 'create': {
      const everyMs = cmd.everyMinutes === undefined ? undefined : Number(cmd.everyMinutes) * 60_000;
      const { scheduleId } = await recurring.create({
        name: cmd.name,
        agentId: cmd.agentId,
        title: cmd.title,
        description: cmd.description,
        priority: cmd.priority as TaskPriority | undefined,
        cron: cmd.cron,
        everyMs,
        timezone: cmd.timezone,
        paused: cmd.paused,
        createdBy: process.env.USER,
      });
      return [`recurring task ${cmd.name} created (schedule ${scheduleId})${cmd.paused ? ', paused' : ''}`];
    }
    case 'list': {
      const all = await recurring.list({ agentId: cmd.agentId });
      if (all.length === 0) return ['no recurring tasks'];
      return all.map(
        (r) =>
          `${r.name.padEnd(24)} ${r.paused ? 'paused ' : 'active '} ${r.agentId}  ${r.when}  ${r.title}` +
          `${r.nextRunAt ? `  next ${r.nextRunAt.toISOString()}` : ''}${r.recentTaskIds.length ? `  last task ${r.recentTaskIds.at(-1)}` : ''}`,
      );
    }
    case 'pause':
      await recurring.pause(cmd.name, cmd.note);
      return [`recurring task ${cmd.name} paused`];
    case 'resume':
      await recurring.resume(cmd.name, cmd.note);
      return [`recurring task ${cmd.name} resumed`];
    case 'trigger':
      await recurring.trigger(cmd.name);
      return [`recurring task ${cmd.name} triggered: one task starts now`];
    case 'delete':
      await recurring.delete(cmd.name);
      return [`recurring task ${cmd.name} deleted (the tasks it created stay)`];
  }
}

export function addRecurringTaskCommands(program: Command, open: () => Promise<RecurringTasks>): void {
  const run = async (cmd: RecurringTaskCommand) => {
    for (const line of await runRecurringTaskCommand(await open(), cmd)) console.log(line);
  };
  const recurring = program
    .command('recurring')
    .description('recurring tasks: a Temporal Schedule that creates a task each time');
  recurring
    .command('create <name>')
    .requiredOption('--agent <id>', 'assignee agent id')
    .requiredOption('--title <title>')
    .option('--description <text>')
    .option('--priority <priority>')
    .option('--cron <expression>', 'five-field cron, e.g. "0 9 * * 1"')
    .option('--timezone <tz>', 'IANA timezone for --cron')
    .option('--every <minutes>', 'an interval instead of --cron (at least 5)')
    .option('--paused', 'create it paused')
    .action(
      (
        name: string,
        o: {
          agent: string;
          title: string;
          description?: string;
          priority?: string;
          cron?: string;
          timezone?: string;
          every?: string;
          paused?: boolean;
        },
      ) =>
        run({
          action: 'create',
          name,
          agentId: o.agent,
          title: o.title,
          description: o.description,
          priority: o.priority,
          cron: o.cron,
          everyMinutes: o.every,
          timezone: o.timezone,
          paused: o.paused,
        }),
    );
  recurring
    .command('list')
    .option('--agent <id>')
    .action((o: { agent?: string }) => run({ action: 'list', agentId: o.agent }));
  for (const action of ['pause', 'resume'] as const) {
    recurring
      .command(`${action} <name>`)
      .option('--note <text>')
      .action((name: string, o: { note?: string }) => run({ action, name, note: o.note }));
  }
  recurring
    .command('trigger <name>')
    .description('create one task now')
    .action((name: string) => run({ action: 'trigger', name }));
  recurring
    .command('delete <name>')
    .description('stop creating tasks; existing tasks stay')
    .action((name: string) => run({ action: 'delete', name }));
}
