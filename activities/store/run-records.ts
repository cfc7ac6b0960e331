/**
 * What the run viewer reads about one task, in a handful of queries: its sessions' replies (the
 * assistant messages, which hold the tool calls in the order the model made them), every recorded LLM
 * call, the tool-call ledger, the approvals with their trails, the prompt truncations, the fork it is
 * (and the source's records it differs from), and the spend of its budget tree over time.
 *
 * Read-only, and raw: the rows as recorded. Tool results are cut to `RESULT_PREVIEW_MAX_CHARS` in the
 * query (a viewer shows previews; the whole result stays in the ledger and in `tool_outputs`), so a
 * task with large outputs does not move them out of PostgreSQL. The caller has already checked that
 * the task is the reader's organisation's: everything here hangs off it.
 */
import { sql, type Kysely, type Selectable } from 'kysely';
import type { Database, TaskRow } from '../../schema/database';
import { COPIED_KEY_PREFIX } from '../fork/prepare';
import type { ContentBlock } from '../llm/types';
import { toolResultKey } from '../tools/ledger-writes';
import { BUDGET_CHAIN_MAX_DEPTH } from './task-budget';

/** Characters of a tool result read back: more than any preview shows, little enough to read many. */
export const RESULT_PREVIEW_MAX_CHARS = 4_000;

export interface ReplyRecord {
  sessionId: string;
  /** The message's key: `assistant-a{attempt}-t{turn}` for a task step, `fork-src-…` for a fork's copy. */
  key: string;
  content: ContentBlock[];
  at: Date;
}

export interface LlmCallRecord {
  id: string;
  taskId: string | null;
  sessionId: string | null;
  /** The step's key (its reply's), or the step's key and `:purpose` for an auxiliary call. */
  key: string | null;
  provider: string;
  model: string;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  costUsd: number;
  durationMs: number;
  stopReason: string | null;
  error: string | null;
  at: Date;
}

export interface LedgerRecord {
  sessionId: string;
  toolCallId: string;
  tool: string;
  /** The arguments as stored (secrets already redacted on the worker). */
  args: unknown;
  status: 'started' | 'completed' | 'failed';
  sideEffecting: boolean;
  /** The result's first RESULT_PREVIEW_MAX_CHARS characters. */
  result: string | null;
  resultChars: number;
  isError: boolean;
  executions: number;
  redactions: number;
  startedAt: Date;
  completedAt: Date | null;
}

/** A call's result found only in the session (a call without a ledger row, settled as not run). */
export interface StoredResultRecord {
  sessionId: string;
  toolCallId: string;
  text: string;
  isError: boolean;
}

export interface ApprovalRecord {
  requestId: string;
  tool: string;
  summary: string;
  status: string;
  requestedAt: Date;
  decidedAt: Date | null;
  decidedBy: string | null;
  comment: string | null;
  events: Array<{ kind: string; actor: string | null; targets: string[]; comment: string | null; at: Date }>;
}

/** A prompt segment cut to fit its budget before a step's call (`prompt-truncated` events). */
export interface TruncationRecord {
  sessionId: string;
  key: string;
  segment: string;
  originalTokens: number;
  keptTokens: number;
}

/** A task of the budget tree: the task itself, and every task below it along `budget_parent_id`. */
export interface TreeTaskRecord {
  id: string;
  budgetParentId: string | null;
  title: string;
  state: string;
  grantedUsd: number | null;
}

export interface SpendRecord {
  taskId: string;
  sessionId: string | null;
  costUsd: number;
  at: Date;
}

export interface ForkRecords {
  sourceTaskId: string;
  sourceSessionId: string;
  atStep: number;
  overrides: Record<string, unknown>;
  allowTools: string[];
  workspaceNote: string;
  calls: Array<{
    toolCallId: string;
    position: number;
    tool: string;
    outcome: 'replayed' | 'executed' | 'refused';
    sourceToolCallId: string | null;
    note: string | null;
  }>;
  /** The source round's replies, LLM calls and ledger, to compare call by call. */
  source: Pick<RunRecords, 'replies' | 'llmCalls' | 'ledger' | 'storedResults'>;
}

