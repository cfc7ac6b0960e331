import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { embeddedPaths, stopEmbeddedServer } from '../../activities/store/embedded-server';
import { freeLoopbackPort } from '../../activities/store/db';
import { runConcurrentLoad } from '../support/concurrent-load';
import { eventually } from '../support/eventually';
import { startProductWorker, type ProductWorker } from '../support/product-worker';

const ROOT = path.resolve(__dirname, '..', '..');
const URL_PATTERN = /postgres:\/\/postgres@127\.0\.0\.1:\d+\/postgres/;

/**
 * With no DATABASE_URL every process shares the embedded PostgreSQL under DATA_DIR: the first that
 * needs it starts it, detached, and all of them (worker, CLI, API, tokens) connect to one address that
 * outlives each of them. It is a real server, so concurrent connections behave as on any PostgreSQL.
 */
describe('the embedded default database serves every process', () => {
  let dataDir: string;
  let embeddedDir: string;
  let worker: ProductWorker | undefined;
  let api: ChildProcess | undefined;
  let env: Record<string, string>;
  let taskId = '';
  beforeAll(() => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'da-embedded-'));
    // As root, PostgreSQL runs as another user, who must be able to enter the folder (mkdtemp makes it 0700).
    chmodSync(dataDir, 0o755);
    embeddedDir = path.join(dataDir, 'postgres');
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
    api?.kill('SIGKILL');
    await worker?.stop();
    await stopEmbeddedServer(embeddedDir);
    rmSync(dataDir, { recursive: true, force: true });
  });

  const cli = async (...args: string[]): Promise<string> => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'client/cli.ts', ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      timeout: 120_000,
    });
    return stdout;
  };
  const runningUrl = async (): Promise<string> => URL_PATTERN.exec(await cli('db', 'status'))?.[0] ?? 'not running';

  test('a script starts the worker, starts a task with the CLI, and sees it reach review', async () => {
    worker = await startProductWorker(env);
    const started = await worker.waitForLog((l) => l.msg === 'durable-agents worker started', 'the start-up line');
    expect(started.database).toMatch(
      new RegExp(`^embedded PostgreSQL at ${URL_PATTERN.source} \\(started by this process`),
    );
    expect(existsSync(path.join(embeddedPaths(embeddedDir).cluster, 'PG_VERSION'))).toBe(true);

    expect(await cli('org', 'upsert', 'examples/orgs/demo')).toContain(
      'organisation demo: 1 user profile(s), 1 skill(s)',
    );
    expect(await cli('agent', 'upsert', 'examples/agents/scribe', '--id', 'scribe')).toContain(
      `workspace ${path.join(dataDir, 'workspaces', 'default', 'scribe')}`,
    );
    const output = await cli(
      'task',
      'start',
      '--agent',
      'scribe',
      '--title',
      'Plan a guide',
      '--description',
      'write plan.md',
      '--follow',
    );
    expect(output).toMatch(/\[review\] round 1/);
    taskId = /task (\S+) started as workflow/.exec(output)![1]!;
    expect(await cli('task', 'status', taskId)).toMatch(/review/);
    expect(await runningUrl()).toBe(URL_PATTERN.exec(String(started.database))![0]);
  }, 240_000);

  test('concurrent connections and processes lose nothing: every answer is its own, every row and notification arrives', async () => {
    const url = await runningUrl();
    const load = await runConcurrentLoad(url);
    expect(load.errors).toEqual([]);
    expect(load.wrong).toBe(0);
    expect(load.rowsFound).toBe(load.rowsWritten);
    expect(load.notifyHeard).toBe(load.notifySent);
    // Six CLI processes writing at once (the group posts that failed under the former engine).
    const names = Array.from({ length: 6 }, (_, i) => `concurrent-${i}`);
    const created = await Promise.all(names.map((name) => cli('token', 'create', name)));
    for (const [i, out] of created.entries()) expect(out).toContain(`(${names[i]}, read, organisation default)`);
    const listed = await cli('token', 'list');
    for (const name of names) expect(listed).toContain(` ${name}  (created`);
  }, 240_000);

  test('the address survives a worker kill and restart, and the API and tokens use it without DATABASE_URL', async () => {
    const url = await runningUrl();
    worker!.child.kill('SIGKILL');
    await new Promise((r) => worker!.child.once('exit', r));
    // The server is not part of the worker: it still answers at the same address.
    expect(await runningUrl()).toBe(url);
    worker = await startProductWorker(env);
    const started = await worker.waitForLog((l) => l.msg === 'durable-agents worker started', 'the start-up line');
    expect(started.database).toBe(`embedded PostgreSQL at ${url}`);

    const token = /store it now:\n(\S+)/.exec(await cli('token', 'create', 'api-user', '--scope', 'operator'))![1]!;
    const port = await freeLoopbackPort();
    api = spawn(process.execPath, ['--import', 'tsx', 'api/main.ts'], {
      cwd: ROOT,
      env: { ...process.env, ...env, API_PORT: String(port) },
      stdio: 'ignore',
    });
    const agents = await eventually(
      async () => {
        const response = await fetch(`http://127.0.0.1:${port}/v1/agents`, {
          headers: { authorization: `Bearer ${token}` },
        }).catch(() => undefined);
        return response?.status === 200 ? ((await response.json()) as { agents: { id: string }[] }) : undefined;
      },
      'the API to answer with the CLI token',
      60_000,
    );
    expect(agents.agents.map((a) => a.id)).toContain('scribe');
  }, 240_000);

  test('a stopped or crashed server is started again at the same address by the next process', async () => {
    const url = await runningUrl();
    const postmasterPid = Number(
      readFileSync(path.join(embeddedPaths(embeddedDir).cluster, 'postmaster.pid'), 'utf8').split('\n')[0],
    );
    process.kill(postmasterPid, 'SIGKILL');
    // Gone once signal 0 finds no such process (the running worker's health probe may start a new server
    // at once, so "not running" may never be seen).
    await eventually(async () => {
      try {
        process.kill(postmasterPid, 0);
        return undefined;
      } catch {
        return true;
      }
    }, 'the killed server to be gone');
    // The next process that needs it (the CLI, or the worker's probe) starts it again; PostgreSQL recovers
    // from its WAL.
    expect(await cli('token', 'list')).toContain(' api-user  (created');
    expect(await runningUrl()).toBe(url);
    const restartedPid = Number(
      readFileSync(path.join(embeddedPaths(embeddedDir).cluster, 'postmaster.pid'), 'utf8').split('\n')[0],
    );
    expect(restartedPid).not.toBe(postmasterPid);
    // What was committed before the crash is there.
    expect(await cli('task', 'status', taskId)).toMatch(/review/);

    // A running worker's next query (its health probe) starts a stopped server again, at the same address.
    expect(await cli('db', 'stop')).toContain('stopped');
    await eventually(
      async () => ((await runningUrl()) === url ? true : undefined),
      'the worker to start the server again',
      60_000,
    );

    await worker!.stop();
    expect(await cli('db', 'stop')).toContain('stopped');
    expect(await runningUrl()).toBe('not running');
    expect(await cli('db', 'start')).toContain(`started at ${url}`);
  }, 240_000);
});

