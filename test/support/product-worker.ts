import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { eventually } from './eventually';

export interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

export interface ProductWorker {
  child: ChildProcess;
  /** The worker's JSON log lines so far (pino, one object per line). */
  logs: LogLine[];
  waitForLog(predicate: (line: LogLine) => boolean, what: string, timeoutMs?: number): Promise<LogLine>;
  stop(): Promise<void>;
}

const ROOT = path.resolve(__dirname, '..', '..');

/**
 * The real worker process (`worker/main.ts`, as `npm run worker` runs it) configured only through its
 * environment, with the test's pre-built workflow bundle. Resolves once it logged that it started.
 */
export async function startProductWorker(env: Record<string, string | undefined>): Promise<ProductWorker> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'worker/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, WORKFLOW_BUNDLE_PATH: process.env.TEST_WORKFLOW_BUNDLE, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: LogLine[] = [];
  let buffered = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    for (const line of lines) {
      try {
        logs.push(JSON.parse(line) as LogLine);
      } catch {
        logs.push({ level: 30, msg: line });
      }
    }
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const worker: ProductWorker = {
    child,
    logs,
    async waitForLog(predicate, what, timeoutMs = 60_000) {
      return eventually(
        () => {
          if (child.exitCode !== null)
            throw new Error(`the worker exited with ${child.exitCode}: ${stderr.slice(-2_000)}`);
          return logs.find(predicate);
        },
        what,
        timeoutMs,
      );
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
  await worker.waitForLog((l) => l.msg === 'Worker state changed' && l.state === 'RUNNING', 'the worker to poll');
  return worker;
}
