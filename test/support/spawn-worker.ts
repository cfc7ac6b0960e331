import { spawn, type ChildProcess } from 'node:child_process';

/**
 * Starts a worker in its own process (test/support/worker-process.ts, node with tsx as a loader, so
 * SIGKILL hits the worker itself) on the given task queue; resolves once it polls.
 */
export async function spawnWorkerProcess(options: { taskQueue: string; fakeLlmUrl: string }): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/worker-process.ts'], {
    env: { ...process.env, TEST_TASK_QUEUE: options.taskQueue, FAKE_LLM_URL: options.fakeLlmUrl },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => chunk.toString().includes('worker-ready') && resolve());
    child.once('exit', (code) => reject(new Error(`worker exited early with ${code}`)));
  });
  return child;
}

/** SIGKILLs a worker process and waits until it is gone. */
export async function killWorkerProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
}
