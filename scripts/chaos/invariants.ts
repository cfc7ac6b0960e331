/**
 * What the chaos run proves, checked at the end from the product's database, the agents' workspaces and
 * Temporal's own histories (never from the load generator's memory of what it did).
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Client } from '@temporalio/client';
import { sql, type Kysely } from 'kysely';
import { readTranscript } from '../../client/streams';
import type { Database } from '../../schema/database';
import { chatRunWorkflowId } from '../../workflows/agent-contract';
import type { FollowedChat, StartedTask } from './load';
import { providerStallCutMs } from './provider';
import { commitSubject, taskFile, taskFileContent } from './provider';

const run = promisify(execFile);

/** A worker whose resident memory passes this over a run is leaking, whatever the load. */
export const WORKER_RSS_BOUND_MB = 1_536;
/** Task states a chaos task may end in: it reached review (the load never rejects or cancels one). */
const EXPECTED_TASK_STATES = new Set(['review']);

export interface Invariant {
  name: string;
  held: boolean;
  detail: string;
}

export interface InvariantInputs {
  db: Kysely<Database>;
  temporal: Client;
  tasks: StartedTask[];
  chats: FollowedChat[];
  workspaceOf: (agentId: string) => string;
  rssSamplesMb: Map<string, number[]>;
}

export async function checkInvariants(inputs: InvariantInputs): Promise<Invariant[]> {
  return [
    await taskStates(inputs),
    await fileEffects(inputs),
    await commitEffects(inputs),
    await ledger(inputs),
    await llmCalls(inputs),
    await approvals(inputs),
    await sseTexts(inputs),
    await nondeterminism(inputs),
    workerMemory(inputs),
  ];
}

async function taskStates({ db, tasks }: InvariantInputs): Promise<Invariant> {
  const rows = tasks.length
    ? await db
        .selectFrom('tasks')
        .select(['id', 'state', 'last_error'])
        .where(
          'id',
          'in',
          tasks.map((t) => t.taskId),
        )
        .execute()
    : [];
  const byState = new Map<string, number>();
  for (const row of rows) byState.set(row.state, (byState.get(row.state) ?? 0) + 1);
  const missing = tasks.length - rows.length;
  const unexpected = rows.filter((r) => !EXPECTED_TASK_STATES.has(r.state));
  const counts = [...byState].map(([state, n]) => `${n} ${state}`).join(', ') || 'none';
  const why = unexpected
    .slice(0, 3)
    .map((r) => `${r.id} ${r.state}${r.last_error ? ` (${r.last_error.slice(0, 120)})` : ''}`);
  return {
    name: 'every task in an expected state, none lost',
    held: missing === 0 && unexpected.length === 0,
    detail: `${tasks.length} started: ${counts}${missing ? `; ${missing} without a row` : ''}${why.length ? `; e.g. ${why.join('; ')}` : ''}`,
  };
}

async function fileEffects({ tasks, workspaceOf }: InvariantInputs): Promise<Invariant> {
  let wrong = 0;
  const examples: string[] = [];
  for (const task of tasks) {
    const content = await readFile(path.join(workspaceOf(task.agentId), taskFile(task.taskId)), 'utf8').catch(
      () => undefined,
    );
    if (content !== taskFileContent(task.taskId)) {
      wrong++;
      if (examples.length < 3)
        examples.push(`${task.taskId}: ${content === undefined ? 'missing' : JSON.stringify(content.slice(0, 80))}`);
    }
  }
  return {
    name: 'every file written once, with its content',
    held: wrong === 0,
    detail: `${tasks.length - wrong}/${tasks.length} files as written${examples.length ? `; ${examples.join('; ')}` : ''}`,
  };
}

