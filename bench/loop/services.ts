/** The services the loop bench runs: its own Temporal dev server (or TEMPORAL_ADDRESS) and the worker process. */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { freeLoopbackPort } from '../../activities/store/db';
import {
  DEV_SERVER_DYNAMIC_CONFIG_ARGS,
  SEARCH_ATTRIBUTE_ARGS,
  startTemporalDevServer,
} from '../../test/support/temporal-cli';

/**
 * The dev server's settings for the bench (documented in docs/benchmarks.md): in memory, headless, errors-only
 * logging, the product's search attributes, and the dynamic config every server we start runs with
 * (task-read rates raised past the one-shard rate limit, eager activity dispatch on).
 */
export const DEV_SERVER_ARGS = [
  '--headless',
  '--log-level',
  'error',
  ...SEARCH_ATTRIBUTE_ARGS,
  ...DEV_SERVER_DYNAMIC_CONFIG_ARGS,
];

export async function startDevServer(): Promise<{ address: string; process: ChildProcess }> {
  return startTemporalDevServer(await freeLoopbackPort(), [], 'inherit-stderr');
}

/** Starts bench/loop/worker-main.ts in its own process; resolves once it polls. */
export async function startWorkerProcess(env: Record<string, string>): Promise<ChildProcess> {
  // Node itself with tsx as a loader (not the tsx launcher): the measured pid is the worker's.
  // BENCH_WORKER_CPU_PROF=<dir>: write V8 CPU profiles of the worker there (for finding where its CPU goes),
  // one per thread (the main thread, and each workflow thread), sampled every 100 µs (V8's default is 1 ms).
  const profile = env.BENCH_WORKER_CPU_PROF
    ? ['--cpu-prof', '--cpu-prof-interval', '100', `--cpu-prof-dir=${env.BENCH_WORKER_CPU_PROF}`]
    : [];
  // BENCH_NO_VM_TIMEOUT=1: the vm-timeout experiment (see no-vm-timeout.cjs).
  const noVmTimeout = env.BENCH_NO_VM_TIMEOUT ? ['--require', path.join(__dirname, 'no-vm-timeout.cjs')] : [];
  const child = spawn(
    process.execPath,
    [...profile, ...noVmTimeout, '--import', 'tsx', path.join(__dirname, 'worker-main.ts')],
    { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] },
  );
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
