/**
 * `npm run capacity -- [--levels 10,20,40] [--calls 11] [--answer-ms 200]`: the cost of one loop
 * iteration on the reference cluster, measured at several loads, and the capacity model it gives for
 * 10,000 agents and 1,000 active tasks. Per iteration (one LLM call and its tool call): CPU of the agent
 * workers, of the Temporal services and of each PostgreSQL (a process tree's own and its reaped children's
 * time, from /proc), database transactions, history events and history bytes (from Temporal itself).
 */
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import type { Kysely } from 'kysely';
import pg from 'pg';
import type { Database } from '../../schema/database';
import { openDatabase } from '../../activities/store/db';
import { embeddedPaths } from '../../activities/store/embedded-server';
import { AgentsClient } from '../../client';
import { startFakeLlmServer, type RecordedRequest, type ScriptedResponse } from '../../test/fake-llm';
import { freeBasePort, startCluster, type Cluster } from './topology';

const ROOT = path.resolve(__dirname, '..', '..');
const CLOCK_TICKS_PER_SECOND = 100;
const POLL_MS = 500;
/** A tool-use reply streams in about this many frames: its pacing spreads the answer time over them. */
const ANSWER_FRAMES = 5;

interface Level {
  tasks: number;
  iterations: number;
  wallS: number;
  cpuS: Record<'workers' | 'temporal' | 'temporalDb' | 'productDb', number>;
  transactions: { temporal: number; product: number };
  historyEvents: number;
  historyBytes: number;
  /** Temporal Cloud billable actions per task, counted from the task's own histories. */
  actionsPerTask: number;
}

/** A process tree's CPU seconds: its own, its live descendants', and what its reaped children used. */
function treeCpuSeconds(root: number): number {
  const parents = new Map<number, number>();
  const cpu = new Map<number, { own: number; reaped: number }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      parents.set(Number(entry), Number(f[1]));
      cpu.set(Number(entry), {
        own: (Number(f[11]) + Number(f[12])) / CLOCK_TICKS_PER_SECOND,
        reaped: (Number(f[13]) + Number(f[14])) / CLOCK_TICKS_PER_SECOND,
      });
    } catch {
      // exited while listed
    }
  }
  const inTree = (pid: number): boolean => {
    for (let p: number | undefined = pid; p && p > 1; p = parents.get(p)) if (p === root) return true;
    return false;
  };
  let total = cpu.get(root)?.reaped ?? 0;
  for (const [pid, c] of cpu) if (inTree(pid)) total += c.own;
  return total;
}

function postmasterPid(dataDir: string): number {
  return Number(readFileSync(path.join(embeddedPaths(dataDir).cluster, 'postmaster.pid'), 'utf8').split('\n')[0]);
}

async function transactions(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>(
      'select (xact_commit + xact_rollback)::text as n from pg_stat_database where datname = current_database()',
    );
    return Number(rows[0]!.n);
  } finally {
    await client.end();
  }
}

/** Every call writes a file until the last, which submits: `calls` LLM calls per task, each streamed over about `answerMs`. */
function responder(calls: number, answerMs: number) {
  return (request: RecordedRequest): ScriptedResponse => {
    const body = JSON.stringify(request.body);
    const taskId = /Task ID: ([0-9a-f-]{36})/.exec(body)?.[1] ?? 'none';
    const done = (body.match(/"tool_result"/g) ?? []).length;
    const usage = { inputTokens: 400, outputTokens: 40 };
    const chunkDelayMs = Math.round(answerMs / ANSWER_FRAMES);
    if (done < calls - 1)
      return {
        kind: 'message',
        content: [
          { type: 'tool_use', name: 'file_write', input: { path: `cap/${taskId}-${done}.txt`, content: `${done}` } },
        ],
        stopReason: 'tool_use',
        usage,
        chunkDelayMs,
      };
    return {
      kind: 'message',
      content: [{ type: 'tool_use', name: 'task_submit_review', input: { summary: 'done' } }],
      stopReason: 'tool_use',
      usage,
      chunkDelayMs,
    };
  };
}

