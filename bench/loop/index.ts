/**
 * `npm run bench:loop`: what one iteration of the durable task loop costs, against a plain in-process
 * loop with the same fake provider, the same tool and the same database, in one run. Needs
 * DATABASE_URL (a PostgreSQL server); starts its own Temporal dev server on a free port (see
 * `DEV_SERVER_ARGS`) unless BENCH_TEMPORAL_ADDRESS names one. Prints Markdown tables and writes
 * bench/results/loop-latest.md. Not a test: the figures depend on the machine and its load.
 * `--langgraph` adds a LangGraph JS + PostgresSaver row to every run (installed on demand, see langgraph.ts).
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, realpathSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode } from '@temporalio/worker';
import type { ChildProcess } from 'node:child_process';
import { LlmRouter } from '../../activities/llm/router';
import { createProvider } from '../../activities/llm/providers';
import { openDatabase, type DatabaseHandle } from '../../activities/store/db';
import { AgentsClient } from '../../client';
import { taskWorkflowId } from '../../workflows/contract';
import { startFakeLlmServer, type FakeLlmServer } from '../../test/fake-llm';
import { quietLogger } from '../../test/support/quiet-logger';
import { runCacheShare } from './cache-share';
import { runInProcessTask } from './in-process';
import { analyse, sum, taskFigures, ZERO_FIGURES, type HistoryFigures } from './history';
import type { FloorInput } from './floor/workflows';
import { cpuSeconds, loadAverage, sampleRss } from './proc';
import { insertBenchTask, ScriptedTasks } from './scenario';
import { DEV_SERVER_ARGS, startDevServer, startWorkerProcess, stopProcess } from './services';
import { createLangGraphRunner, LANGGRAPH_PACKAGES, loadLangGraph } from './langgraph';
import {
  probeStatus,
  STATUS_PROBE_CALLS,
  statusProbeTable,
  viaGetStatus,
  viaRoundQuery,
  type StatusProbe,
} from './status-probe';

const RESULTS_FILE = path.join(__dirname, '..', 'results', 'loop-latest.md');
/**
 * How often the driver looks (in memory) whether the fake has served every task's last call. Until it
 * has, no task can have submitted, so the database is not asked: a 200-id count every 20 ms cost the
 * run ~2 s of PostgreSQL CPU (pg_stat_statements), charged to the product's row.
 */
const DONE_POLL_MS = 20;
/**
 * …and how often the database is asked once it has: the submission follows within milliseconds, and a
 * 20 ms poll would add up to 20 ms per task (1 ms per iteration at 21 calls) that the floor rows, which
 * await their workflow's result, do not pay.
 */
const DONE_POLL_AFTER_LAST_CALL_MS = 1;
/** Tasks whose histories are read for the per-iteration breakdown (reading all 200 would load the server). */
const HISTORY_SAMPLE = 20;
/** Give up on a run after this long. */
const RUN_TIMEOUT_MS = 15 * 60_000;

interface Scenario {
  name: string;
  tasks: number;
  calls: number;
  answerMs: number;
  sequential: boolean;
}

const SCENARIOS: Scenario[] = [
  { name: 'sequential: 5 tasks × 21 calls, instant answers', tasks: 5, calls: 21, answerMs: 0, sequential: true },
  { name: '50 tasks at once × 11 calls, 200 ms per answer', tasks: 50, calls: 11, answerMs: 200, sequential: false },
  { name: '200 tasks at once × 11 calls, 200 ms per answer', tasks: 200, calls: 11, answerMs: 200, sequential: false },
];

/** BENCH_LOOP_QUICK=1: small runs, to check the bench itself (figures not comparable). */
const QUICK_SCENARIOS: Scenario[] = [
  { name: 'quick sequential: 2 tasks × 6 calls', tasks: 2, calls: 6, answerMs: 0, sequential: true },
  { name: 'quick: 10 tasks at once × 4 calls, 200 ms', tasks: 10, calls: 4, answerMs: 200, sequential: false },
];

