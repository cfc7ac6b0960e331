import { closeSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';

/**
 * What the processes sharing the embedded PostgreSQL coordinate through on this machine: the start
 * lock, PostgreSQL's pid file and processes, and loopback ports.
 */

/** A start lock older than this was left by a process that died while holding it. */
const STALE_LOCK_MS = 150_000;
/** How often a waiting process looks again (at the lock, or at a server that is starting or stopping). */
export const LOCK_POLL_MS = 100;

/** An exclusive lock file across processes; one whose holder died is taken over. */
export async function acquireLock(file: string, timeoutMs: number): Promise<() => void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const fd = openSync(file, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => {
        try {
          unlinkSync(file);
        } catch {
          // Already gone.
        }
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = Number(readText(file));
    if ((holder > 0 && !processAlive(holder)) || ageMs(file) > STALE_LOCK_MS) {
      try {
        unlinkSync(file);
      } catch {
        // Another waiter removed it first.
      }
      continue;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for process ${holder} to start the embedded PostgreSQL (lock ${file})`);
    await new Promise((r) => setTimeout(r, LOCK_POLL_MS));
  }
}

export function readText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

function ageMs(file: string): number {
  try {
    return Date.now() - statSync(file).mtimeMs;
  } catch {
    return 0;
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

/**
 * The postmaster's process id and port from the cluster's pid file (its first and fourth lines), or
 * undefined when there is none.
 */
export function readPidFile(cluster: string): { pid: number; port: number } | undefined {
  const lines = readText(path.join(cluster, 'postmaster.pid')).split('\n');
  const [pid, port] = [Number(lines[0]), Number(lines[3])];
  return Number.isInteger(pid) && pid > 0 ? { pid, port } : undefined;
}

/**
 * A PostgreSQL process with this id exists and has not exited. On Linux its state and command are read
 * as well: a postmaster that exited but was not yet reaped (a zombie, where nothing reaps orphans, as in
 * some containers) still answers signal 0, and after a reboot a stale pid file may name another program.
 */
export function serverProcessRunning(pid: number): boolean {
  if (!processAlive(pid)) return false;
  const stat = readText(`/proc/${pid}/stat`);
  if (!stat) return true;
  // "pid (command) state ...": the command may itself contain parentheses.
  const command = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return command === 'postgres' && state !== 'Z';
}

export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}

/** A port on 127.0.0.1 that was free a moment ago (the OS picks it). */
export async function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}