export interface RunRecords {
  task: TaskRow;
  replies: ReplyRecord[];
  llmCalls: LlmCallRecord[];
  ledger: LedgerRecord[];
  storedResults: StoredResultRecord[];
  approvals: ApprovalRecord[];
  truncations: TruncationRecord[];
  tree: TreeTaskRecord[];
  spend: SpendRecord[];
  fork?: ForkRecords;
  /** Tasks forked from this one. */
  forks: Array<{ id: string; state: string; createdAt: Date }>;
}

/** Everything the run viewer shows of `task` (a row the reader may see). */
export async function loadRunRecords(db: Kysely<Database>, task: TaskRow): Promise<RunRecords> {
  const taskId = task.id;
  const sessionIds = await taskSessionIds(db, taskId);
  const [session, llmCalls, approvals, truncations, tree, forkRow, forks] = await Promise.all([
    sessionRecords(db, sessionIds),
    db
      .selectFrom('llm_calls')
      .selectAll()
      .where('task_id', '=', taskId)
      .orderBy('id')
      .execute()
      .then((rows) => rows.map(llmCallRecord)),
    approvalRecords(db, taskId),
    db
      .selectFrom('task_events')
      .select(['idem_key', 'data'])
      .where('task_id', '=', taskId)
      .where('type', '=', 'prompt-truncated')
      .orderBy('seq')
      .execute(),
    budgetTree(db, taskId),
    db.selectFrom('task_forks').selectAll().where('task_id', '=', taskId).executeTakeFirst(),
    db
      .selectFrom('tasks')
      .select(['id', 'state', 'created_at'])
      .where('fork_of', '=', taskId)
      .orderBy('created_at')
      .execute(),
  ]);
  const spend = await treeSpend(
    db,
    tree.map((t) => t.id),
  );
  let fork: ForkRecords | undefined;
  if (forkRow) {
    const [calls, source, sourceLlm] = await Promise.all([
      db
        .selectFrom('fork_tool_calls')
        .selectAll()
        .where('fork_task_id', '=', taskId)
        .orderBy('position')
        .orderBy('created_at')
        .execute(),
      sessionRecords(db, [forkRow.source_session_id]),
      db
        .selectFrom('llm_calls')
        .selectAll()
        .where('session_id', '=', forkRow.source_session_id)
        .orderBy('id')
        .execute(),
    ]);
    fork = {
      sourceTaskId: forkRow.source_task_id,
      sourceSessionId: forkRow.source_session_id,
      atStep: forkRow.at_step,
      overrides: forkRow.overrides,
      allowTools: forkRow.allow_tools,
      workspaceNote: forkRow.workspace_note,
      calls: calls.map((c) => ({
        toolCallId: c.tool_call_id,
        position: c.position,
        tool: c.tool,
        outcome: c.outcome,
        sourceToolCallId: c.source_tool_call_id,
        note: c.note,
      })),
      source: { ...source, llmCalls: sourceLlm.map(llmCallRecord) },
    };
  }
  return {
    task,
    ...session,
    llmCalls,
    approvals,
    truncations: truncations.flatMap((e) => truncationRecord(e.idem_key, e.data)),
    tree,
    spend,
    ...(fork ? { fork } : {}),
    forks: forks.map((f) => ({ id: f.id, state: f.state, createdAt: f.created_at })),
  };
}

/** The task's sessions: its rounds', its sub-agents', any other run made for it (by the sessions table and the usage rows). */
async function taskSessionIds(db: Kysely<Database>, taskId: string): Promise<string[]> {
  const { rows } = await sql<{ id: string }>`
    select id from sessions where task_id = ${taskId}
    union
    select distinct session_id from llm_calls where task_id = ${taskId} and session_id is not null
    union
    select distinct session_id from tool_calls where task_id = ${taskId}`.execute(db);
  return rows.map((r) => r.id);
}