/** BENCH_LOOP_FLOOR=0: skip the Temporal floor rows (quicker A/B runs of the product's loop). */
const FLOOR = process.env.BENCH_LOOP_FLOOR !== '0';
/** `--langgraph` (or BENCH_LANGGRAPH=1): add the LangGraph JS + PostgresSaver row. */
const LANGGRAPH = process.argv.includes('--langgraph') || process.env.BENCH_LANGGRAPH === '1';
const FLOOR_KINDS: Array<FloorInput['kind']> = ['regular', 'local'];
const FLOOR_LABEL: Record<FloorInput['kind'], string> = {
  regular: 'Temporal floor: bare workflow, 1 no-op activity / iteration',
  local: 'Temporal floor: bare workflow, 1 no-op local activity / iteration',
};

interface RunFigures {
  wallMs: number;
  served: number;
  expected: number;
  cpu: Record<string, number | undefined>;
  rssMb?: number;
  history?: { perIteration: HistoryFigures; sampledIterations: number };
}

interface Bench {
  db: DatabaseHandle;
  fake: FakeLlmServer;
  scripts: ScriptedTasks;
  agents: AgentsClient;
  temporal: Client;
  worker: ChildProcess;
  server?: ChildProcess;
  workspace: string;
  router: LlmRouter;
  /** The task queue of the bench-only floor worker (in the worker process). */
  floorQueue: string;
  langgraph?: Awaited<ReturnType<typeof createLangGraphRunner>>;
}

async function main(): Promise<void> {
  // Its agents' workspaces lie in the OS temp folder: an allowed root for this run (and its workers).
  process.env.AGENTS_WORKSPACE_ALLOWED_ROOTS ??= realpathSync(os.tmpdir());
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl)
    throw new Error(
      'DATABASE_URL is not set: the loop bench needs a PostgreSQL server (e.g. postgres://postgres@127.0.0.1:5432/bench)',
    );
  const started = performance.now();
  const log = (text: string) => process.stderr.write(`[bench:loop] ${text}\n`);
  const db = await openDatabase({ url: databaseUrl });
  const fake = await startFakeLlmServer();
  const scripts = new ScriptedTasks(fake);
  const own = process.env.BENCH_TEMPORAL_ADDRESS ? undefined : await startDevServer();
  const address = process.env.BENCH_TEMPORAL_ADDRESS ?? own!.address;
  log(`Temporal at ${address}${own ? ' (own dev server)' : ''}`);
  const connection = await Connection.connect({ address });
  const temporal = new Client({ connection });
  const taskQueue = `bench-loop-${randomUUID().slice(0, 8)}`;
  const agents = new AgentsClient(temporal, db.db, { taskQueue });
  const workspace = mkdtempSync(path.join(os.tmpdir(), 'da-bench-'));
  const bundlePath = path.join(workspace, 'workflow-bundle.js');
  writeFileSync(
    bundlePath,
    (await bundleWorkflowCode({ workflowsPath: require.resolve('../../workflows'), logger: quietLogger })).code,
  );
  const floorBundlePath = path.join(workspace, 'floor-bundle.js');
  writeFileSync(
    floorBundlePath,
    (await bundleWorkflowCode({ workflowsPath: require.resolve('./floor/workflows'), logger: quietLogger })).code,
  );
  const worker = await startWorkerProcess({
    DATABASE_URL: databaseUrl,
    BENCH_TEMPORAL_ADDRESS: address,
    BENCH_FAKE_URL: fake.url,
    BENCH_TASK_QUEUE: taskQueue,
    BENCH_WORKFLOW_BUNDLE: bundlePath,
    BENCH_FLOOR_BUNDLE: floorBundlePath,
    ...Object.fromEntries(
      Object.entries(process.env)
        .filter(([k]) => k.startsWith('BENCH_'))
        .map(([k, v]) => [k, v ?? '']),
    ),
  });
  const router = LlmRouter.fromConfig(
    [{ name: 'anthropic', kind: 'anthropic', apiKey: 'bench', baseURL: fake.url }],
    createProvider,
  );
  const bench: Bench = {
    db,
    fake,
    scripts,
    agents,
    temporal,
    worker,
    server: own?.process,
    workspace,
    router,
    floorQueue: `${taskQueue}-floor`,
  };
  if (LANGGRAPH)
    bench.langgraph = await createLangGraphRunner(loadLangGraph(log), databaseUrl, fake.url, db.db, router);
  const rows: string[] = [];
  try {
    log('warm-up');
    await runDurable(bench, { name: 'warm-up', tasks: 2, calls: 3, answerMs: 0, sequential: false }, false);
    await runInProcess(bench, { name: 'warm-up', tasks: 2, calls: 3, answerMs: 0, sequential: false });
    if (bench.langgraph)
      await runInProcess(bench, { name: 'warm-up', tasks: 2, calls: 3, answerMs: 0, sequential: false }, 'langgraph');
    if (FLOOR)
      for (const kind of FLOOR_KINDS)
        await runFloor(bench, { name: 'warm-up', tasks: 2, calls: 3, answerMs: 0, sequential: false }, kind, false);
    const only = process.env.BENCH_LOOP_ONLY; // e.g. "3": the third run only (A/B of one setting)
    const scenarios = (process.env.BENCH_LOOP_QUICK ? QUICK_SCENARIOS : SCENARIOS).filter(
      (_, i) => !only || only.split(',').includes(String(i + 1)),
    );
    for (const scenario of scenarios) {
      log(scenario.name);
      const inProcess = await runInProcess(bench, scenario);
      const durable = await runDurable(bench, scenario, true);
      rows.push(...tableRows(scenario, durable, inProcess));
      if (bench.langgraph)
        rows.push(
          plainRow(
            scenario,
            'LangGraph JS + PostgresSaver',
            await runInProcess(bench, scenario, 'langgraph'),
            inProcess,
          ),
        );
      if (FLOOR)
        for (const kind of FLOOR_KINDS)
          rows.push(floorRow(scenario, kind, await runFloor(bench, scenario, kind, true), inProcess));
    }
    log('status reads during a chain of local steps');
    const status = await runStatusProbes(bench);
    log('cacheable input share (paced clock)');
    const cache = await runCacheShare(db.db, router, scripts, workspace);
    const text = report(
      rows,
      [...status, '', ...cache],
      address,
      own !== undefined,
      (performance.now() - started) / 1_000,
    );
    process.stdout.write(`${text}\n`);
    mkdirSync(path.dirname(RESULTS_FILE), { recursive: true });
    writeFileSync(RESULTS_FILE, text);
    process.stdout.write(`\nwritten to ${RESULTS_FILE}\n`);
  } finally {
    await bench.langgraph?.end();
    await stopProcess(worker);
    await connection.close();
    if (own) await stopProcess(own.process);
    await fake.close();
    await db.close();
    rmSync(workspace, { recursive: true, force: true });
  }
}

