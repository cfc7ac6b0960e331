/**
 * Runs one invocation as a child process: no shell, its own process group, stdin closed, a minimal
 * environment, bounded time and output.
 *
 * Cancellation (the activity's `AbortSignal`) and timeouts kill the whole process group: SIGTERM,
 * then SIGKILL after `KILL_GRACE_MS`, so the call settles within about two seconds even when the
 * command ignores SIGTERM. When the command exits normally, whatever it left running in its group is
 * killed too: nothing outlives its invocation. A denied invocation (see `classify.ts`) is refused here
 * as well, whatever the caller decided.
 *
 * Git runs hardened (see `git-hardening.ts`): repository config cannot make it run programs.
 *
 * Every program runs inside the kernel sandbox (`sandbox.ts`): the workspace is the only writable
 * path, the environment is an allowlist, `/proc` is the sandbox's own, and there is no network except
 * for git's network commands, which see only the remotes the caller passes (the workspace's recorded
 * ones). Git's discovery stops at the workspace (`GIT_CEILING_DIRECTORIES`), so a workspace folder
 * inside another checkout never works on that checkout.
 */
import { spawn } from 'node:child_process';
import { constants as fsConstants, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { classifyInvocation } from './classify';
import { splitGitArgv } from './git-argv';
import { hardenGitArgv, GIT_HARDENING_ENV } from './git-hardening';
import {
  DEFAULT_MAX_OUTPUT_CHARS,
  DEFAULT_SHELL_TIMEOUT_MS,
  KILL_GRACE_MS,
  MAX_SHELL_TIMEOUT_MS,
  PIPE_DRAIN_MS,
} from './limits';
import { HeadTailBuffer } from './output-buffer';
import {
  limitVerdict,
  prepareCommand,
  SANDBOX_HOME,
  sandboxMode,
  watchProcesses,
  type PreparedCommand,
  type RemoteAccess,
  type SandboxLimits,
} from './sandbox';

/**
 * The PATH commands are looked up on: system directories only, so a command name never resolves to
 * a file the agent wrote into its workspace.
 */
export const RUNNER_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Exit code reported when the program does not exist (the shell's convention). */
export const COMMAND_NOT_FOUND_EXIT_CODE = 127;

export interface RunOptions {
  cwd: string;
  /** Aborting kills the process group; the result then has `cancelled: true`. */
  signal?: AbortSignal;
  /** Default 60 s, capped at 300 s. */
  timeoutMs?: number;
  /** Per stream (stdout, stderr); default 2 MB. Head and tail are kept around a marker. */
  maxOutputChars?: number;
  /**
   * Extra environment from the caller (trusted configuration, never the model). Added to the minimal
   * environment; git's hardening variables are applied after it and win.
   */
  env?: Record<string, string>;
  /** The workspace: the only writable path in the sandbox. Default: `cwd`. */
  workspaceDir?: string;
  /**
   * Remotes git's network commands (fetch, pull, push, ls-remote, remote) may reach: the workspace's
   * recorded remotes, from trusted code. Other commands never get any.
   */
  remotes?: readonly RemoteAccess[];
  /** Resource limits; default `DEFAULT_SANDBOX_LIMITS`. */
  limits?: Partial<SandboxLimits>;
}

export interface RunResult {
  /** Null when the process was ended by a signal. 127 when the program was not found. */
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  /** True when either stream was longer than `maxOutputChars`. */
  truncated: boolean;
  durationMs: number;
  timedOut: boolean;
  cancelled: boolean;
  /** Set when a sandbox limit stopped the program: what it was, for the model ("killed: CPU time limit of 300 s"). */
  limit?: string;
  /** Set when the step was not started because a check right before it refused it. */
  refused?: string;
  /** Secrets cut out while truncating (redaction runs before the cut); the rest are redacted downstream. */
  redactions?: number;
}

/** Git subcommands that contact a remote, and so may see the recorded remotes. */
const GIT_NETWORK_SUBCOMMANDS = new Set(['fetch', 'pull', 'push', 'ls-remote', 'remote']);

export class ShellCommandDeniedError extends Error {
  override readonly name = 'ShellCommandDeniedError';
}

export async function runInvocation(argv: string[], opts: RunOptions): Promise<RunResult> {
  const verdict = classifyInvocation(argv);
  if (verdict.tier === 'deny') throw new ShellCommandDeniedError(verdict.reason);
  return runProgram(argv, opts);
}

/**
 * Runs an invocation in the sandbox without asking the classifier. Production code reaches it only
 * through `runInvocation`; tests call it directly to show that the kernel alone holds.
 */
export async function runProgram(argv: string[], opts: RunOptions): Promise<RunResult> {
  const started = performance.now();
  if (opts.signal?.aborted) return emptyResult(started, { cancelled: true });
  const workspace = await fs.realpath(opts.workspaceDir ?? opts.cwd);
  const sandboxed = sandboxMode() === 'bwrap';
  const home = sandboxed ? undefined : await fs.mkdtemp(path.join(os.tmpdir(), 'shell-home-'));
  try {
    const env = minimalEnvironment(home ?? SANDBOX_HOME, opts.env);
    const program = await resolveExecutable(argv[0] as string, opts.cwd, env.PATH ?? RUNNER_PATH);
    if (program === undefined) {
      return {
        ...emptyResult(started, {}),
        exitCode: COMMAND_NOT_FOUND_EXIT_CODE,
        stderr: `command not found: ${argv[0]}\n`,
      };
    }
    let finalArgv = argv;
    let remotes: readonly RemoteAccess[] = [];
    // Judged by the program actually run, so `/usr/bin/git` is hardened like `git`.
    if (path.basename(program) === 'git') {
      Object.assign(env, gitEnvironment(workspace));
      const subcommand = splitGitArgv(argv).subcommand;
      if (subcommand !== undefined && GIT_NETWORK_SUBCOMMANDS.has(subcommand)) {
        remotes = (opts.remotes ?? []).map((remote) =>
          remote.kind === 'path' ? { ...remote, writable: remote.writable && subcommand === 'push' } : remote,
        );
      }
      finalArgv = await hardenGitArgv(argv, { git: program, cwd: opts.cwd, workspace, env, signal: opts.signal });
      if (opts.signal?.aborted) return emptyResult(started, { cancelled: true });
    }
    return await spawnAndCollect(
      program,
      finalArgv,
      { workspace, cwd: opts.cwd, env, remotes, limits: opts.limits },
      opts,
      started,
    );
  } finally {
    if (home) await fs.rm(home, { recursive: true, force: true });
  }
}

/** Git's hardening variables, and discovery stopped at the workspace's parent: git never opens a repository above it. */
export function gitEnvironment(workspace: string): Record<string, string> {
  return { ...GIT_HARDENING_ENV, GIT_CEILING_DIRECTORIES: path.dirname(workspace) };
}

function minimalEnvironment(home: string, extra: Record<string, string> | undefined): Record<string, string> {
  return { PATH: RUNNER_PATH, HOME: home, LANG: 'C.UTF-8', TERM: 'dumb', ...extra };
}

/** A program name looked up on the runner's PATH (system directories only). */
export function resolveOnRunnerPath(name: string): Promise<string | undefined> {
  return resolveExecutable(name, '/', RUNNER_PATH);
}

async function resolveExecutable(name: string, cwd: string, searchPath: string): Promise<string | undefined> {
  const candidates = name.includes('/')
    ? [path.resolve(cwd, name)]
    : searchPath
        .split(':')
        .filter((dir) => path.isAbsolute(dir))
        .map((dir) => path.join(dir, name));
  for (const candidate of candidates) {
    const stat = await fs.stat(candidate).catch(() => undefined);
    if (!stat?.isFile()) continue;
    if (
      await fs.access(candidate, fsConstants.X_OK).then(
        () => true,
        () => false,
      )
    )
      return candidate;
  }
  return undefined;
}

interface SandboxedRun {
  workspace: string;
  cwd: string;
  env: Record<string, string>;
  remotes: readonly RemoteAccess[];
  limits?: Partial<SandboxLimits>;
}

async function spawnAndCollect(
  program: string,
  argv: readonly string[],
  run: SandboxedRun,
  opts: RunOptions,
  started: number,
): Promise<RunResult> {
  const prepared = await prepareCommand(program, argv.slice(1), {
    workspace: run.workspace,
    cwd: run.cwd,
    env: run.env,
    remotes: run.remotes,
    limits: run.limits,
    pidsCgroup: true,
  });
  try {
    return await collect(prepared, argv, opts, started);
  } finally {
    await prepared.release();
  }
}

function collect(
  prepared: PreparedCommand,
  argv: readonly string[],
  opts: RunOptions,
  started: number,
): Promise<RunResult> {
  const timeoutMs = Math.min(Math.max(opts.timeoutMs ?? DEFAULT_SHELL_TIMEOUT_MS, 1), MAX_SHELL_TIMEOUT_MS);
  const maxChars = Math.max(opts.maxOutputChars ?? DEFAULT_MAX_OUTPUT_CHARS, 0);
  const stdout = new HeadTailBuffer(maxChars);
  const stderr = new HeadTailBuffer(maxChars);

  return new Promise<RunResult>((resolve) => {
    const child = spawn(prepared.file, prepared.args, {
      ...(prepared.sandboxed ? {} : { argv0: argv[0] }),
      cwd: prepared.cwd,
      env: prepared.env,
      shell: false,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let timedOut = false;
    let cancelled = false;
    let exitCode: number | null = null;
    let exitSignal: string | null = null;
    let spawnError: Error | undefined;
    let settled = false;
    let processLimitHit = false;
    const timers: NodeJS.Timeout[] = [];

    const killGroup = (signal: NodeJS.Signals) => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, signal);
      } catch {
        // ESRCH: the group is already gone.
      }
    };
    const terminate = () => {
      killGroup('SIGTERM');
      timers.push(setTimeout(() => killGroup('SIGKILL'), KILL_GRACE_MS));
    };
    const onAbort = () => {
      if (settled || exitCode !== null || exitSignal !== null) return;
      cancelled = true;
      terminate();
    };
    const finish = () => {
      if (settled) return;
      settled = true;
      stopWatch();
      for (const timer of timers) clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      child.stdout.destroy();
      child.stderr.destroy();
      const out = stdout.finish();
      const err = stderr.finish();
      const result: RunResult = {
        exitCode: spawnError ? COMMAND_NOT_FOUND_EXIT_CODE : exitCode,
        signal: exitSignal,
        stdout: out.text,
        stderr: spawnError ? `${err.text}failed to start: ${spawnError.message}\n` : err.text,
        truncated: out.truncated || err.truncated,
        durationMs: Math.round(performance.now() - started),
        timedOut,
        cancelled,
        ...(out.redactions + err.redactions > 0 ? { redactions: out.redactions + err.redactions } : {}),
      };
      const limit = timedOut || cancelled ? undefined : limitVerdict(result, prepared.limits, processLimitHit);
      resolve(limit ? { ...result, limit } : result);
    };

    const stopWatch =
      prepared.sandboxed && child.pid !== undefined
        ? watchProcesses(
            child.pid,
            prepared.limits.processes,
            () => {
              processLimitHit = true;
              killGroup('SIGKILL');
            },
            prepared.pidsCgroup,
          )
        : () => undefined;
    child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
    child.on('error', (error) => {
      spawnError = error;
      finish();
    });
    child.on('exit', (code, signal) => {
      exitCode = code;
      exitSignal = signal;
      // Reap whatever the command left running in its group; then give the pipes a moment to drain.
      killGroup('SIGKILL');
      timers.push(setTimeout(finish, PIPE_DRAIN_MS));
    });
    child.on('close', finish);

    timers.push(
      setTimeout(() => {
        if (settled || exitCode !== null || exitSignal !== null) return;
        timedOut = true;
        terminate();
      }, timeoutMs),
    );
    opts.signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function emptyResult(started: number, flags: { cancelled?: boolean }): RunResult {
  return {
    exitCode: null,
    signal: null,
    stdout: '',
    stderr: '',
    truncated: false,
    durationMs: Math.round(performance.now() - started),
    timedOut: false,
    cancelled: flags.cancelled ?? false,
  };
}
