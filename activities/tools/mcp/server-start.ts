/**
 * Where a stdio MCP server starts, and with which search paths. The operator chose the server's
 * program; the agent must not be able to choose its code. An interpreter looks for code in its working
 * directory: `python3 -m x` imports `x.py` from there before anything installed, `npx`, `uvx`, `bunx`
 * and `pnpm dlx` resolve packages from its `node_modules` or `pyproject.toml`. Started in the agent's
 * workspace, a server would run whatever module the agent wrote there with `file_write`, with the
 * server's secrets, at its next start.
 *
 * So every stdio server starts in one empty folder per worker process that the agent cannot write
 * (mode 0555, and bound read-only into the server's sandbox; the agent's own commands never see it);
 * Python gets `PYTHONSAFEPATH=1` (it puts no working or script directory on `sys.path`); and entries
 * inside the workspace are dropped from the variables interpreters load code from. A server that works
 * on the workspace (a filesystem server) is given it as an argument: `${WORKSPACE}` (config.ts).
 */
import { chmodSync, existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** Read and enter, never write: nobody but root can add a module to the start folder. */
const START_DIR_MODE = 0o555;

/** What a server's `PATH` is unless its configuration sets one: system directories only. */
export const SERVER_DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin';
/** The server's `HOME`, on its sandbox's private `/tmp`, so no user-site packages or rc files are found. */
const SERVER_HOME = '/tmp/home';

/** Variables holding lists of places code is loaded from (`:`-separated; `LD_PRELOAD` also by spaces). */
const CODE_SEARCH_PATH_VARIABLES = [
  'PATH',
  'PYTHONPATH',
  'NODE_PATH',
  'PERL5LIB',
  'PERLLIB',
  'RUBYLIB',
  'GEM_PATH',
  'CLASSPATH',
  'LD_LIBRARY_PATH',
  'LD_PRELOAD',
];
/** Variables naming one file or folder of code, or options that may name one: dropped whole when they name the workspace. */
const CODE_FILE_VARIABLES = ['NODE_OPTIONS', 'PYTHONSTARTUP', 'PYTHONHOME', 'PYTHONUSERBASE', 'BASH_ENV', 'ENV'];

let startDir: string | undefined;

/** The empty folder every stdio server of this process starts in; created on first use, removed at exit. */
export function serverStartDir(): string {
  if (startDir !== undefined && existsSync(startDir)) return startDir;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'durable-agents-mcp-start-'));
  chmodSync(dir, START_DIR_MODE);
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  startDir = dir;
  return dir;
}

/**
 * A server's whole environment: `PATH` and `HOME`, then its configured `env`, with every entry inside
 * `workspace` (or relative, so resolved against a folder the operator did not name) dropped from the
 * code search paths, and `PYTHONSAFEPATH=1`, which the configuration cannot turn off.
 */
export function serverEnvironment(
  configured: Record<string, string> | undefined,
  workspace: string,
): Record<string, string> {
  const env: Record<string, string> = { PATH: SERVER_DEFAULT_PATH, HOME: SERVER_HOME, ...configured };
  const workspaces = [...new Set([path.resolve(workspace), realOrSelf(workspace)])];
  // Judged by the path as written and by where its links lead.
  const agentWritable = (entry: string) =>
    !path.isAbsolute(entry) ||
    workspaces.some((dir) => isWithin(dir, path.resolve(entry)) || isWithin(dir, realOrSelf(entry)));
  for (const name of CODE_SEARCH_PATH_VARIABLES) {
    const value = env[name];
    if (value === undefined) continue;
    const entries = value.split(name === 'LD_PRELOAD' ? /[:\s]+/ : ':');
    const kept = entries.filter((entry) => entry !== '' && !agentWritable(entry));
    if (kept.length > 0) env[name] = kept.join(':');
    else delete env[name];
  }
  for (const name of CODE_FILE_VARIABLES) {
    const value = env[name];
    if (value !== undefined && workspaces.some((dir) => value.includes(dir))) delete env[name];
  }
  env.PATH ??= SERVER_DEFAULT_PATH;
  env.PYTHONSAFEPATH = '1';
  return env;
}

/** The folder's real path (where the sandbox binds it), or the path itself when it does not exist (yet). */
export function realOrSelf(dir: string): string {
  try {
    return realpathSync(dir);
  } catch {
    return path.resolve(dir);
  }
}

export function isWithin(dir: string, target: string): boolean {
  const relative = path.relative(dir, target);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}