async function createTasks(
  bench: Bench,
  scenario: Scenario,
  prefix: string,
): Promise<Array<{ agentId: string; taskId: string }>> {
  const out: Array<{ agentId: string; taskId: string }> = [];
  for (let i = 0; i < scenario.tasks; i += 1) {
    const agentId = `bench-${prefix}-${randomUUID().slice(0, 8)}`;
    const workspaceDir = path.join(bench.workspace, agentId);
    mkdirSync(workspaceDir, { recursive: true });
    await bench.agents.upsertAgent({
      id: agentId,
      name: `Bench agent ${i}`,
      files: {
        soul: 'You are careful and concise.',
        agents: 'You complete tasks with tools and report what you did.',
        heartbeat: '- check tasks',
        tools: 'Use the file tools for files.',
      },
      config: {},
      workspaceDir,
    });
    const taskId = randomUUID();
    bench.scripts.add(taskId, { calls: scenario.calls, answerMs: scenario.answerMs });
    out.push({ agentId, taskId });
  }
  return out;
}

interface CpuSnapshot {
  processes: Record<string, number | undefined>;
  /** PostgreSQL backends serving this database, by pid. */
  pg: Map<number, number>;
}

async function cpuSnapshot(bench: Bench): Promise<CpuSnapshot> {
  const self = process.cpuUsage();
  const { rows } = await sql<{
    pid: number;
  }>`select pid from pg_stat_activity where datname = current_database()`.execute(bench.db.db);
  const pg = new Map<number, number>();
  for (const { pid } of rows) {
    const cpu = cpuSeconds(pid);
    if (cpu !== undefined) pg.set(pid, cpu);
  }
  return {
    processes: {
      worker: cpuSeconds(bench.worker.pid!),
      'Temporal server': bench.server ? cpuSeconds(bench.server.pid!) : undefined,
      'bench (driver + fake LLM)': (self.user + self.system) / 1e6,
    },
    pg,
  };
}