/** `npm start` is stopped by a process manager with SIGTERM as often as by a person with Ctrl-C. */
describe('npm start on the embedded default', () => {
  /** Every start still running; a test's `finally` kills them before it stops the servers they use. */
  const running = new Set<ChildProcess>();
  const start = (env: Record<string, string | undefined>): ChildProcess => {
    // start.sh execs the demo, so this process is the demo itself: SIGKILL leaves nothing behind.
    const child = spawn('bash', ['scripts/start.sh'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    running.add(child);
    child.once('exit', () => running.delete(child));
    return child;
  };
  const killStarts = async () => {
    await Promise.all(
      [...running].map((child) => {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGKILL');
        return exited;
      }),
    );
  };

  /** Runs scripts/start.sh until its task is in review; returns what it printed so far and how to stop it. */
  const startUntilReview = async (env: Record<string, string | undefined>) => {
    const child = start(env);
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await eventually(
      () => {
        if (child.exitCode !== null)
          throw new Error(`npm start exited with ${child.exitCode}:\n${output.slice(-2_000)}`);
        return output.includes('The task is in review') ? true : undefined;
      },
      'npm start to bring its task to review',
      180_000,
    );
    return {
      pid: child.pid!,
      output: () => output,
      stop: async (signal: 'SIGINT' | 'SIGTERM') => {
        child.kill(signal);
        return { code: await exited, output };
      },
    };
  };

  const stopsOn = (signal: 'SIGTERM' | 'SIGINT') =>
    test(`${signal} drains the worker, closes the API and stops the embedded database it started`, async () => {
      const dataDir = mkdtempSync(path.join(os.tmpdir(), 'da-start-'));
      chmodSync(dataDir, 0o755);
      const embeddedDir = path.join(dataDir, 'postgres');
      const apiPort = await freeLoopbackPort();
      try {
        // scripts/start.sh as `npm start` runs it (Temporal is given, so it starts no dev server of its own).
        const started = await startUntilReview({
          ...process.env,
          DATABASE_URL: '',
          DATA_DIR: dataDir,
          AGENTS_WORKSPACE_ROOT: path.join(dataDir, 'workspaces'),
          TEMPORAL_TASK_QUEUE: `start-${path.basename(dataDir)}`,
          API_PORT: String(apiPort),
          ANTHROPIC_API_KEY: '',
          OPENAI_API_KEY: '',
          OPENAI_COMPATIBLE_BASE_URL: '',
          CI: '',
          DEMO_EXIT: '',
        });
        expect((await fetch(`http://127.0.0.1:${apiPort}/healthz`)).status).toBe(200);
        // The signal reaches the demo itself, not a wrapper that could kill it before it has drained.
        expect(started.output()).toContain(`Ctrl-C (or kill ${started.pid}) stops the worker`);
        const signalledAt = Date.now();
        const { code, output } = await started.stop(signal);
        expect({ code, output: output.slice(-500) }).toEqual({
          code: 0,
          output: expect.stringContaining(`${signal}: draining the worker`),
        });
        expect(Date.now() - signalledAt).toBeLessThan(15_000);
        await expect(fetch(`http://127.0.0.1:${apiPort}/healthz`)).rejects.toThrow();
        // Nobody else was connected, so the server it started is stopped (after a checkpoint).
        expect(existsSync(path.join(embeddedPaths(embeddedDir).cluster, 'postmaster.pid'))).toBe(false);
      } finally {
        await killStarts();
        await stopEmbeddedServer(embeddedDir);
        rmSync(dataDir, { recursive: true, force: true });
      }
    }, 240_000);
  stopsOn('SIGTERM');
  stopsOn('SIGINT');

  test('a second start keeps the token and shows the open demo task; a later one starts anew; each stop says what it left running', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'da-restart-'));
    chmodSync(dataDir, 0o755);
    const embeddedDir = path.join(dataDir, 'postgres');
    const tokenFile = path.join(dataDir, 'demo-operator.token');
    const [temporalPort, uiPort, apiPort] = [
      await freeLoopbackPort(),
      await freeLoopbackPort(),
      await freeLoopbackPort(),
    ];
    // No TEMPORAL_ADDRESS: start.sh starts its own dev server, on free ports.
    const { TEMPORAL_ADDRESS: _given, ...inherited } = process.env;
    const env = {
      ...inherited,
      DATABASE_URL: '',
      DATA_DIR: dataDir,
      AGENTS_WORKSPACE_ROOT: path.join(dataDir, 'workspaces'),
      TEMPORAL_DEV_PORT: String(temporalPort),
      TEMPORAL_DEV_UI_PORT: String(uiPort),
      API_PORT: String(apiPort),
      ANTHROPIC_API_KEY: '',
      OPENAI_API_KEY: '',
      OPENAI_COMPATIBLE_BASE_URL: '',
      CI: '',
      DEMO_EXIT: '',
    };
    const api = (method: string, route: string, token: string, body?: unknown) =>
      fetch(`http://127.0.0.1:${apiPort}${route}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
    let temporalPid = 0;
    let onlooker: pg.Client | undefined;
    try {
      // First start: a new token, kept for the next; a new task. The stop leaves Temporal, stops PostgreSQL.
      const first = await startUntilReview(env);
      const token = /Operator token: (\S+)/.exec(first.output())![1]!;
      expect(first.output()).toContain(`(kept in ${tokenFile} for the next start`);
      const taskId = /Task (\S+) is running as workflow/.exec(first.output())![1]!;
      const stopped = await first.stop('SIGINT');
      expect({ code: stopped.code, output: stopped.output.slice(-2_000) }).toMatchObject({ code: 0 });
      const left =
        /Left running: the Temporal dev server \(process (\d+)\) at 127\.0\.0\.1:(\d+).*Stop it with: kill (\d+)/.exec(
          stopped.output,
        );
      expect(left).not.toBeNull();
      temporalPid = Number(left![1]);
      expect([Number(left![2]), Number(left![3])]).toEqual([temporalPort, temporalPid]);
      expect(() => process.kill(temporalPid, 0)).not.toThrow();
      expect(stopped.output).toContain(`Stopped the embedded PostgreSQL (its data stays in ${embeddedDir})`);
      expect(statSync(tokenFile).mode & 0o777).toBe(0o600);

      // Second start: the same server, token and task, nothing started again.
      const second = await startUntilReview(env);
      const output = second.output();
      expect(output).toContain(`reusing it`);
      expect(/Operator token: (\S+)/.exec(output)![1]).toBe(token);
      expect(output).toContain('the one an earlier start made');
      expect(output).toContain(
        `Task ${taskId}, started by an earlier \`npm start\`, is still open (review): shown here, not started again.`,
      );
      expect(output).toContain(`npm run agents -- task accept ${taskId}`);
      expect(output).not.toContain('is running as workflow');
      // The kept token still works against the API: accept the task with it.
      expect((await api('GET', '/v1/agents', token)).status).toBe(200);
      expect((await api('POST', `/v1/tasks/${taskId}/review`, token, { decision: 'accept' })).status).toBe(202);
      // Someone else connected to the embedded PostgreSQL: the stop leaves it running, and says how to stop it.
      const databaseUrl = URL_PATTERN.exec(output)![0];
      onlooker = new pg.Client({ connectionString: databaseUrl });
      await onlooker.connect();
      await eventually(async () => {
        const { rows } = await onlooker!.query<{ state: string }>('select state from tasks where id = $1', [taskId]);
        return rows[0]?.state === 'completed' ? true : undefined;
      }, 'the accepted task to complete');
      const again = await second.stop('SIGTERM');
      expect({ code: again.code, output: again.output.slice(-2_000) }).toMatchObject({ code: 0 });
      expect(again.output).toContain(`Left running: the Temporal dev server (process ${temporalPid})`);
      expect(again.output).toContain(
        `Left running: the embedded PostgreSQL at ${databaseUrl}, for the 1 other connection(s) using it. Stop it with: npm run agents -- db stop`,
      );
      await onlooker.end();
      onlooker = undefined;

      // Third start, after the token was revoked and with a Temporal server it did not start (no pid
      // recorded): a new token, a new task beside the finished one, and it says so.
      await promisify(execFile)(
        process.execPath,
        ['--import', 'tsx', 'client/cli.ts', 'token', 'revoke', 'demo-operator'],
        {
          cwd: ROOT,
          env,
          timeout: 120_000,
        },
      );
      rmSync(path.join(dataDir, 'temporal.db.pid'));
      const third = start({ ...env, DEMO_EXIT: '1' });
      let thirdOutput = '';
      third.stdout!.on('data', (chunk: Buffer) => (thirdOutput += chunk.toString()));
      third.stderr!.on('data', (chunk: Buffer) => (thirdOutput += chunk.toString()));
      const tooLong = setTimeout(() => third.kill('SIGKILL'), 240_000);
      const thirdCode = await new Promise<number | null>((resolve) => third.once('exit', resolve));
      clearTimeout(tooLong);
      // With DEMO_EXIT it accepts its task and exits by itself (the output is shown when it does not).
      expect({ code: thirdCode, output: thirdOutput.slice(-2_000) }).toMatchObject({ code: 0 });
      const newToken = /Operator token: (\S+)/.exec(thirdOutput)![1]!;
      expect(newToken).not.toBe(token);
      expect(thirdOutput).toContain('no longer works (revoked, or made for another database)');
      expect(readFileSync(tokenFile, 'utf8').trim()).toBe(newToken);
      expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
      expect(thirdOutput).toContain(
        `Task ${taskId}, started by an earlier \`npm start\`, is finished (completed); its history:`,
      );
      expect(thirdOutput).toContain('Starting a new demo task.');
      const newTaskId = /Task (\S+) is running as workflow/.exec(thirdOutput)?.[1];
      expect(newTaskId).toBeDefined();
      expect(newTaskId).not.toBe(taskId);
      expect(thirdOutput).toContain(
        `Left running: the Temporal server at 127.0.0.1:${temporalPort}, Web UI http://localhost:${uiPort}. It was already running when this start began`,
      );
    } finally {
      await killStarts();
      await onlooker?.end();
      if (temporalPid) process.kill(temporalPid, 'SIGTERM');
      await stopEmbeddedServer(embeddedDir);
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 600_000);
});
