import { spawn } from 'node:child_process';
import { createServer, type AddressInfo, type Server } from 'node:net';
import path from 'node:path';

/** A bad value stops the start at once, before any connection is waited for. */
const EXIT_WITHIN_MS = 30_000;

/** A port some other program holds while the test runs: the processes must name the variable that asks for it. */
let taken: Server;
const TAKEN = '<a port in use>';

type Case = [command: string, variable: string, value: string, alsoSet?: Record<string, string>];

/** Each must stop its process with exit code 1 and one line naming the variable and the value. */
const BAD_VALUES: Case[] = [
  ...['abc', '70000', '-1'].flatMap((value): Case[] => [
    ['api/main.ts', 'API_PORT', value],
    ['worker/main.ts', 'METRICS_PORT', value],
    ['worker/main.ts', 'HEALTH_PORT', value],
  ]),
  // Nothing listens on port 1; the worker waits for Temporal by design (containers start in any order).
  ['api/main.ts', 'TEMPORAL_ADDRESS', '127.0.0.1:1'],
  ['worker/main.ts', 'TEMPORAL_ADDRESS', 'http://127.0.0.1:7233'],
  // A port another program holds, an address that is not this machine's: named by variable, not `EADDRINUSE`.
  ['api/main.ts', 'API_PORT', TAKEN],
  ['worker/main.ts', 'METRICS_PORT', TAKEN],
  ['worker/main.ts', 'HEALTH_PORT', TAKEN, { HEALTH_HOST: '127.0.0.1' }],
  ['api/main.ts', 'API_HOST', '192.0.2.1'],
  ['worker/main.ts', 'HEALTH_HOST', 'no-such-host.invalid', { HEALTH_PORT: '0' }],
  // The line is written even when the bad variable is the log level itself.
  ['worker/main.ts', 'LOG_LEVEL', 'verbose'],
  ['worker/main.ts', 'DATABASE_URL', 'localhost:5432/agents'],
  ['worker/main.ts', 'OTEL_EXPORTER_OTLP_ENDPOINT', 'collector:4318'],
  ['worker/main.ts', 'AGENTS_SANDBOX_BWRAP', '/nonexistent/bwrap'],
  ['worker/main.ts', 'WEB_FETCH', 'maybe'],
  ['api/main.ts', 'API_TRUST_PROXY', 'yes'],
  ['client/cli.ts task list', 'DATABASE_PREPARED_STATEMENTS', 'false'],
];

function start(
  command: string,
  env: Record<string, string>,
): Promise<{ code: number | null; output: string; elapsedMs: number }> {
  const [entry, ...args] = command.split(' ');
  const startedAt = Date.now();
  const child = spawn(path.resolve('node_modules/.bin/tsx'), [entry!, ...args], {
    env: { ...process.env, LOG_LEVEL: 'warn', NODE_ENV: 'test', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += String(chunk)));
  child.stderr.on('data', (chunk) => (output += String(chunk)));
  const killer = setTimeout(() => child.kill('SIGKILL'), EXIT_WITHIN_MS);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      clearTimeout(killer);
      resolve({ code, output, elapsedMs: Date.now() - startedAt });
    }),
  );
}

describe('a bad configuration value', () => {
  beforeAll(async () => {
    taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    await new Promise((resolve) => taken.close(resolve));
  });

  test.concurrent.each(BAD_VALUES)(
    '%s with %s=%s exits 1 with one line naming the variable and the value',
    async (command, variable, given, alsoSet = {}) => {
      const value = given === TAKEN ? String((taken.address() as AddressInfo).port) : given;
      const { code, output } = await start(command, { ...alsoSet, [variable]: value });
      const lines = output.trim().split('\n');
      // The worker logs JSON lines (pino): its message is the line a person reads.
      const message = lines[0]!.startsWith('{') ? (JSON.parse(lines[0]!) as { msg: string }).msg : lines[0];
      expect([code, lines.length, message]).toEqual([
        1,
        1,
        expect.stringContaining(`${variable}=${JSON.stringify(value)} is not allowed: `),
      ]);
      expect(output).not.toMatch(/^\s+at /m);
      expect(output).not.toContain('"stack"');
    },
    EXIT_WITHIN_MS + 5_000,
  );
});