/** The replies, ledger rows and settled results of some sessions. */
async function sessionRecords(
  db: Kysely<Database>,
  sessionIds: readonly string[],
): Promise<Pick<RunRecords, 'replies' | 'ledger' | 'storedResults'>> {
  if (sessionIds.length === 0) return { replies: [], ledger: [], storedResults: [] };
  const [replies, ledger] = await Promise.all([
    db
      .selectFrom('messages')
      .select(['session_id', 'idem_key', 'content', 'created_at'])
      .where('session_id', 'in', [...sessionIds])
      .where('role', '=', 'assistant')
      .orderBy('id')
      .execute(),
    db
      .selectFrom('tool_calls')
      .select([
        'session_id',
        'tool_call_id',
        'tool',
        'args',
        'status',
        'side_effecting',
        sql<string | null>`left(result, ${RESULT_PREVIEW_MAX_CHARS})`.as('result'),
        sql<number>`coalesce(length(result), 0)`.as('result_chars'),
        'is_error',
        'executions',
        'redactions',
        'started_at',
        'completed_at',
      ])
      .where('session_id', 'in', [...sessionIds])
      .orderBy('started_at')
      .execute(),
  ]);
  const recorded = new Set(ledger.map((l) => `${l.session_id}\u0000${l.tool_call_id}`));
  const unrecorded = replies.flatMap((r) =>
    (r.content as ContentBlock[])
      .filter((b) => b.type === 'tool_use' && !recorded.has(`${r.session_id}\u0000${b.id}`))
      // A call's result is stored under its key; a fork's copy of a source step under the copy's.
      .flatMap((b) => {
        const key = toolResultKey((b as { id: string }).id);
        return [key, `${COPIED_KEY_PREFIX}${key}`].map((k) => ({ sessionId: r.session_id, key: k }));
      }),
  );
  const storedResults: StoredResultRecord[] = [];
  for (const sessionId of new Set(unrecorded.map((u) => u.sessionId))) {
    const keys = unrecorded.filter((u) => u.sessionId === sessionId).map((u) => u.key);
    const rows = await db
      .selectFrom('messages')
      .select('content')
      .where('session_id', '=', sessionId)
      .where('idem_key', 'in', keys)
      .execute();
    for (const row of rows)
      for (const block of row.content as ContentBlock[])
        if (block.type === 'tool_result')
          storedResults.push({
            sessionId,
            toolCallId: block.toolUseId,
            text: block.content.slice(0, RESULT_PREVIEW_MAX_CHARS),
            isError: block.isError ?? false,
          });
  }
  return {
    replies: replies.map((r) => ({
      sessionId: r.session_id,
      key: r.idem_key,
      content: r.content as ContentBlock[],
      at: r.created_at,
    })),
    ledger: ledger.map((l) => ({
      sessionId: l.session_id,
      toolCallId: l.tool_call_id,
      tool: l.tool,
      args: l.args,
      status: l.status,
      sideEffecting: l.side_effecting,
      result: l.result,
      resultChars: Number(l.result_chars),
      isError: l.is_error,
      executions: l.executions,
      redactions: l.redactions,
      startedAt: l.started_at,
      completedAt: l.completed_at,
    })),
    storedResults,
  };
}

