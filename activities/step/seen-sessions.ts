import { sql, type Kysely } from 'kysely';
import type { AgentRow, Database, TaskRow } from '../../schema/database';
import { unknownAgent } from '../errors';
import { forkedAgent, loadFork } from '../fork/runtime';
import { activationsFromRows, loadActivations, type Activations } from '../store/skills';
import { fetchPromptRows } from './prompt';
import type { LlmStepInput } from './types';

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
const lastSeen = new Map<string, SeenEntry>();

function rememberSeen(sessionId: string, entry: SeenEntry): void {
  lastSeen.delete(sessionId);
  lastSeen.set(sessionId, entry);
  if (lastSeen.size > LAST_SEEN_SESSIONS_MAX) lastSeen.delete(lastSeen.keys().next().value!);
}

function sameActivations(a: Activations, b: Activations): boolean {
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
function findAgentVersioned(db: Kysely<Database>, id: string) {
  return withVersion<AgentRow>(
    db.selectFrom('agents').selectAll().select(ROW_VERSION).where('id', '=', id).executeTakeFirst(),
  );
}

/** The task row with its version. */
function findTaskVersioned(db: Kysely<Database>, id: string) {
  return withVersion<TaskRow>(
    db.selectFrom('tasks').selectAll().select(ROW_VERSION).where('id', '=', id).executeTakeFirst(),
  );
}

type PromptRowsRead = Awaited<ReturnType<typeof fetchPromptRows>>;

/** What this worker saw at the session's last step, and the prompt's rows read as if it were still so. */
export interface SeenCheck {
  seen: SeenEntry | undefined;
  /** The prompt's rows, with the versions of the agent and task rows and the activations as they are now. */
  rows: PromptRowsRead | undefined;
}

/**
 * Starts a step's reads: when this worker ran the session's last step, one statement reads the prompt's
 * rows with what it saw then and reports whether the agent row, the task row and the activations are
 * still those (their versions). Undefined rows when there is nothing to check against.
 */
export async function checkSeenRows(db: Kysely<Database>, input: LlmStepInput): Promise<SeenCheck> {
  const seen = lastSeen.get(input.sessionId);
  if (!seen || seen.row.id !== input.agentId || seen.task?.id !== input.taskId)
    return { seen: undefined, rows: undefined };
  const rows = await fetchPromptRows(
    db,
    seen.agent,
    input.scenario,
    seen.task,
    seen.activations,
    input.sessionId,
  ).catch(() => undefined);
  return { seen, rows };
}

/**
 * The agent (with a fork's overrides), the task and the activations a step runs with: what the check
 * found unchanged is reused with its prompt rows; otherwise (a session new to this worker, or a row that
 * changed) they are read again. Either way they are remembered for the session's next step.
 */
export async function stepRows(db: Kysely<Database>, input: LlmStepInput, { seen, rows }: SeenCheck) {
  const unchanged =
    seen !== undefined &&
    rows !== undefined &&
    rows[0].agent_version === seen.agentVersion &&
    (rows[0].task_version ?? undefined) === seen.taskVersion &&
    sameActivations(activationsFromRows(rows[0].activation_rows), seen.activations);
  const [agentRead, taskRead, activations] = unchanged
    ? [
        { row: seen.row, version: seen.agentVersion },
        seen.task && { row: seen.task, version: seen.taskVersion! },
        seen.activations,
      ]
    : await Promise.all([
        findAgentVersioned(db, input.agentId),
        input.taskId ? findTaskVersioned(db, input.taskId) : undefined,
        // What discover_tools activated in this session or task: tools offered, skills shown in full.
        loadActivations(db, input.sessionId, input.taskId),
      ]);
  if (!agentRead) throw unknownAgent(input.agentId);
  const task = taskRead?.row;
  // A fork's steps see its overrides (identity files, model) and its own workspace.
  const fork = task?.fork_of ? await loadFork(db, task.id, task.fork_of) : undefined;
  const agent = fork ? forkedAgent(agentRead.row, fork) : agentRead.row;
  rememberSeen(input.sessionId, {
    row: agentRead.row,
    agent,
    task,
    activations,
    agentVersion: agentRead.version,
    taskVersion: taskRead?.version,
  });
  return { agent, task, fork, activations, prefetchedRows: unchanged ? rows : undefined };
}