/** CPU seconds per process between two snapshots; a backend that connected during the run counts whole. */
function cpuDelta(before: CpuSnapshot, after: CpuSnapshot): Record<string, number | undefined> {
  const out: Record<string, number | undefined> = {};
  for (const [k, v] of Object.entries(after.processes))
    out[k] = v !== undefined && before.processes[k] !== undefined ? v - before.processes[k]! : undefined;
  let pg = 0;
  for (const [pid, cpu] of after.pg) pg += cpu - (before.pg.get(pid) ?? 0);
  out['PostgreSQL (this database)'] = after.pg.size > 0 ? pg : undefined;
  return out;
}

async function waitForSubmissions(bench: Bench, taskIds: string[]): Promise<void> {
  const deadline = Date.now() + RUN_TIMEOUT_MS;
  for (;;) {
    if (!bench.scripts.lastCallsServed(taskIds)) {
      if (Date.now() > deadline) throw new Error(`the fake did not serve every task's last call in time`);
      await new Promise((r) => setTimeout(r, DONE_POLL_MS));
      continue;
    }
    const row = await bench.db.db
      .selectFrom('tool_calls')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('task_id', 'in', taskIds)
      .where('tool', '=', 'task_submit_review')
      .where('status', '=', 'completed')
      .executeTakeFirstOrThrow();
    if (Number(row.n) >= taskIds.length) return;
    if (Date.now() > deadline) throw new Error(`only ${row.n} of ${taskIds.length} tasks submitted in time`);
    await new Promise((r) => setTimeout(r, DONE_POLL_AFTER_LAST_CALL_MS));
  }
}

async function runDurable(bench: Bench, scenario: Scenario, measure: boolean): Promise<RunFigures> {
  const tasks = await createTasks(bench, scenario, 'd');
  const ids = tasks.map((t) => t.taskId);
  const rss = sampleRss(bench.worker.pid!);
  const cpuBefore = await cpuSnapshot(bench);
  const t0 = performance.now();
  const start = (t: { agentId: string; taskId: string }) =>
    bench.agents.startTask({
      agentId: t.agentId,
      taskId: t.taskId,
      title: 'Write the report',
      description: 'Write the report in parts, then submit it for review.',
    });
  if (scenario.sequential) {
    for (const t of tasks) {
      await start(t);
      await waitForSubmissions(bench, [t.taskId]);
    }
  } else {
    await Promise.all(tasks.map(start));
    await waitForSubmissions(bench, ids);
  }
  const wallMs = performance.now() - t0;
  const cpu = cpuDelta(cpuBefore, await cpuSnapshot(bench));
  const rssMb = rss.stop();
  let history: RunFigures['history'];
  if (measure) {
    const sample = ids.slice(0, HISTORY_SAMPLE);
    let total = ZERO_FIGURES;
    for (const id of sample) {
      const f = await taskFigures(bench.temporal, id);
      total = sum(total, sum(f.task, f.round));
    }
    const iterations = bench.scripts.served(sample);
    history = { perIteration: scale(total, 1 / iterations), sampledIterations: iterations };
  }
  // Tasks wait for review; end them so that the next run starts from an idle worker.
  await Promise.allSettled(
    ids.map((id) => bench.temporal.workflow.getHandle(taskWorkflowId(id)).terminate('bench run finished')),
  );
  return { wallMs, served: bench.scripts.served(ids), expected: scenario.tasks * scenario.calls, cpu, rssMb, history };
}

/** Status reads during a task's chains of local steps: through `getStatus`, then the round's query alone. */
async function runStatusProbes(bench: Bench): Promise<string[]> {
  const shape: Scenario = { name: 'status', tasks: 1, calls: STATUS_PROBE_CALLS, answerMs: 0, sequential: true };
  const readers: Array<[string, (taskId: string) => () => Promise<number>]> = [
    ['`getStatus`', (taskId) => viaGetStatus(bench.agents, taskId)],
    ["the round's `progress` query alone", (taskId) => viaRoundQuery(bench.temporal, taskId)],
  ];
  const rows: Array<[string, StatusProbe]> = [];
  for (const [name, reader] of readers) {
    const [task] = await createTasks(bench, shape, 's');
    const { agentId, taskId } = task!;
    await bench.agents.startTask({ agentId, taskId, title: 'Write the report', description: 'Write it in parts.' });
    rows.push([name, await probeStatus(reader(taskId), async () => bench.scripts.lastCallsServed([taskId]))]);
    await waitForSubmissions(bench, [taskId]);
    await bench.temporal.workflow.getHandle(taskWorkflowId(taskId)).terminate('bench run finished');
  }
  return statusProbeTable(rows);
}

