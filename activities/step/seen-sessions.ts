import type { AgentRow, TaskRow } from '../../schema/database';
import type { Activations } from '../store/skills';

/**
 * Sessions whose last step's agent, task and activations this worker remembers, oldest forgotten first:
 * more than the sessions a worker runs at once (hundreds), bounded so a long-lived worker does not grow.
 */
const LAST_SEEN_SESSIONS_MAX = 2_000;

/** Per session: the agent row, task row and activations its last step on this worker read. */
export const lastSeen = new Map<string, { agent: AgentRow; task: TaskRow | undefined; activations: Activations }>();

export function rememberSeen(
  sessionId: string,
  entry: { agent: AgentRow; task: TaskRow | undefined; activations: Activations },
): void {
  lastSeen.delete(sessionId);
  lastSeen.set(sessionId, entry);
  if (lastSeen.size > LAST_SEEN_SESSIONS_MAX) lastSeen.delete(lastSeen.keys().next().value!);
}

/** Two rows as read from PostgreSQL are the same when every column is (dates compared by their time). */
export function sameRow(a: object | undefined, b: object | undefined): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

export function sameActivations(a: Activations, b: Activations): boolean {
  const same = (x: Set<string>, y: Set<string>) => x.size === y.size && [...x].every((v) => y.has(v));
  return same(a.tools, b.tools) && same(a.skills, b.skills);
}
