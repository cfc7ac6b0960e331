import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { eventually } from '../support/eventually';
import { pythonWithTools } from '../support/python-tools';

/** A worker that drains and exits this fast on SIGTERM is well inside an orchestrator's grace period (compose gives 30 s). */
const SIGTERM_EXIT_WITHIN_MS = 15_000;

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });

/**
 * The worker process as an orchestrator sees it (`npm run worker`, the image's command): `/readyz`
 * turns 200 once it polls, the Temporal runtime's metrics arrive by OTLP when asked for (at a receiver
 * decoding with the OpenTelemetry project's protocol definitions), and SIGTERM makes it drain and exit
 * with status 0 within seconds.
 */
describe('the worker process', () => {
  let python: string;
  // The first run installs the Python tools (a minute or so); later runs find them.
  beforeAll(() => {
    python = pythonWithTools();
  }, 300_000);

  test('/healthz and /readyz answer, runtime metrics go out by OTLP, and SIGTERM stops it cleanly and promptly', async () => {
    const port = await freePort();
    const receiver = spawn(python, [path.join(__dirname, '../support/python/otlp_receiver.py')]);
    const metricNames = new Set<string>();
    const lines = createInterface({ input: receiver.stdout });
    const receiverPort = await new Promise<string>((resolve) => lines.once('line', resolve));
    lines.on('line', (line) => {
      for (const name of (JSON.parse(line) as { metrics: string[] }).metrics) metricNames.add(name);
    });
    const child = spawn(path.resolve('node_modules/.bin/tsx'), ['worker/main.ts'], {
      env: {
        ...process.env,
        HEALTH_PORT: String(port),
        HEALTH_HOST: '127.0.0.1',
        TEMPORAL_TASK_QUEUE: `test-process-${randomUUID()}`,
        LOG_LEVEL: 'warn',
        NODE_ENV: 'test',
        OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: `http://127.0.0.1:${receiverPort}/v1/metrics`,
        OTEL_METRIC_EXPORT_INTERVAL: '500',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk) => (output += String(chunk)));
    child.stderr.on('data', (chunk) => (output += String(chunk)));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await eventually(
        async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200,
        'the worker to be ready',
        90_000,
        250,
      ).catch((error: Error) => {
        throw new Error(`${error.message}\n${output}`);
      });
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
      const ready = (await (await fetch(`http://127.0.0.1:${port}/readyz`)).json()) as {
        ready: boolean;
        postgres: { state: string };
      };
      expect(ready).toMatchObject({ ready: true, postgres: { state: 'up' }, temporal: { state: 'up' } });
      // The runtime pushes its pollers' metrics by OTLP/HTTP (protobuf).
      await eventually(
        () => [...metricNames].some((n) => n.startsWith('temporal_')),
        'Temporal runtime metrics at the OTLP receiver',
        30_000,
        250,
      );
      const started = Date.now();
      child.kill('SIGTERM');
      const code = await exited;
      expect([code, Date.now() - started < SIGTERM_EXIT_WITHIN_MS]).toEqual([0, true]);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      receiver.kill();
    }
  }, 120_000);
});