/**
 * The Temporal floor for a run shape: the bench-only workflow (bench/loop/floor) with the same number
 * of workflows and iterations, each iteration one no-op activity that waits the fake's answer time.
 */
async function runFloor(
  bench: Bench,
  scenario: Scenario,
  kind: FloorInput['kind'],
  measure: boolean,
): Promise<RunFigures> {
  const ids = Array.from({ length: scenario.tasks }, () => `bench-floor-${kind}-${randomUUID().slice(0, 8)}`);
  const input: FloorInput = { iterations: scenario.calls, delayMs: scenario.answerMs, kind };
  const run = (workflowId: string) =>
    bench.temporal.workflow.execute('floorLoopWorkflow', { taskQueue: bench.floorQueue, workflowId, args: [input] });
  const rss = sampleRss(bench.worker.pid!);
  const cpuBefore = await cpuSnapshot(bench);
  const t0 = performance.now();
  if (scenario.sequential) for (const id of ids) await run(id);
  else await Promise.all(ids.map(run));
  const wallMs = performance.now() - t0;
  const cpu = cpuDelta(cpuBefore, await cpuSnapshot(bench));
  const rssMb = rss.stop();
  let history: RunFigures['history'];
  if (measure) {
    const sample = ids.slice(0, HISTORY_SAMPLE);
    let total = ZERO_FIGURES;
    for (const id of sample)
      total = sum(total, analyse((await bench.temporal.workflow.getHandle(id).fetchHistory()).events ?? []));
    const iterations = sample.length * scenario.calls;
    history = { perIteration: scale(total, 1 / iterations), sampledIterations: iterations };
  }
  const expected = scenario.tasks * scenario.calls;
  return { wallMs, served: expected, expected, cpu, rssMb, history };
}

async function runInProcess(
  bench: Bench,
  scenario: Scenario,
  system: 'plain' | 'langgraph' = 'plain',
): Promise<RunFigures> {
  const tasks = await createTasks(bench, scenario, system === 'plain' ? 'p' : 'lg');
  const runTask =
    system === 'plain'
      ? (taskId: string) => runInProcessTask(bench.db.db, bench.router, taskId)
      : (taskId: string) => bench.langgraph!.run(taskId);
  for (const t of tasks) {
    await insertBenchTask(bench.db.db, { id: t.taskId, agentId: t.agentId });
  }
  const cpuBefore = await cpuSnapshot(bench);
  const t0 = performance.now();
  if (scenario.sequential) for (const t of tasks) await runTask(t.taskId);
  else await Promise.all(tasks.map((t) => runTask(t.taskId)));
  const wallMs = performance.now() - t0;
  const cpu = cpuDelta(cpuBefore, await cpuSnapshot(bench));
  return {
    wallMs,
    served: bench.scripts.served(tasks.map((t) => t.taskId)),
    expected: scenario.tasks * scenario.calls,
    cpu,
  };
}

function scale(f: HistoryFigures, k: number): HistoryFigures {
  return Object.fromEntries(Object.entries(f).map(([key, v]) => [key, v * k])) as unknown as HistoryFigures;
}

const fmt = (n: number | undefined, digits = 1) => (n === undefined || !Number.isFinite(n) ? '–' : n.toFixed(digits));

