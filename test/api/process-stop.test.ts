import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { openDatabase, type DatabaseHandle } from '../../activities/store/db';
import { upsertAgent } from '../../activities/store/agents';
import { recordTask } from '../../activities/store/tasks';
import { createToken } from '../../api/tokens';
import { STOP_GRACE_MS } from '../../worker/graceful-stop';
import { eventually } from '../support/eventually';

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });

type Ports = { metrics: number; health: number; api: number; temporalMetrics: number; otlp: number };
/** What the API's streams need: a token that reads, and a task still open (its streams do not end by themselves). */
type Fixture = { token: string; taskId: string };

type Process = {
  entry: string;
  /** Variables on top of every optional server's: what differs between this process's variants. */
  env: (ports: Ports) => Record<string, string>;
  ready: (ports: Ports) => string;
  /**
   * Connections left open while the signal arrives, as Prometheus, a kubelet and a browser leave them:
   * keep-alive requests, and Server-Sent Events streams that never end by themselves.
   */
  openConnections: (ports: Ports, fixture: Fixture) => Array<{ url: string; stream?: boolean }>;
  /** Its Prometheus endpoints, each checked by promtool against the real process (and runtime). */
  metricsEndpoints: (ports: Ports) => string[];
};

const workerConnections = (p: Ports) => [
  { url: `http://127.0.0.1:${p.metrics}/metrics` },
  { url: `http://127.0.0.1:${p.health}/healthz` },
];

const processes: Record<string, Process> = {
  // The Temporal runtime's metrics on a Prometheus endpoint of their own…
  'worker, runtime metrics by Prometheus': {
    entry: 'worker/main.ts',
    env: (p) => ({ TEMPORAL_METRICS_BIND: `127.0.0.1:${p.temporalMetrics}` }),
    ready: (p) => `http://127.0.0.1:${p.health}/readyz`,
    openConnections: workerConnections,
    metricsEndpoints: (p) => [
      `http://127.0.0.1:${p.metrics}/metrics`,
      `http://127.0.0.1:${p.metrics}/metrics/temporal`,
      `http://127.0.0.1:${p.temporalMetrics}/metrics`,
    ],
  },
  // …or pushed by OTLP: the two are exclusive, so each is a variant.
  'worker, runtime metrics by OTLP': {
    entry: 'worker/main.ts',
    env: (p) => ({
      OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: `http://127.0.0.1:${p.otlp}/v1/metrics`,
      OTEL_METRIC_EXPORT_INTERVAL: '500',
    }),
    ready: (p) => `http://127.0.0.1:${p.health}/readyz`,
    openConnections: workerConnections,
    metricsEndpoints: (p) => [`http://127.0.0.1:${p.metrics}/metrics`],
  },
  api: {
    entry: 'api/main.ts',
    env: () => ({}),
    ready: (p) => `http://127.0.0.1:${p.api}/healthz`,
    openConnections: (p, { taskId }) => [
      { url: `http://127.0.0.1:${p.api}/healthz` },
      { url: `http://127.0.0.1:${p.api}/v1/tasks/${taskId}/events`, stream: true },
      { url: `http://127.0.0.1:${p.api}/v1/tasks/${taskId}/deltas`, stream: true },
    ],
    // /metrics/temporal of the API needs a runtime to proxy: test/api/telemetry.test.ts checks it.
    metricsEndpoints: (p) => [`http://127.0.0.1:${p.api}/metrics`],
  },
};

let db: DatabaseHandle;
let fixture: Fixture;
let otlp: ReturnType<typeof createHttpServer>;
let otlpPort: number;

beforeAll(async () => {
  db = await openDatabase({ url: process.env.DATABASE_URL, poolSize: 2 });
  const agentId = `stop-${randomUUID().slice(0, 8)}`;
  await upsertAgent(db.db, {
    id: agentId,
    name: 'Stop test',
    files: { soul: 's', agents: 'a', heartbeat: 'h', tools: 't' },
    workspaceDir: path.join(realpathSync(os.tmpdir()), agentId),
  });
  const { task } = await recordTask(db.db, { taskId: `${agentId}-task`, agentId, title: 'Open streams' });
  fixture = { token: (await createToken(db.db, agentId, 'read')).token, taskId: task.id };
  // A live OTLP receiver: spans and runtime metrics are exported while the process runs and at its stop.
  otlp = createHttpServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
  });
  await new Promise<void>((resolve) => otlp.listen(0, '127.0.0.1', resolve));
  otlpPort = (otlp.address() as AddressInfo).port;
});

afterAll(async () => {
  otlp.closeAllConnections();
  await new Promise((resolve) => otlp.close(resolve));
  await db.close();
});

