import { closeSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { createServer } from 'node:net';
import pg from 'pg';

/**
 * The embedded database across processes. PGlite is one WASM PostgreSQL inside one process, so one
 * process serves it on a loopback port and the others (worker, `npm start`, the CLI, a script) connect
 * to it with `pg`. Who serves is settled by a record file beside the data folder
 * (`<DATA_DIR>/pglite.server.json`: `{ pid, url }`), created exclusively: the first process to create
 * it serves; the others read the URL from it. A record whose process is gone (a crash, `kill -9`) is
 * stale: it is removed and the election runs again.
 */
export interface EmbeddedLease {
  url: string;
  role: 'server' | 'client';
  /** Server: stops serving and removes the record (clients then elect a new server). Client: nothing. */
  release(): Promise<void>;
}

interface ServerRecord {
  pid: number;
  url: string | null;
  startedAt: string;
}

/** How long to wait for another process that is starting the embedded server (PGlite boots in seconds). */
export const EMBEDDED_ELECTION_TIMEOUT_MS = 60_000;
/** How often to look at the record while another process starts serving. */
const ELECTION_POLL_MS = 200;
/** A record still empty after this long was left by a process that died while creating it. */
const EMPTY_RECORD_STALE_MS = 10_000;
/** Connections from every process together; each process's pool takes a few. */
const EMBEDDED_MAX_CONNECTIONS = 64;
/** A reachable server answers a local connection in milliseconds. */
const PROBE_TIMEOUT_MS = 2_000;

export const serverRecordPath = (dataDir: string): string => `${dataDir}.server.json`;

/** Serves the embedded database from this process, or returns the URL of the process that does. */
export async function electEmbeddedServer(dataDir: string): Promise<EmbeddedLease> {
  const recordPath = serverRecordPath(dataDir);
  const deadline = Date.now() + EMBEDDED_ELECTION_TIMEOUT_MS;
  for (;;) {
    const fd = createExclusively(recordPath);
    if (fd !== undefined) return serve(dataDir, recordPath, fd);
    const record = readRecord(recordPath);
    if (record === 'missing') continue;
    if (record === 'unreadable') {
      if (ageMs(recordPath) > EMPTY_RECORD_STALE_MS) removeIfUnchanged(recordPath, undefined);
    } else if (!processAlive(record.pid)) {
      removeIfUnchanged(recordPath, record);
      continue;
    } else if (record.url && (await reachable(record.url))) {
      return { url: record.url, role: 'client', release: async () => undefined };
    }
    if (Date.now() > deadline) {
      throw new Error(
        `the embedded database in ${dataDir} is held by process ${record === 'unreadable' ? '(unknown)' : record.pid}, which does not answer. ` +
          `If no durable-agents process is running, delete ${recordPath}; or set DATABASE_URL to use a PostgreSQL server.`,
      );
    }
    await new Promise((r) => setTimeout(r, ELECTION_POLL_MS));
  }
}

async function serve(dataDir: string, recordPath: string, fd: number): Promise<EmbeddedLease> {
  const startedAt = new Date().toISOString();
  try {
    writeSync(fd, JSON.stringify({ pid: process.pid, url: null, startedAt } satisfies ServerRecord));
  } finally {
    closeSync(fd);
  }
  try {
    const { PGlite } = await import('@electric-sql/pglite');
    const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket');
    const pglite = await PGlite.create(dataDir);
    const port = await freeLoopbackPort();
    const server = new PGLiteSocketServer({ db: pglite, host: '127.0.0.1', port, maxConnections: EMBEDDED_MAX_CONNECTIONS });
    await server.start();
    const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
    const record: ServerRecord = { pid: process.pid, url, startedAt };
    // Written whole, then renamed: a reader never sees half a record.
    writeFileSync(`${recordPath}.${process.pid}.tmp`, JSON.stringify(record));
    renameSync(`${recordPath}.${process.pid}.tmp`, recordPath);
    return {
      url,
      role: 'server',
      release: async () => {
        removeIfUnchanged(recordPath, record);
        await server.stop();
        await pglite.close();
      },
    };
  } catch (error) {
    removeIfUnchanged(recordPath, undefined);
    throw error;
  }
}

function createExclusively(file: string): number | undefined {
  try {
    return openSync(file, 'wx');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return undefined;
    throw error;
  }
}

function readRecord(file: string): ServerRecord | 'missing' | 'unreadable' {
  try {
    const record = JSON.parse(readFileSync(file, 'utf8')) as ServerRecord;
    return typeof record.pid === 'number' ? record : 'unreadable';
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing' : 'unreadable';
  }
}

function ageMs(file: string): number {
  try {
    return Date.now() - statSync(file).mtimeMs;
  } catch {
    return 0;
  }
}

/** Removes the record only if it still is the one we judged (another process may have replaced it). */
function removeIfUnchanged(file: string, expected: ServerRecord | undefined): void {
  const current = readRecord(file);
  if (current === 'missing') return;
  const same = expected === undefined ? current === 'unreadable' || current.pid === process.pid : current !== 'unreadable' && current.pid === expected.pid && current.startedAt === expected.startedAt;
  if (!same) return;
  try {
    unlinkSync(file);
  } catch {
    // Already gone.
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function reachable(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: PROBE_TIMEOUT_MS });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** A port on 127.0.0.1 that was free a moment ago (the OS picks it). */
export async function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}