const perIteration = (r: RunFigures) => r.wallMs / r.served;
const cpuText = (r: RunFigures) =>
  Object.entries(r.cpu)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k} ${fmt(v)}`)
    .join(' · ');

/** A measured row: wall time, per-iteration history figures, CPU and RSS. */
function measuredRow(scenario: Scenario, system: string, r: RunFigures, inProcess: RunFigures): string {
  const h = r.history?.perIteration;
  const wftLatency =
    h && h.workflowTasks > 0
      ? `${fmt(h.wftScheduleToStart / h.workflowTasks)} + ${fmt(h.wftStartToComplete / h.workflowTasks)}`
      : '–';
  const activity =
    h && h.activities > 0
      ? `${fmt(h.activityStartToClose)} (wait ${fmt(h.activityScheduleToStart / h.activities)})`
      : '–';
  const activities = h
    ? `${fmt(h.activities, 2)}${h.localActivities > 0 ? ` + ${fmt(h.localActivities, 2)} local` : ''}`
    : '–';
  const inside = h && h.steps > 0 ? fmt(h.stepElapsed / h.steps) : '–';
  return `| ${scenario.name} | ${system} | ${fmt(r.wallMs / 1_000, 2)} | ${r.served}/${r.expected} | ${fmt(perIteration(r))} | ${fmt(r.wallMs / inProcess.wallMs, 2)}× | ${fmt(h?.events)} | ${fmt(h?.workflowTasks, 2)} | ${wftLatency} | ${activities} | ${activity} | ${inside} | ${cpuText(r)} | ${fmt(r.rssMb, 0)} |`;
}

function tableRows(scenario: Scenario, durable: RunFigures, inProcess: RunFigures): string[] {
  return [
    measuredRow(scenario, 'durable-agents', durable, inProcess),
    plainRow(scenario, 'in-process loop + PostgreSQL', inProcess, inProcess),
  ];
}

/** A row without Temporal history figures (the in-process loop, LangGraph). */
function plainRow(scenario: Scenario, system: string, r: RunFigures, inProcess: RunFigures): string {
  return `| ${scenario.name} | ${system} | ${fmt(r.wallMs / 1_000, 2)} | ${r.served}/${r.expected} | ${fmt(perIteration(r))} | ${fmt(r.wallMs / inProcess.wallMs, 2)}× | – | – | – | – | – | – | ${cpuText(r)} | – |`;
}

/** A floor row ("LLM calls served" is the iterations run: there is no LLM call). */
function floorRow(scenario: Scenario, kind: FloorInput['kind'], floor: RunFigures, inProcess: RunFigures): string {
  return measuredRow(scenario, FLOOR_LABEL[kind], floor, inProcess);
}

function report(rows: string[], tail: string[], address: string, ownServer: boolean, seconds: number): string {
  return [
    '# Loop benchmark (`npm run bench:loop`)',
    '',
    `Node ${process.version}, ${os.cpus().length} CPU(s) (${os.cpus()[0]?.model ?? 'unknown'}), ${new Date().toISOString().slice(0, 16)} UTC, load average at the end ${loadAverage()}.`,
    `Temporal: ${ownServer ? `own dev server (\`temporal server start-dev ${DEV_SERVER_ARGS.join(' ')}\`)` : `existing server at ${address}`}; PostgreSQL: DATABASE_URL; the fake Anthropic server and the driver run in the bench process, the worker in its own.`,
    '',
    'Every LLM call of a task: one `file_write` (a real file in the agent workspace), the last one `task_submit_review`. "ms / iteration" is wall time over LLM calls the fake served. The Temporal floor rows run a bare bench-only workflow (bench/loop/floor, its own worker in the worker process, same server) with the same number of workflows and iterations, each iteration one no-op activity (regular or local) that waits the fake\'s answer time; there "LLM calls served" counts iterations. "ratio" is wall time against the in-process loop. History figures (sampled: up to 20 tasks per run, task workflow + round) are per iteration: events, workflow tasks (WFT) with their mean schedule-to-start + run time in ms, regular activities (and local ones, recorded as markers) with the time from their start to their completion event per iteration (and their mean schedule-to-start), and "step ms (inside)": the mean wall time inside the loop step as the step itself measured it (`elapsedMs` in its result, regular or local). CPU is seconds used by each process during the run.',
    '',
    '| run | system | wall (s) | LLM calls served | ms / iteration | ratio | events / iteration | WFT / iteration | WFT latency (ms) | activities / iteration | activity ms / iteration | step ms (inside) | CPU (s) | worker RSS peak (MB) |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |',
    ...rows,
    '',
    LANGGRAPH
      ? `LangGraph JS rows: ${LANGGRAPH_PACKAGES.join(', ')} (installed for the bench only), a model node and a tools node, PostgresSaver checkpoints in this PostgreSQL, run in the bench process (its CPU is under "bench").`
      : 'LangGraph JS: not run (optional: `npm run bench:loop -- --langgraph` installs it for the bench; it is not a dependency).',
    '',
    ...tail,
    '',
    `Total run time: ${seconds.toFixed(0)} s.`,
    '',
  ].join('\n');
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
