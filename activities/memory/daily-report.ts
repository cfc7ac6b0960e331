import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import type { AgentConfig } from '../store/agents';

/** Managers report on their day in the first heartbeat after 20:00 local time. */
export const DAILY_REPORT_LOCAL_HOUR = 20;
/** The report is at most 500 words. */
export const DAILY_REPORT_MAX_WORDS = 500;
/** The activity shown to write it from is capped at 3,000 characters. */
export const DAILY_REPORT_ACTIVITY_CHARS = 3_000;
/** Tasks listed in the activity (the newest first); the character cap usually binds first. */
const DAILY_REPORT_TASKS_MAX = 50;

/** The notification title that marks the day's report as sent (one per manager and local day). */
export const dailyReportTitle = (day: string): string => `Daily Report — ${day}`;

export interface DailyReportDue {
  day: string;
  /** Today's tasks of the manager and of the tasks it created, one line each, ≤ 3,000 chars. */
  activity: string;
}

/** The local date and the time elapsed since local midnight, in the agent's timezone (UTC when absent or unknown). */
function localClock(now: Date, timezone?: string): { day: string; hour: number; sinceMidnightMs: number } {
  let parts: Intl.DateTimeFormatPart[];
  try {
    parts = new Intl.DateTimeFormat('en-CA', {
      timeZone: timezone || 'UTC',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      hourCycle: 'h23',
    }).formatToParts(now);
  } catch {
    parts = new Intl.DateTimeFormat('en-CA', {
      timeZone: 'UTC',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      hourCycle: 'h23',
    }).formatToParts(now);
  }
  const get = (type: string) => parts.find((p) => p.type === type)?.value ?? '0';
  const hour = Number(get('hour'));
  return {
    day: `${get('year')}-${get('month')}-${get('day')}`,
    hour,
    sinceMidnightMs: ((hour * 60 + Number(get('minute'))) * 60 + Number(get('second'))) * 1000,
  };
}

/**
 * Whether a manager owes today's report: its config says `position: "manager"`, it is
 * 20:00 or later in its timezone, and it has not sent a notification titled `Daily Report — <day>`
 * today. Returns what to write it from, or undefined. Workers never owe one.
 */
export async function dailyReportDue(
  db: Kysely<Database>,
  agentId: string,
  config: Pick<AgentConfig, 'position' | 'timezone'>,
  now: Date,
): Promise<DailyReportDue | undefined> {
  if (config.position !== 'manager') return undefined;
  const clock = localClock(now, config.timezone);
  if (clock.hour < DAILY_REPORT_LOCAL_HOUR) return undefined;
  const sent = await db
    .selectFrom('notifications')
    .select('id')
    .where('agent_id', '=', agentId)
    .where('title', '=', dailyReportTitle(clock.day))
    .executeTakeFirst();
  if (sent) return undefined;
  const tasks = await db
    .selectFrom('tasks')
    .select(['id', 'title', 'state', 'agent_id'])
    .where((eb) => eb.or([eb('agent_id', '=', agentId), eb('created_by', '=', `agent:${agentId}`)]))
    .where('updated_at', '>=', new Date(now.getTime() - clock.sinceMidnightMs))
    .orderBy('updated_at', 'desc')
    .limit(DAILY_REPORT_TASKS_MAX)
    .execute();
  const lines = tasks.map(
    (t) => `- [${t.state}] ${t.title} (${t.agent_id === agentId ? 'mine' : t.agent_id}, ${t.id})`,
  );
  let activity = '';
  for (const line of lines) {
    if (activity.length + line.length + 1 > DAILY_REPORT_ACTIVITY_CHARS) break;
    activity += `${activity ? '\n' : ''}${line}`;
  }
  return { day: clock.day, activity: activity || '- no task changed today' };
}