async function approvalRecords(db: Kysely<Database>, taskId: string): Promise<ApprovalRecord[]> {
  const rows = await db
    .selectFrom('approvals')
    .select(['id', 'tool', 'summary', 'status', 'requested_at', 'decided_at', 'decided_by', 'comment'])
    .where('task_id', '=', taskId)
    .orderBy('requested_at')
    .execute();
  if (rows.length === 0) return [];
  const events = await db
    .selectFrom('approval_events')
    .select(['request_id', 'kind', 'actor', 'targets', 'comment', 'created_at'])
    .where(
      'request_id',
      'in',
      rows.map((r) => r.id),
    )
    .orderBy('id')
    .execute();
  return rows.map((r) => ({
    requestId: r.id,
    tool: r.tool,
    summary: r.summary,
    status: r.status,
    requestedAt: r.requested_at,
    decidedAt: r.decided_at,
    decidedBy: r.decided_by,
    comment: r.comment,
    events: events
      .filter((e) => e.request_id === r.id)
      .map((e) => ({ kind: e.kind, actor: e.actor, targets: e.targets, comment: e.comment, at: e.created_at })),
  }));
}

/** The task and every task below it along `budget_parent_id`, the task first. */
async function budgetTree(db: Kysely<Database>, taskId: string): Promise<TreeTaskRecord[]> {
  const { rows } = await sql<{
    id: string;
    budget_parent_id: string | null;
    title: string;
    state: string;
    cost_budget_usd: number | string | null;
    depth: number;
  }>`
    with recursive tree(id, depth) as (
      select ${taskId}::text, 0
      union
      select t.id, tree.depth + 1 from tasks t join tree on t.budget_parent_id = tree.id
      where tree.depth < ${BUDGET_CHAIN_MAX_DEPTH}
    )
    select t.id, t.budget_parent_id, t.title, t.state, t.cost_budget_usd, min(tree.depth) as depth
    from tree join tasks t on t.id = tree.id
    group by t.id order by min(tree.depth), t.created_at`.execute(db);
  return rows.map((r) => ({
    id: r.id,
    budgetParentId: r.id === taskId ? null : r.budget_parent_id,
    title: r.title,
    state: r.state,
    grantedUsd: r.cost_budget_usd === null ? null : Number(r.cost_budget_usd),
  }));
}

async function treeSpend(db: Kysely<Database>, taskIds: readonly string[]): Promise<SpendRecord[]> {
  if (taskIds.length === 0) return [];
  const rows = await db
    .selectFrom('llm_calls')
    .select(['task_id', 'session_id', 'cost_usd', 'created_at'])
    .where('task_id', 'in', [...taskIds])
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return rows.map((r) => ({
    taskId: r.task_id!,
    sessionId: r.session_id,
    costUsd: Number(r.cost_usd),
    at: r.created_at,
  }));
}

function llmCallRecord(r: Selectable<Database['llm_calls']>): LlmCallRecord {
  return {
    id: String(r.id),
    taskId: r.task_id,
    sessionId: r.session_id,
    key: r.idem_key,
    provider: r.provider,
    model: r.model,
    inputTokens: r.input_tokens,
    outputTokens: r.output_tokens,
    cacheReadTokens: r.cache_read_tokens,
    cacheWriteTokens: r.cache_write_tokens,
    costUsd: Number(r.cost_usd),
    durationMs: r.duration_ms,
    stopReason: r.stop_reason,
    error: r.error,
    at: r.created_at,
  };
}

/** A `prompt-truncated` event's step, from its key `trunc:{sessionId}:{stepKey}:{segment}`. */
function truncationRecord(idemKey: string | null, data: Record<string, unknown>): TruncationRecord[] {
  const segment = typeof data.segment === 'string' ? data.segment : undefined;
  if (!idemKey?.startsWith('trunc:') || !segment || !idemKey.endsWith(`:${segment}`)) return [];
  const middle = idemKey.slice('trunc:'.length, idemKey.length - segment.length - 1);
  // The session id holds no `:`; the step key follows it.
  const cut = middle.indexOf(':');
  if (cut <= 0) return [];
  return [
    {
      sessionId: middle.slice(0, cut),
      key: middle.slice(cut + 1),
      segment,
      originalTokens: Number(data.originalTokens ?? 0),
      keptTokens: Number(data.keptTokens ?? 0),
    },
  ];
}
