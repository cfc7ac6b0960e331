/**
 * Dependencies a fault test owns, so it can stop and start them without touching the shared ones: a
 * PostgreSQL server (initdb in a temporary folder, a free port) and a Temporal dev server (a state
 * file, a free port). Both are stopped and removed by `close`.
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freeLoopbackPort } from '../../activities/store/db';
import { startTemporalDevServer } from './temporal-cli';

/** PostgreSQL refuses to run as root: when the tests run as root (CI), its commands run as `postgres`. */
const asPostgres = (command: string, args: string[]): [string, string[]] =>
  process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];

function postgresBinDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = readdirSync(root).sort((a, b) => Number(a) - Number(b));
  if (versions.length === 0)
    throw new Error(`no PostgreSQL under ${root}: install the postgresql package (.ci/run does)`);
  return path.join(root, versions.at(-1)!, 'bin');
}

export interface OwnPostgres {
  url: string;
  /** `pg_ctl stop -m immediate`: the server dies without a checkpoint, like a crash. */
  stopImmediately(): void;
  start(): void;
  close(): void;
}

export function startOwnPostgres(port: number): OwnPostgres {
  const bin = postgresBinDir();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'da-own-pg-'));
  chmodSync(dataDir, 0o777);
  const run = (command: string, args: string[]) => {
    const [cmd, argv] = asPostgres(path.join(bin, command), args);
    execFileSync(cmd, argv, { stdio: 'ignore' });
  };
  const pgData = path.join(dataDir, 'data');
  run('initdb', ['-D', pgData, '-A', 'trust', '-U', 'postgres']);
  const start = () =>
    run('pg_ctl', [
      '-D',
      pgData,
      '-l',
      path.join(dataDir, 'server.log'),
      '-w',
      '-o',
      `-p ${port} -k ${dataDir} -c listen_addresses=127.0.0.1 -c fsync=off`,
      'start',
    ]);
  start();
  let running = true;
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stopImmediately() {
      run('pg_ctl', ['-D', pgData, '-m', 'immediate', 'stop']);
      running = false;
    },
    start() {
      start();
      running = true;
    },
    close() {
      if (running) run('pg_ctl', ['-D', pgData, '-m', 'immediate', 'stop']);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface OwnTemporal {
  address: string;
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

/** A Temporal dev server on a free port whose state survives restarts (a SQLite state file). */
export async function startOwnTemporal(): Promise<OwnTemporal> {
  const port = await freeLoopbackPort();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'da-own-temporal-'));
  const address = `127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  const start = async () => {
    child = (await startTemporalDevServer(port, ['--db-filename', path.join(dir, 'temporal.db')])).process;
  };
  const stop = async () => {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null) return;
    const exited = new Promise((r) => running.once('exit', r));
    running.kill('SIGTERM');
    await exited;
  };
  await start();
  return {
    address,
    start,
    stop,
    async close() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