async function commitEffects({ db, tasks, workspaceOf }: InvariantInputs): Promise<Invariant> {
  const subjectsByAgent = new Map<string, string[]>();
  for (const agentId of new Set(tasks.map((t) => t.agentId))) {
    const log = await run('git', ['-C', workspaceOf(agentId), 'log', '--format=%s'], { maxBuffer: 16 << 20 }).then(
      (r) => r.stdout,
      () => '',
    );
    subjectsByAgent.set(agentId, log.split('\n').filter(Boolean));
  }
  // A call whose worker died before its result was recorded is reported to the model as interrupted and never
  // run again: its commit may or may not exist (at most once). Every other commit must exist exactly once.
  // (The 30-minute run counted only `started` rows and so called 22 such commits missing.)
  const interrupted = new Set(
    tasks.length
      ? (
          await db
            .selectFrom('tool_calls')
            .select('task_id')
            .where('tool', '=', 'shell_execute')
            // Still `started` (nobody looked again), or found so by a retry and answered "was interrupted".
            .where((eb) =>
              eb.or([eb('status', '=', 'started'), eb('result', 'like', `Tool call shell_execute was interrupted:%`)]),
            )
            .where(
              'task_id',
              'in',
              tasks.map((t) => t.taskId),
            )
            .execute()
        ).map((r) => r.task_id)
      : [],
  );
  let missing = 0;
  let duplicated = 0;
  let unknown = 0;
  for (const task of tasks) {
    const count = subjectsByAgent.get(task.agentId)!.filter((s) => s === commitSubject(task.taskId)).length;
    if (count > 1) duplicated++;
    else if (count === 0 && interrupted.has(task.taskId)) unknown++;
    else if (count === 0) missing++;
  }
  return {
    name: 'every commit made at most once, and once where its call completed',
    held: missing === 0 && duplicated === 0,
    detail: `${tasks.length - missing - duplicated - unknown}/${tasks.length} exactly once; ${duplicated} duplicated; ${missing} missing; ${unknown} absent after an interrupted call (outcome unknown, not re-run)`,
  };
}

async function ledger({ db, tasks }: InvariantInputs): Promise<Invariant> {
  if (tasks.length === 0)
    return { name: 'every tool call executed at most once (ledger)', held: true, detail: 'no tasks' };
  const rows = await db
    .selectFrom('tool_calls')
    .select(['tool', 'status', 'executions'])
    .where(
      'task_id',
      'in',
      tasks.map((t) => t.taskId),
    )
    .execute();
  const rerun = rows.filter((r) => r.executions > 1).length;
  const unknown = rows.filter((r) => r.status === 'started').length;
  return {
    name: 'every tool call executed at most once (ledger)',
    held: rerun === 0,
    detail: `${rows.length} calls; ${rerun} executed twice; ${unknown} left with an unknown outcome (reported to the model as interrupted)`,
  };
}

async function llmCalls({ db, tasks }: InvariantInputs): Promise<Invariant> {
  const duplicated = await db
    .selectFrom('llm_calls')
    .select(['session_id', 'idem_key', sql<number>`count(*)::int`.as('n')])
    .where('idem_key', 'is not', null)
    .groupBy(['session_id', 'idem_key'])
    .having(sql`count(*)`, '>', 1)
    .execute();
  const taskCalls = tasks.length
    ? await db
        .selectFrom('llm_calls')
        .select(['error', 'input_tokens', 'cost_usd'])
        .where(
          'task_id',
          'in',
          tasks.map((t) => t.taskId),
        )
        .execute()
    : [];
  const succeeded = taskCalls.filter((c) => !c.error);
  const unpriced = succeeded.filter((c) => c.input_tokens <= 0 || Number(c.cost_usd) <= 0).length;
  return {
    name: 'every LLM call recorded once, with its spend',
    held: duplicated.length === 0 && unpriced === 0,
    detail: `${taskCalls.length} task calls recorded (${taskCalls.length - succeeded.length} failed attempts); ${duplicated.length} recorded twice; ${unpriced} without tokens or cost`,
  };
}