/** Starts `entry` with `env` and collects its output; `exited` resolves with its exit code. */
function launch(entry: string, env: Record<string, string>) {
  const child = spawn(path.resolve('node_modules/.bin/tsx'), [entry], {
    env: { ...process.env, LOG_LEVEL: 'info', NODE_ENV: 'test', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = { text: '' };
  child.stdout.on('data', (chunk) => (log.text += String(chunk)));
  child.stderr.on('data', (chunk) => (log.text += String(chunk)));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, log, exited };
}

/** Signals the process and measures how long it takes to exit, at most the grace time (then `'timeout'`). */
async function stopAndTime(
  launched: ReturnType<typeof launch>,
  signal: NodeJS.Signals,
): Promise<{ code: number | null | 'timeout'; elapsedMs: number }> {
  const signalledAt = Date.now();
  launched.child.kill(signal);
  const code = await Promise.race([
    launched.exited,
    new Promise<'timeout'>((resolve) => setTimeout(resolve, STOP_GRACE_MS, 'timeout')),
  ]);
  return { code, elapsedMs: Date.now() - signalledAt };
}

/**
 * Each process, with every optional server it can open switched on (Prometheus metrics, health,
 * the API's port, the Temporal runtime's metrics endpoint or OTLP push, OTLP traces to a live
 * receiver) and connections left open on them (keep-alive scrapes and probes, the API's SSE streams),
 * stops with status 0 within the documented grace time on SIGTERM and on SIGINT, having closed
 * everything itself: the stop deadline that would force the exit is not reached.
 */
describe.each(Object.entries(processes))('the %s process', (name, proc) => {
  test.each(['SIGTERM', 'SIGINT'] as const)(
    'exits 0 promptly on %s with every optional server on',
    async (signal) => {
      const ports: Ports = {
        metrics: await freePort(),
        health: await freePort(),
        api: await freePort(),
        temporalMetrics: await freePort(),
        otlp: otlpPort,
      };
      const launched = launch(proc.entry, {
        METRICS_PORT: String(ports.metrics),
        HEALTH_PORT: String(ports.health),
        API_PORT: String(ports.api),
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${otlpPort}`,
        TEMPORAL_TASK_QUEUE: `test-stop-${randomUUID()}`,
        ...proc.env(ports),
      });
      const readers: Array<Promise<unknown>> = [];
      try {
        await eventually(
          async () => (await fetch(proc.ready(ports))).status === 200,
          `the ${proc.entry} process to be ready`,
          90_000,
          250,
        ).catch((error: Error) => {
          throw new Error(`${error.message}\n${launched.log.text}`);
        });
        const headers = { authorization: `Bearer ${fixture.token}` };
        for (const { url, stream } of proc.openConnections(ports, fixture)) {
          const response = await fetch(url, {
            headers: stream ? { ...headers, accept: 'text/event-stream' } : headers,
          });
          expect([url, response.status]).toEqual([url, 200]);
          if (stream) {
            expect(response.headers.get('content-type')).toContain('text/event-stream');
            // Read until the server ends the stream (at its stop); the body never ends before.
            readers.push(response.text().catch(() => undefined));
          }
        }
        for (const url of proc.metricsEndpoints(ports)) {
          const response = await fetch(url, { headers });
          const text = await response.text();
          const checked = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
          expect([url, response.status, checked.status, checked.stdout + checked.stderr]).toEqual([url, 200, 0, '']);
        }
        const { code, elapsedMs } = await stopAndTime(launched, signal);
        console.log(`${name} ${signal}: exit ${String(code)} after ${elapsedMs} ms`);
        if (code !== 0) throw new Error(`exit ${String(code)} after ${elapsedMs} ms\n${launched.log.text}`);
        expect(elapsedMs).toBeLessThan(STOP_GRACE_MS);
        // Everything closed by itself: the deadline that forces the exit was not what ended it.
        expect(launched.log.text).not.toContain('after the stop signal; exiting now');
        await Promise.all(readers);
      } finally {
        if (launched.child.exitCode === null) launched.child.kill('SIGKILL');
        await launched.exited;
      }
    },
    150_000,
  );
});

/**
 * A worker still waiting for a dependency (a container started before PostgreSQL or Temporal) stops
 * at once on SIGTERM, with status 0, instead of finishing its wait or failing.
 */
describe.each([
  ['PostgreSQL', { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' }],
  ['Temporal', { TEMPORAL_ADDRESS: '127.0.0.1:1' }],
])('a worker waiting for %s', (dependency, env) => {
  test('exits 0 promptly on SIGTERM', async () => {
    const metricsPort = await freePort();
    const launched = launch('worker/main.ts', {
      ...env,
      METRICS_PORT: String(metricsPort),
      TEMPORAL_TASK_QUEUE: `test-stop-${randomUUID()}`,
    });
    try {
      await eventually(() => launched.log.text.includes(`waiting for ${dependency}`), `waiting for ${dependency}`);
      const { code, elapsedMs } = await stopAndTime(launched, 'SIGTERM');
      console.log(`a worker waiting for ${dependency}, SIGTERM: exit ${String(code)} after ${elapsedMs} ms`);
      if (code !== 0) throw new Error(`exit ${String(code)} after ${elapsedMs} ms\n${launched.log.text}`);
      expect(launched.log.text).not.toContain('after the stop signal; exiting now');
    } finally {
      if (launched.child.exitCode === null) launched.child.kill('SIGKILL');
      await launched.exited;
    }
  }, 60_000);
});
