import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { eventually } from '../support/eventually';

/**
 * The grace time docs/operations.md promises: a process exits this soon after SIGTERM or SIGINT,
 * well inside Kubernetes' default 30 s termination grace period.
 */
const STOP_WITHIN_MS = 15_000;

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });

type Process = {
  entry: string;
  ready: (ports: Ports) => string;
  openConnections: (ports: Ports) => string[];
  /** Its Prometheus endpoints, each checked by promtool against the real Temporal runtime. */
  metricsEndpoints: (ports: Ports) => string[];
};
type Ports = { metrics: number; health: number; api: number; temporalMetrics: number };

const processes: Record<string, Process> = {
  worker: {
    entry: 'worker/main.ts',
    ready: (p) => `http://127.0.0.1:${p.health}/readyz`,
    // A scraper's and a probe's keep-alive connections, left open as Prometheus and the kubelet do.
    openConnections: (p) => [`http://127.0.0.1:${p.metrics}/metrics`, `http://127.0.0.1:${p.health}/healthz`],
    metricsEndpoints: (p) => [
      `http://127.0.0.1:${p.metrics}/metrics`,
      `http://127.0.0.1:${p.metrics}/metrics/temporal`,
      `http://127.0.0.1:${p.temporalMetrics}/metrics`,
    ],
  },
  api: {
    entry: 'api/main.ts',
    ready: (p) => `http://127.0.0.1:${p.api}/healthz`,
    openConnections: (p) => [`http://127.0.0.1:${p.api}/healthz`],
    // The API's /metrics and /metrics/temporal take a token: test/api/telemetry.test.ts checks them.
    metricsEndpoints: () => [],
  },
};

/**
 * Each process, with every optional server it can open switched on (Prometheus metrics, health,
 * the API's port, the Temporal runtime's metrics endpoint, OTLP export to a live receiver), stops
 * with status 0 within the documented grace time on SIGTERM and on SIGINT.
 */
describe.each(Object.entries(processes))('the %s process', (_name, proc) => {
  let otlp: ReturnType<typeof createHttpServer>;
  let otlpPort: number;
  beforeAll(async () => {
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
  });

  test.each(['SIGTERM', 'SIGINT'] as const)(
    'exits 0 promptly on %s with every optional server on',
    async (signal) => {
      const ports: Ports = {
        metrics: await freePort(),
        health: await freePort(),
        api: await freePort(),
        temporalMetrics: await freePort(),
      };
      const child = spawn(path.resolve('node_modules/.bin/tsx'), [proc.entry], {
        env: {
          ...process.env,
          METRICS_PORT: String(ports.metrics),
          HEALTH_PORT: String(ports.health),
          API_PORT: String(ports.api),
          TEMPORAL_METRICS_BIND: `127.0.0.1:${ports.temporalMetrics}`,
          OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${otlpPort}`,
          TEMPORAL_TASK_QUEUE: `test-stop-${randomUUID()}`,
          LOG_LEVEL: 'warn',
          NODE_ENV: 'test',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (chunk) => (output += String(chunk)));
      child.stderr.on('data', (chunk) => (output += String(chunk)));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      try {
        await eventually(
          async () => (await fetch(proc.ready(ports))).status === 200,
          `the ${proc.entry} process to be ready`,
          90_000,
          250,
        ).catch((error: Error) => {
          throw new Error(`${error.message}\n${output}`);
        });
        for (const url of proc.openConnections(ports)) expect((await fetch(url)).status).toBe(200);
        for (const url of proc.metricsEndpoints(ports)) {
          const response = await fetch(url);
          const text = await response.text();
          const checked = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
          expect([url, response.status, checked.status, checked.stdout + checked.stderr]).toEqual([url, 200, 0, '']);
        }
        const signalledAt = Date.now();
        child.kill(signal);
        const code = await Promise.race([
          exited,
          new Promise<'timeout'>((r) => setTimeout(r, STOP_WITHIN_MS, 'timeout')),
        ]);
        const elapsedMs = Date.now() - signalledAt;
        console.log(`${proc.entry} ${signal}: exit ${String(code)} after ${elapsedMs} ms`);
        if (code !== 0) throw new Error(`exit ${String(code)} after ${elapsedMs} ms\n${output}`);
        expect(elapsedMs).toBeLessThan(STOP_WITHIN_MS);
      } finally {
        if (child.exitCode === null) child.kill('SIGKILL');
        await exited;
      }
    },
    150_000,
  );
});