async function approvals({ db, tasks }: InvariantInputs): Promise<Invariant> {
  if (tasks.length === 0) return { name: 'every approval decided once', held: true, detail: 'no tasks' };
  const rows = await db
    .selectFrom('approvals')
    .select(['id', 'status'])
    .where(
      'task_id',
      'in',
      tasks.map((t) => t.taskId),
    )
    .execute();
  const pending = rows.filter((r) => r.status === 'pending').length;
  const approvedRuns = await db
    .selectFrom('approvals as a')
    .innerJoin('tool_calls as c', (join) => join.onRef('c.task_id', '=', 'a.task_id').onRef('c.tool', '=', 'a.tool'))
    .select(['a.id', 'c.executions'])
    .where(
      'a.task_id',
      'in',
      tasks.map((t) => t.taskId),
    )
    .where('a.status', '=', 'approved')
    .execute();
  const twice = approvedRuns.filter((r) => r.executions > 1).length;
  const byStatus = new Map<string, number>();
  for (const r of rows) byStatus.set(r.status, (byStatus.get(r.status) ?? 0) + 1);
  return {
    name: 'every approval decided once',
    held: pending === 0 && twice === 0,
    detail: `${rows.length} requests: ${[...byStatus].map(([s, n]) => `${n} ${s}`).join(', ') || 'none'}; ${twice} approved calls run twice`,
  };
}

/**
 * A chat answer slower than the stream idle cut is counted apart in the table: it waited out a stalled
 * provider call, which the adapter cuts after this much silence (before the cut, undici's 300 s body
 * timeout was the only limit: one answer took 1,037 s over three stalls).
 */
const SLOW_CHAT_ANSWER_S = providerStallCutMs() / 1000;

async function sseTexts({ db, chats }: InvariantInputs): Promise<Invariant> {
  let equal = 0;
  let droppedItems = 0;
  /** Seconds from each message's storing to its answer's `end`: how long followers waited. */
  const answerSeconds: number[] = [];
  const differences: string[] = [];
  for (const chat of chats) {
    // A POST that never got its item in the follower's time (each failed one was sent again with its
    // Idempotency-Key): the message may be in and answered, but this client never saw it.
    const item = chat.itemId
      ? await db
          .selectFrom('mailbox_items')
          .select(['merged_into', 'status', 'created_at', 'updated_at'])
          .where('id', '=', chat.itemId)
          .executeTakeFirst()
      : undefined;
    const streamId = chat.itemId ? chatRunWorkflowId(chat.agentId, item?.merged_into ?? chat.itemId) : undefined;
    const stored = streamId ? await readTranscript(db, streamId) : undefined;
    const storedText = (stored?.steps ?? [])
      .map((s) => s.text)
      .filter(Boolean)
      .join('\n\n');
    // An answer the agent gave up on after its retries (dropped: the follower got an `end` naming the
    // error) may have no text; any other answer must have some.
    if (streamId && item) {
      const end = await db
        .selectFrom('stream_events')
        .select('created_at')
        .where('stream_id', '=', streamId)
        .where('kind', '=', 'end')
        .executeTakeFirst();
      if (end) answerSeconds.push((end.created_at.getTime() - item.created_at.getTime()) / 1000);
    }
    const dropped = item?.status === 'dropped';
    if (dropped) droppedItems++;
    if (chat.itemId && chat.ended && chat.text === storedText && (storedText.length > 0 || dropped)) equal++;
    else if (differences.length < 3)
      differences.push(
        `${chat.itemId ?? `chat ${chat.n} (no item)`}: client ${chat.text.length} chars${chat.ended ? '' : ' (never ended)'}, stored ${storedText.length}` +
          `${streamId ? `; ${await answerTiming(db, streamId, chat.startedAt, item)}` : ''} (${chat.connections.join(' / ')})`,
      );
  }
  const reconnects = chats.reduce((n, c) => n + c.reconnects, 0);
  answerSeconds.sort((a, b) => a - b);
  const median = answerSeconds[Math.floor(answerSeconds.length / 2)];
  const slow = answerSeconds.filter((s) => s > SLOW_CHAT_ANSWER_S).length;
  const timing = answerSeconds.length
    ? `; answers ended ${median!.toFixed(1)} s after their message (median), ${slow} after more than ${SLOW_CHAT_ANSWER_S} s (the stream idle cut: each waited out a stalled provider call), the slowest ${answerSeconds.at(-1)!.toFixed(0)} s`
    : '';
  const postRetries = chats.reduce((n, c) => n + c.postRetries, 0);
  return {
    name: "every SSE client's text equals the stored text",
    held: equal === chats.length,
    detail: `${equal}/${chats.length} equal, ${reconnects} resumed connections, ${postRetries} POSTs sent again with their Idempotency-Key${droppedItems ? `, ${droppedItems} dropped by the agent after their retries` : ''}${timing}${differences.length ? `; ${differences.join('; ')}` : ''}`,
  };
}

