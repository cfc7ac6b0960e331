import type { Command } from 'commander';
import type { AgentScheduleKind, AgentSchedules } from './schedules';

/**
 * The CLI's `schedule` commands, over `AgentSchedules`. The handler is a plain function of parsed
 * arguments (tested without a terminal); `addScheduleCommands` mounts it on the CLI's commander program:
 *
 *   agents schedule create <agentId> [--every <minutes>] [--paused] [--hour <h>] [--timezone <tz>]
 *   agents schedule interval <agentId> <minutes>
 *   agents schedule pause|resume|trigger|delete <agentId> [--kind heartbeat|consolidation|all] [--note <text>]
 *   agents schedule check-in <agentId>        (one heartbeat now, never skipped as idle)
 *   agents schedule show <agentId>
 */

export type ScheduleAction = 'create' | 'interval' | 'pause' | 'resume' | 'trigger' | 'delete' | 'check-in' | 'show';

export interface ScheduleCommandArgs {
  action: ScheduleAction;
  agentId: string;
  kind?: AgentScheduleKind | 'all';
  everyMinutes?: number;
  hour?: number;
  timezone?: string;
  paused?: boolean;
  note?: string;
}

/** Runs one schedule command; returns the lines to print. */
export async function runScheduleCommand(schedules: AgentSchedules, args: ScheduleCommandArgs): Promise<string[]> {
  const kinds: AgentScheduleKind[] = !args.kind || args.kind === 'all' ? ['heartbeat', 'consolidation'] : [args.kind];
  const { agentId } = args;
  switch (args.action) {
    case 'create': {
      const out: string[] = [];
      if (kinds.includes('heartbeat')) {
        const id = await schedules.createHeartbeat(agentId, {
          intervalMs: args.everyMinutes ? args.everyMinutes * 60_000 : undefined,
          paused: args.paused,
          note: args.note,
        });
        out.push(`${id}: every ${args.everyMinutes ?? 30} min${args.paused ? ' (paused)' : ''}`);
      }
      if (kinds.includes('consolidation')) {
        const id = await schedules.createConsolidation(agentId, {
          hour: args.hour,
          timezone: args.timezone,
          paused: args.paused,
          note: args.note,
        });
        out.push(`${id}: daily at ${args.hour ?? 23}:xx ${args.timezone ?? 'UTC'}${args.paused ? ' (paused)' : ''}`);
      }
      return out;
    }
    case 'interval':
      if (!args.everyMinutes) throw new Error('give the interval in minutes');
      await schedules.setHeartbeatInterval(agentId, args.everyMinutes * 60_000);
      return [`${schedules.scheduleId('heartbeat', agentId)}: every ${args.everyMinutes} min`];
    case 'pause':
    case 'resume':
    case 'trigger':
    case 'delete': {
      const out: string[] = [];
      for (const kind of kinds) {
        if (args.action === 'pause') await schedules.pause(kind, agentId, args.note);
        else if (args.action === 'resume') await schedules.resume(kind, agentId, args.note);
        else if (args.action === 'trigger') await schedules.trigger(kind, agentId);
        else await schedules.delete(kind, agentId);
        out.push(
          `${schedules.scheduleId(kind, agentId)}: ${args.action === 'trigger' ? 'triggered' : `${args.action}d`}`,
        );
      }
      return out;
    }
    case 'check-in': {
      const handle = await schedules.checkInNow(agentId);
      return [`started ${handle.workflowId}`];
    }
    case 'show': {
      const out: string[] = [];
      for (const kind of kinds) {
        const info = await schedules.describe(kind, agentId);
        if (!info) {
          out.push(`${schedules.scheduleId(kind, agentId)}: none`);
          continue;
        }
        const every = info.intervalMs ? ` · every ${info.intervalMs / 60_000} min` : '';
        const next = info.nextRunAt ? ` · next ${info.nextRunAt.toISOString()}` : '';
        out.push(
          `${info.scheduleId}: ${info.paused ? `paused${info.note ? ` (${info.note})` : ''}` : 'active'}${every}${next} · ${info.recentRuns.length} recent runs`,
        );
      }
      return out;
    }
  }
}

/** Mounts `schedule …` on the CLI program. `open` connects lazily, so `--help` needs no server. */
export function addScheduleCommands(program: Command, open: () => Promise<AgentSchedules>): void {
  const schedule = program
    .command('schedule')
    .description("an agent's heartbeat and daily consolidation schedules (Temporal Schedules)");
  const run = async (args: ScheduleCommandArgs) => {
    for (const line of await runScheduleCommand(await open(), args)) console.log(line);
  };
  const kindOption = (kind?: string): AgentScheduleKind | 'all' | undefined => {
    if (kind === undefined || kind === 'heartbeat' || kind === 'consolidation' || kind === 'all') return kind;
    throw new Error(`--kind must be heartbeat, consolidation or all, got ${kind}`);
  };
  schedule
    .command('create <agentId>')
    .description('create (or update) the heartbeat and consolidation schedules')
    .option('--kind <kind>', 'heartbeat, consolidation or all', 'all')
    .option('--every <minutes>', 'heartbeat interval in minutes (default 30)', Number)
    .option('--hour <hour>', 'local hour of the daily consolidation (default 23)', Number)
    .option('--timezone <tz>', 'IANA timezone of the consolidation hour')
    .option('--paused', 'create paused')
    .option('--note <text>')
    .action(
      (
        agentId: string,
        o: { kind?: string; every?: number; hour?: number; timezone?: string; paused?: boolean; note?: string },
      ) =>
        run({
          action: 'create',
          agentId,
          kind: kindOption(o.kind),
          everyMinutes: o.every,
          hour: o.hour,
          timezone: o.timezone,
          paused: o.paused,
          note: o.note,
        }),
    );
  schedule
    .command('interval <agentId> <minutes>')
    .description('change the heartbeat interval (5 min – 24 h)')
    .action((agentId: string, minutes: string) => run({ action: 'interval', agentId, everyMinutes: Number(minutes) }));
  for (const action of ['pause', 'resume', 'trigger', 'delete', 'show'] as const) {
    schedule
      .command(`${action} <agentId>`)
      .option('--kind <kind>', 'heartbeat, consolidation or all', action === 'trigger' ? 'heartbeat' : 'all')
      .option('--note <text>')
      .action((agentId: string, o: { kind?: string; note?: string }) =>
        run({ action, agentId, kind: kindOption(o.kind), note: o.note }),
      );
  }
  schedule
    .command('check-in <agentId>')
    .description('run one heartbeat now, even if nothing changed')
    .action((agentId: string) => run({ action: 'check-in', agentId }));
}
