import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { serverRecordPath } from '../../activities/store/embedded-server';
import { startProductWorker, type ProductWorker } from '../support/product-worker';

const ROOT = path.resolve(__dirname, '..', '..');

/**
 * With no DATABASE_URL every process shares the embedded PGlite: the worker (first to open it) serves
 * it and records where; the CLI connects there. A record left by a crashed process is taken over.
 */
describe('the embedded default database serves every process', () => {
  let dataDir: string;
  let worker: ProductWorker | undefined;
  let env: Record<string, string>;
  beforeAll(() => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'da-embedded-'));
    env = {
      DATABASE_URL: '',
      DATA_DIR: dataDir,
      AGENTS_WORKSPACE_ROOT: path.join(dataDir, 'workspaces'),
      TEMPORAL_TASK_QUEUE: `embedded-${path.basename(dataDir)}`,
      // No provider: the offline demo model does the work.
      ANTHROPIC_API_KEY: '',
      OPENAI_API_KEY: '',
      OPENAI_COMPATIBLE_BASE_URL: '',
    };
  });
  afterAll(async () => {
    await worker?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const cli = async (...args: string[]): Promise<string> => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'client/cli.ts', ...args], { cwd: ROOT, env: { ...process.env, ...env }, timeout: 120_000 });
    return stdout;
  };

  test('a script starts the worker, starts a task with the CLI, and sees it reach review (after a crash left a stale record)', async () => {
    // A record from a process that crashed (its pid no longer exists).
    const dead = spawnSync(process.execPath, ['-e', 'process.pid']).pid;
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(serverRecordPath(path.join(dataDir, 'pglite')), JSON.stringify({ pid: dead, url: 'postgres://postgres@127.0.0.1:1/postgres', startedAt: '2026-01-01T00:00:00Z' }));

    worker = await startProductWorker(env);
    const started = await worker.waitForLog((l) => l.msg === 'durable-agents worker started', 'the start-up line');
    expect(started.database).toMatch(/^embedded PGlite, served by this process at postgres:\/\/postgres@127\.0\.0\.1:\d+/);
    const record = JSON.parse(readFileSync(serverRecordPath(path.join(dataDir, 'pglite')), 'utf8')) as { pid: number; url: string };
    expect(record.pid).toBe(worker.child.pid);

    expect(await cli('org', 'upsert', 'examples/orgs/demo')).toContain('organisation demo: 1 user profile(s), 1 skill(s)');
    expect(await cli('agent', 'upsert', 'examples/agents/scribe', '--id', 'scribe')).toContain(`workspace ${path.join(dataDir, 'workspaces', 'scribe')}`);
    expect(existsSync(path.join(dataDir, 'workspaces', 'scribe'))).toBe(true);
    const output = await cli('task', 'start', '--agent', 'scribe', '--title', 'Plan a guide', '--description', 'write plan.md', '--follow');
    expect(output).toMatch(/\[review\] round 1/);
    const taskId = /task (\S+) started as workflow/.exec(output)![1]!;
    expect(await cli('task', 'status', taskId)).toMatch(/review/);
    // The CLI was a client: the worker still serves, with the same record.
    expect(JSON.parse(readFileSync(serverRecordPath(path.join(dataDir, 'pglite')), 'utf8'))).toEqual(record);
    expect(worker.child.exitCode).toBeNull();
  }, 240_000);
});
