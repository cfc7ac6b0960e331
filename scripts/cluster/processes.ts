/** The cluster's child processes: each logs to its own file, and is stopped gently, then for sure. */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

/** How long a process may take to drain after SIGTERM before it is killed. */
const STOP_GRACE_MS = 20_000;

export interface ClusterProcess {
  name: string;
  child: ChildProcess;
  logFile: string;
  /** The log's length when this process started: what it wrote is after it (the file is shared by restarts). */
  logOffset: number;
  startedAt: number;
  /** SIGTERM, then SIGKILL after the grace period; resolves once it exited. */
  stop(): Promise<void>;
  /** SIGKILL at once, as a crash would. */
  kill(): Promise<void>;
}

export function startProcess(
  name: string,
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; logDir: string },
): ClusterProcess {
  mkdirSync(options.logDir, { recursive: true });
  const logFile = path.join(options.logDir, `${name}.log`);
  const logOffset = existsSync(logFile) ? statSync(logFile).size : 0;
  const log = createWriteStream(logFile, { flags: 'a' });
  const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.pipe(log, { end: false });
  child.stderr!.pipe(log, { end: false });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const end = async (signal: NodeJS.Signals): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
      await exited;
      clearTimeout(timer);
    }
    log.end();
  };
  return {
    name,
    child,
    logFile,
    logOffset,
    startedAt: Date.now(),
    stop: () => end('SIGTERM'),
    kill: () => end('SIGKILL'),
  };
}

/** Polls `check` until it returns true; fails naming `what` and the log to read. */
export async function waitUntil(
  check: () => Promise<boolean>,
  what: string,
  timeoutMs: number,
  watched: ClusterProcess | ClusterProcess[] = [],
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const processes = Array.isArray(watched) ? watched : [watched];
  for (;;) {
    const exited = processes.find((p) => p.child.exitCode !== null);
    if (exited) {
      throw new Error(
        `${exited.name} exited with code ${exited.child.exitCode} while waiting for ${what}; the end of ${exited.logFile}:\n${logTail(exited.logFile)}`,
      );
    }
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${processes.length ? `; see ${processes.map((p) => p.logFile).join(', ')}` : ''}`,
      );
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** What this process wrote to its log so far (not what an earlier process of the same name wrote). */
export function ownLog(process: ClusterProcess): string {
  return existsSync(process.logFile) ? readFileSync(process.logFile).subarray(process.logOffset).toString('utf8') : '';
}

/** The last lines of a log, for an error message (the log may be gone with its folder by the time someone reads it). */
function logTail(file: string, lines = 15): string {
  try {
    return readFileSync(file, 'utf8')
      .trimEnd()
      .split('\n')
      .slice(-lines)
      .map((line) => line.slice(0, 500))
      .join('\n');
  } catch {
    return '(no log)';
  }
}
