import { spawn } from 'node:child_process';
import path from 'node:path';

/** A bad value stops the start at once, before any connection is waited for. */
const EXIT_WITHIN_MS = 30_000;

/** [entry point, variable, bad value]: each must stop its process with one line naming both. */
const BAD_VALUES: Array<[string, string, string]> = [
  ...['abc', '70000', '-1'].flatMap((value): Array<[string, string, string]> => [
    ['api/main.ts', 'API_PORT', value],
    ['worker/main.ts', 'METRICS_PORT', value],
    ['worker/main.ts', 'HEALTH_PORT', value],
  ]),
  // Nothing listens on port 1; the worker waits for Temporal by design (containers start in any order).
  ['api/main.ts', 'TEMPORAL_ADDRESS', '127.0.0.1:1'],
];

function start(entry: string, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const child = spawn(path.resolve('node_modules/.bin/tsx'), [entry], {
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
      resolve({ code, output });
    }),
  );
}

describe('a bad configuration value', () => {
  test.concurrent.each(BAD_VALUES)(
    '%s with %s=%s exits non-zero with one line naming the variable and the value',
    async (entry, variable, value) => {
      const { code, output } = await start(entry, { [variable]: value });
      const lines = output.trim().split('\n');
      // The worker logs JSON lines (pino): its message is the line a person reads.
      const message = lines[0]!.startsWith('{') ? (JSON.parse(lines[0]!) as { msg: string }).msg : lines[0];
      expect([code, lines.length, message]).toEqual([
        1,
        1,
        expect.stringContaining(`${variable}=${JSON.stringify(value)} is not allowed: `),
      ]);
      expect(output).not.toMatch(/^\s+at /m);
    },
    EXIT_WITHIN_MS + 5_000,
  );
});
