/**
 * Dynamic value quantisation: coarse labels instead of exact values, so Tier 3 of the
 * system prompt changes less from call to call. Pure: the caller passes `now`.
 */
import {
  MAILBOX_ELAPSED_FEW_MINUTES_MS,
  MAILBOX_ELAPSED_JUST_STARTED_MS,
  MAILBOX_ELAPSED_MINUTES_MS,
  NOTEBOOK_AGE_APPROX_HOURS_MS,
  NOTEBOOK_AGE_JUST_NOW_MS,
  NOTEBOOK_AGE_RECENT_MS,
} from './limits';

/** An instant as a Date, epoch milliseconds or an ISO-8601 string. */
export type Instant = Date | number | string;

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;

export function toEpochMs(instant: Instant): number {
  if (instant instanceof Date) return instant.getTime();
  if (typeof instant === 'number') return instant;
  return Date.parse(instant);
}

/** Milliseconds from `then` to `now`; 0 when `then` is in the future or unparseable. */
function elapsedMs(then: Instant, now: Instant): number {
  const diff = toEpochMs(now) - toEpochMs(then);
  return Number.isFinite(diff) && diff > 0 ? diff : 0;
}

/** "just now" (< 5 min), "recent" (< 30 min), "~Nh ago" (< 2 h, N rounded, ≥ 1), else "Nh ago" (N floored). */
export function notebookAgeLabel(updatedAt: Instant, now: Instant): string {
  const age = elapsedMs(updatedAt, now);
  if (age < NOTEBOOK_AGE_JUST_NOW_MS) return 'just now';
  if (age < NOTEBOOK_AGE_RECENT_MS) return 'recent';
  if (age < NOTEBOOK_AGE_APPROX_HOURS_MS) return `~${Math.max(1, Math.round(age / HOUR_MS))}h ago`;
  return `${Math.floor(age / HOUR_MS)}h ago`;
}

/** "just started" (< 1 min), "a few minutes" (< 5 min), "~Nmin" (< 60 min, N floored), else "Nh" (N floored). */
export function mailboxElapsedLabel(startedAt: Instant, now: Instant): string {
  const elapsed = elapsedMs(startedAt, now);
  if (elapsed < MAILBOX_ELAPSED_JUST_STARTED_MS) return 'just started';
  if (elapsed < MAILBOX_ELAPSED_FEW_MINUTES_MS) return 'a few minutes';
  if (elapsed < MAILBOX_ELAPSED_MINUTES_MS) return `~${Math.floor(elapsed / MINUTE_MS)}min`;
  return `${Math.floor(elapsed / HOUR_MS)}h`;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string): Intl.DateTimeFormat | undefined {
  let formatter = formatters.get(timeZone);
  if (!formatter) {
    try {
      formatter = new Intl.DateTimeFormat('en-US', {
        timeZone,
        year: 'numeric',
        month: '2-digit',
        day: '2-digit',
        hour: '2-digit',
        minute: '2-digit',
        hourCycle: 'h23',
        timeZoneName: 'longOffset',
      });
    } catch {
      return undefined; // unknown IANA zone
    }
    formatters.set(timeZone, formatter);
  }
  return formatter;
}

/**
 * Minute-level timestamp in the agent's zone: `YYYY-MM-DD HH:mm (TZ, UTC±hh:mm)`, e.g.
 * `2026-05-25 14:07 (Europe/Berlin, UTC+02:00)`. Seconds are dropped. An unknown zone falls
 * back to UTC rather than failing the prompt.
 */
export function formatMinuteTimestamp(now: Instant, timeZone = 'UTC'): string {
  const ms = toEpochMs(now);
  const formatter = formatterFor(timeZone);
  if (!formatter) return formatMinuteTimestamp(ms, 'UTC');
  const parts: Record<string, string> = {};
  for (const part of formatter.formatToParts(new Date(ms))) parts[part.type] = part.value;
  const offset = (parts['timeZoneName'] ?? 'GMT').replace(/^GMT/, '') || '+00:00';
  return `${parts['year']}-${parts['month']}-${parts['day']} ${parts['hour']}:${parts['minute']} (${timeZone}, UTC${offset})`;
}

/** Minute-level UTC stamp `YYYY-MM-DD HH:mm` for list items (activity, runs). */
export function formatMinuteUtc(instant: Instant): string {
  const ms = toEpochMs(instant);
  if (!Number.isFinite(ms)) return 'unknown time';
  return new Date(ms).toISOString().slice(0, 16).replace('T', ' ');
}
