import { sql, type Kysely } from 'kysely';
import type { AgentRow, Database, TaskRow } from '../../schema/database';
import type { Activations } from '../store/skills';

/**
 * Sessions whose last step's agent, task and activations this worker remembers, oldest forgotten first:
 * more than the sessions a worker runs at once (hundreds), bounded so a long-lived worker does not grow.
 */
const LAST_SEEN_SESSIONS_MAX = 2_000;

/** What a session's last step on this worker read, with the versions of the rows it read. */
export interface SeenEntry {
  /** The agent row as stored (`agent` is the same row with a fork's overrides, when the task is a fork). */
  row: AgentRow;
  agent: AgentRow;
  task: TaskRow | undefined;
  activations: Activations;
  /** The rows' versions (`xmin`) when they were read; the task's is undefined without a task. */
  agentVersion: string;
  taskVersion: string | undefined;
}

/** Per session: what its last step on this worker read. */
export const lastSeen = new Map<string, SeenEntry>();

export function rememberSeen(sessionId: string, entry: SeenEntry): void {
  lastSeen.delete(sessionId);
  lastSeen.set(sessionId, entry);
  if (lastSeen.size > LAST_SEEN_SESSIONS_MAX) lastSeen.delete(lastSeen.keys().next().value!);
}

export function sameActivations(a: Activations, b: Activations): boolean {
  const same = (x: Set<string>, y: Set<string>) => x.size === y.size && [...x].every((v) => y.has(v));
  return same(a.tools, b.tools) && same(a.skills, b.skills);
}

/**
 * A row's version: PostgreSQL's `xmin`, the id of the transaction that wrote this version of the row.
 * Any update writes a new version under the updating transaction's id, and a reader only ever sees
 * committed versions, so an unchanged `xmin` means an unchanged row (the optimistic concurrency token
 * other PostgreSQL clients use). The row and its version come from one statement.
 */
const ROW_VERSION = sql<string>`xmin::text`.as('row_version');

async function withVersion<R>(
  read: Promise<(R & { row_version: string }) | undefined>,
): Promise<{ row: R; version: string } | undefined> {
  const found = await read;
  if (!found) return undefined;
  const { row_version: version, ...row } = found;
  return { row: row as R, version };
}

/** The agent row with its version. */
export function findAgentVersioned(db: Kysely<Database>, id: string) {
  return withVersion<AgentRow>(
    db.selectFrom('agents').selectAll().select(ROW_VERSION).where('id', '=', id).executeTakeFirst(),
  );
}

/** The task row with its version. */
export function findTaskVersioned(db: Kysely<Database>, id: string) {
  return withVersion<TaskRow>(
    db.selectFrom('tasks').selectAll().select(ROW_VERSION).where('id', '=', id).executeTakeFirst(),
  );
}