/**
 * When the answer a follower missed was stored, in seconds after its POST: the item's creation and its
 * last change (with its status), the stream's first and last events. An answer stored after the
 * follower's limit is a slow answer, not a lost one; one stored in time is the follower's or the API's.
 */
async function answerTiming(
  db: InvariantInputs['db'],
  streamId: string,
  startedAt: number,
  item: { status: string; created_at: Date; updated_at: Date } | undefined,
): Promise<string> {
  const at = (d: Date | string | null | undefined) =>
    d ? `+${((new Date(d).getTime() - startedAt) / 1000).toFixed(1)}s` : 'none';
  const span = await db
    .selectFrom('stream_events')
    .select((eb) => [eb.fn.min('created_at').as('first'), eb.fn.max('created_at').as('last')])
    .where('stream_id', '=', streamId)
    .executeTakeFirst();
  return `item ${item ? `${item.status}, stored ${at(item.created_at)}, changed ${at(item.updated_at)}` : 'not stored'}; stream ${at(span?.first as Date | undefined)} to ${at(span?.last as Date | undefined)}`;
}

/** Every workflow history of the run, read from Temporal, searched for a workflow task that failed on non-determinism. */
async function nondeterminism({ temporal }: InvariantInputs): Promise<Invariant> {
  let histories = 0;
  const failing: string[] = [];
  for await (const execution of temporal.workflow.list()) {
    histories++;
    const history = await temporal.workflow.getHandle(execution.workflowId, execution.runId).fetchHistory();
    for (const event of history.events ?? []) {
      const failure = event.workflowTaskFailedEventAttributes;
      if (!failure) continue;
      const text = `${failure.failure?.message ?? ''} ${String(failure.cause ?? '')}`;
      if (
        /nondetermin/i.test(text) ||
        String(failure.cause) === '24' ||
        /NON_DETERMINISTIC/.test(String(failure.cause))
      ) {
        failing.push(`${execution.workflowId}: ${failure.failure?.message?.slice(0, 160)}`);
        break;
      }
    }
  }
  return {
    name: 'no non-determinism error in any history',
    held: failing.length === 0,
    detail: `${histories} histories read; ${failing.length} with one${failing.length ? `: ${failing.slice(0, 2).join('; ')}` : ''}`,
  };
}

function workerMemory({ rssSamplesMb }: InvariantInputs): Invariant {
  const lines: string[] = [];
  let held = true;
  for (const [name, samples] of rssSamplesMb) {
    if (samples.length === 0) continue;
    const max = Math.max(...samples);
    held &&= max <= WORKER_RSS_BOUND_MB;
    lines.push(`${name} ${samples[0]}→${samples.at(-1)} MB (max ${max})`);
  }
  return {
    name: `the workers' RSS bounded (≤ ${WORKER_RSS_BOUND_MB} MB)`,
    held,
    detail: lines.join('; ') || 'no samples',
  };
}

export function invariantTable(invariants: Invariant[]): string {
  const rows = invariants.map(
    (i) => `| ${i.name} | ${i.held ? 'held' : '**BROKEN**'} | ${i.detail.replaceAll('|', '\\|')} |`,
  );
  return ['| invariant | result | figures |', '|---|---|---|', ...rows].join('\n');
}