/** Billable actions (Temporal Cloud's pricing unit) in a history: starts, activities, timers, signals, updates, markers, children, upserts. */
function actions(events: Array<Record<string, unknown>>): number {
  let n = 0;
  for (const e of events) {
    if (
      e.workflowExecutionStartedEventAttributes ||
      e.activityTaskScheduledEventAttributes ||
      e.timerStartedEventAttributes
    )
      n++;
    else if (
      e.workflowExecutionSignaledEventAttributes ||
      e.workflowExecutionUpdateAcceptedEventAttributes ||
      e.markerRecordedEventAttributes
    )
      n++;
    else if (
      e.startChildWorkflowExecutionInitiatedEventAttributes ||
      e.upsertWorkflowSearchAttributesEventAttributes ||
      e.workflowPropertiesModifiedEventAttributes
    )
      n++;
    else if (
      e.activityTaskStartedEventAttributes &&
      Number((e.activityTaskStartedEventAttributes as { attempt?: number }).attempt ?? 1) > 1
    )
      n++; // a retry
  }
  return n;
}

async function measure(
  cluster: Cluster,
  temporal: Client,
  db: Kysely<Database>,
  agents: AgentsClient,
  tasks: number,
  calls: number,
): Promise<Level> {
  const dirs = {
    temporalDb: path.join(path.dirname(cluster.logDir), 'temporal-postgres'),
    productDb: path.join(path.dirname(cluster.logDir), 'product-postgres'),
  };
  const sample = () => ({
    workers: cluster.workers.reduce((s, w) => s + treeCpuSeconds(w.child.pid!), 0),
    temporal: cluster.temporalServices.reduce((s, t) => s + treeCpuSeconds(t.child.pid!), 0),
    temporalDb: treeCpuSeconds(postmasterPid(dirs.temporalDb)),
    productDb: treeCpuSeconds(postmasterPid(dirs.productDb)),
  });
  const xacts = async () => ({
    temporal: await transactions(new URL('/temporal', cluster.temporalDatabaseUrl).toString()),
    product: await transactions(cluster.productDatabaseUrl),
  });
  const before = sample();
  const xBefore = await xacts();
  const t0 = Date.now();
  const ids: string[] = [];
  for (let i = 0; i < tasks; i++) {
    const taskId = randomUUID();
    ids.push(taskId);
    await agents.startTask({ agentId: `cap-${i}`, taskId, title: `Capacity ${i}`, description: 'write files' });
  }
  // A task's row is written by its workflow's first activity: until then it is simply not in review yet.
  for (;;) {
    const rows = await db
      .selectFrom('tasks')
      .select('state')
      .where('id', 'in', ids)
      .where('state', '=', 'review')
      .execute();
    if (rows.length === ids.length) break;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  const wallS = (Date.now() - t0) / 1000;
  const after = sample();
  const xAfter = await xacts();
  let historyEvents = 0;
  let historyBytes = 0;
  let totalActions = 0;
  for (const id of ids) {
    for await (const execution of temporal.workflow.list({ query: `TaskId = "${id}"` })) {
      const history = await temporal.workflow.getHandle(execution.workflowId, execution.runId).fetchHistory();
      const events = (history.events ?? []) as Array<Record<string, unknown>>;
      historyEvents += events.length;
      historyBytes += execution.historySize ?? 0;
      totalActions += actions(events);
    }
  }
  const diff = (k: keyof typeof before) => after[k] - before[k];
  return {
    tasks,
    iterations: tasks * calls,
    wallS,
    cpuS: {
      workers: diff('workers'),
      temporal: diff('temporal'),
      temporalDb: diff('temporalDb'),
      productDb: diff('productDb'),
    },
    transactions: { temporal: xAfter.temporal - xBefore.temporal, product: xAfter.product - xBefore.product },
    historyEvents,
    historyBytes,
    actionsPerTask: totalActions / tasks,
  };
}

export type { Level as CapacityLevel };

export async function runCapacity(
  levels: number[],
  calls: number,
  answerMs: number,
  log: (line: string) => void,
): Promise<Level[]> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'da-capacity-'));
  chmodSync(dir, 0o755);
  const llm = await startFakeLlmServer({ responder: responder(calls, answerMs) });
  const cluster = await startCluster({
    dir,
    basePort: await freeBasePort(),
    log,
    productEnv: {
      ANTHROPIC_API_KEY: 'capacity-fake-key',
      ANTHROPIC_BASE_URL: llm.url,
      OPENAI_API_KEY: '',
      OPENAI_COMPATIBLE_BASE_URL: '',
    },
  });
  const db = await openDatabase({ url: cluster.productDatabaseUrl, poolSize: 4 });
  const connection = await Connection.connect({ address: cluster.temporalAddress });
  const temporal = new Client({ connection });
  try {
    const agents = new AgentsClient(temporal, db.db, { workspaceRoot: path.join(dir, 'workspaces') });
    for (let i = 0; i < Math.max(...levels); i++)
      await agents.upsertAgentFromFolder(path.join(ROOT, 'examples/agents/scribe'), { id: `cap-${i}` });
    await measure(cluster, temporal, db.db, agents, 2, calls); // warm-up: bundles, caches, connections
    const results: Level[] = [];
    for (const tasks of levels) {
      log(`${tasks} tasks at once × ${calls} calls`);
      results.push(await measure(cluster, temporal, db.db, agents, tasks, calls));
    }
    return results;
  } finally {
    await connection.close();
    await db.close();
    await cluster.stop();
    await llm.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The target the model is for. */
export const TARGET = { agents: 10_000, activeTasks: 1_000 };
/** Seconds between two LLM calls of one active task: a real model answers in seconds, then a tool runs. */
export const SECONDS_PER_ITERATION = 8;
/** Heartbeats: every agent checks in every 30 minutes (the default), about 2 LLM calls each. */
const HEARTBEAT_INTERVAL_S = 30 * 60;
const ITERATIONS_PER_HEARTBEAT = 2;
/** Sized for this share of each core, leaving room for bursts, restarts and a lost node. */
const TARGET_UTILISATION = 0.6;
const CORES_PER_WORKER = 2;
/** Workflow-task loads per iteration per shard budget: the deploy's `history.transferProcessorMaxPollRPS`. */
const SHARD_TRANSFER_POLLS_PER_S = 200;
/** Assumed Temporal Cloud price per million actions, for the order of magnitude only (check the price list). */
const CLOUD_USD_PER_MILLION_ACTIONS = 50;

export function capacityModel(level: Level): string[] {
  const per = (x: number) => x / level.iterations;
  const rate =
    TARGET.activeTasks / SECONDS_PER_ITERATION + (TARGET.agents / HEARTBEAT_INTERVAL_S) * ITERATIONS_PER_HEARTBEAT;
  const cores = (cpuS: number) => (rate * per(cpuS)) / TARGET_UTILISATION;
  const workerCores = cores(level.cpuS.workers);
  const parts = [
    { name: 'agent workers', cores: workerCores },
    { name: 'Temporal services', cores: cores(level.cpuS.temporal) },
    { name: "Temporal's PostgreSQL", cores: cores(level.cpuS.temporalDb) },
    { name: "the product's PostgreSQL", cores: cores(level.cpuS.productDb) },
  ].sort((a, b) => b.cores - a.cores);
  const eventsPerIteration = per(level.historyEvents);
  const shards = Math.max(16, 2 ** Math.ceil(Math.log2((rate * 1.5 * 4) / SHARD_TRANSFER_POLLS_PER_S)));
  const tasksPerMonth =
    (TARGET.activeTasks / (SECONDS_PER_ITERATION * (level.iterations / level.tasks))) * 30 * 24 * 3600;
  return [
    `${rate.toFixed(0)} iterations/s: ${TARGET.activeTasks} active tasks at one LLM call per ${SECONDS_PER_ITERATION} s, plus ${TARGET.agents} agents' heartbeats (every ${HEARTBEAT_INTERVAL_S / 60} min, ${ITERATIONS_PER_HEARTBEAT} calls each).`,
    `Agent workers: ${Math.ceil(workerCores / CORES_PER_WORKER)} of ${CORES_PER_WORKER} cores (${(per(level.cpuS.workers) * 1000).toFixed(1)} ms CPU per iteration, ${TARGET_UTILISATION * 100}% target use).`,
    `Temporal services: ${cores(level.cpuS.temporal).toFixed(1)} cores; history shards: ${shards} (each iteration ~1.5 workflow-task loads, ${SHARD_TRANSFER_POLLS_PER_S}/s per shard, 4× headroom; the count is fixed when the database is created, so start with 512 if growth is likely).`,
    `PostgreSQL: ${cores(level.cpuS.temporalDb).toFixed(1)} cores for Temporal's (${(rate * per(level.transactions.temporal)).toFixed(0)} transactions/s), ${cores(level.cpuS.productDb).toFixed(1)} for the product's (${(rate * per(level.transactions.product)).toFixed(0)} transactions/s).`,
    `History: ${eventsPerIteration.toFixed(1)} events and ${(per(level.historyBytes) / 1024).toFixed(1)} KB per iteration: ${((rate * per(level.historyBytes) * 86_400) / 2 ** 30).toFixed(1)} GB of history a day before retention.`,
    `First bottleneck: ${parts[0]!.name} (${parts[0]!.cores.toFixed(1)} cores), then ${parts[1]!.name} (${parts[1]!.cores.toFixed(1)}).`,
    `Temporal Cloud: ${level.actionsPerTask.toFixed(0)} actions per task of ${level.iterations / level.tasks} calls; ${(tasksPerMonth / 1e6).toFixed(1)} M tasks a month at this load ≈ ${((tasksPerMonth * level.actionsPerTask) / 1e6).toFixed(0)} M actions ≈ $${Math.round(((tasksPerMonth * level.actionsPerTask) / 1e6) * CLOUD_USD_PER_MILLION_ACTIONS).toLocaleString('en')} a month at an assumed $${CLOUD_USD_PER_MILLION_ACTIONS} per million.`,
  ];
}

export function levelTable(levels: Level[]): string {
  const rows = levels.map((l) => {
    const per = (x: number) => ((x / l.iterations) * 1000).toFixed(1);
    return `| ${l.tasks} | ${l.iterations} | ${l.wallS.toFixed(1)} | ${(l.iterations / l.wallS).toFixed(1)} | ${per(l.cpuS.workers)} | ${per(l.cpuS.temporal)} | ${per(l.cpuS.temporalDb)} | ${per(l.cpuS.productDb)} | ${(l.transactions.temporal / l.iterations).toFixed(1)} | ${(l.transactions.product / l.iterations).toFixed(1)} | ${(l.historyEvents / l.iterations).toFixed(1)} | ${(l.historyBytes / l.iterations / 1024).toFixed(2)} | ${l.actionsPerTask.toFixed(0)} |`;
  });
  return [
    '| tasks at once | iterations | wall (s) | iterations/s | worker CPU ms/iter | Temporal CPU ms/iter | Temporal PG CPU ms/iter | product PG CPU ms/iter | Temporal PG xacts/iter | product PG xacts/iter | history events/iter | history KB/iter | actions/task |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows,
  ].join('\n');
}

async function main(): Promise<void> {
  const arg = (name: string, fallback: string) => {
    const i = process.argv.indexOf(`--${name}`);
    return i >= 0 ? process.argv[i + 1]! : fallback;
  };
  const levels = arg('levels', '10,20,40').split(',').map(Number);
  if (levels.some((n) => !Number.isInteger(n) || n <= 0))
    throw new Error('--levels must be positive integers separated by commas, e.g. 10,20,40');
  const calls = Number(arg('calls', '11'));
  const answerMs = Number(arg('answer-ms', '200'));
  const results = await runCapacity(levels, calls, answerMs, (line) => console.log(`[capacity] ${line}`));
  const base = results[0]!;
  const drift = results.slice(1).map((l) => {
    const ratio = (k: keyof Level['cpuS']) => (l.cpuS[k] / l.iterations / (base.cpuS[k] / base.iterations)).toFixed(2);
    return `- ${l.tasks / base.tasks}× the load: CPU per iteration ${ratio('workers')}× (workers), ${ratio('temporal')}× (Temporal), ${ratio('temporalDb')}× (Temporal PG), ${ratio('productDb')}× (product PG) of the ${base.tasks}-task level.`;
  });
  console.log(
    `\n${levelTable(results)}\n\nThe model (from the ${results.at(-1)!.tasks}-task level):\n${capacityModel(
      results.at(-1)!,
    )
      .map((l) => `- ${l}`)
      .join('\n')}\n\nHow the per-iteration cost holds as the load grows:\n${drift.join('\n')}`,
  );
}

if (require.main === module) {
  main().catch((error) => {
    console.error(error);
    process.exit(1);
  });
}
