/**
 * The kernel boundary around every process a tool starts (issue 18). Each program runs under
 * bubblewrap in new user, PID, mount, IPC, UTS, cgroup and network namespaces:
 *
 * - the workspace is the only writable path; system directories (`/usr`, `/bin`, `/lib*`, a few
 *   files of `/etc`) are read-only, and nothing else of the host exists (not `/root`, not the
 *   worker's checkout, not its data directory);
 * - `/tmp` is a private tmpfs and `HOME` a directory in it;
 * - `/proc` is the sandbox's own, in its own PID namespace: the worker's `environ` is not there;
 * - the environment is emptied (`--clearenv`) and only the caller's short allowlist is set;
 * - there is no network, except for git's network commands, which see only the workspace's recorded
 *   remotes (a remote that is a path is bound in at its own path; a network remote shares the network);
 * - resource limits (CPU time, file size, address space, processes) are set with `prlimit` before the
 *   program starts. The kernel does not apply `RLIMIT_NPROC` to root, so each command also gets its
 *   own pids cgroup (`pids.max`) where the pids controller is writable; elsewhere the number of
 *   processes in the sandbox's PID namespace is watched from outside and the sandbox killed past it;
 * - a seccomp filter (`seccomp-filter.ts`) refuses the system calls no tool needs (ptrace, keyrings,
 *   io_uring, bpf, mounting, new user namespaces, typing into a terminal …), for every process of it;
 * - the command sees descriptors 0–2 only: the worker closes what it inherited before each launch
 *   (`inherited-descriptors.ts`), and bubblewrap consumes the filter's descriptor (`sandbox-launch.ts`).
 *
 * With no usable bubblewrap, tools are refused (`SandboxUnavailableError`), unless the operator sets
 * `AGENTS_SANDBOX=off`, which is logged loudly at every start of the worker and on first use.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, lstatSync, promises as fs, readlinkSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { ConfigurationError } from '../../env-values';
import { closeInheritableDescriptors } from './inherited-descriptors';
import {
  SANDBOX_ADDRESS_SPACE_BYTES,
  SANDBOX_CPU_SECONDS,
  SANDBOX_FILE_SIZE_BYTES,
  SANDBOX_MAX_PROCESSES,
  SANDBOX_PROBE_TIMEOUT_MS,
} from './limits';
import { launcherCommand, SECCOMP_FILTER_FD, seccompFilterFile } from './sandbox-launch';

/** The operator's setting: `AGENTS_SANDBOX=off` runs tools without the sandbox (loudly logged). */
export const SANDBOX_SETTING = 'AGENTS_SANDBOX';

/** Where bubblewrap is looked for: system directories only, never the workspace. */
const BWRAP_CANDIDATES = ['/usr/bin/bwrap', '/usr/local/bin/bwrap', '/bin/bwrap'];
/** The operator's setting for a bubblewrap installed elsewhere (an absolute path). */
export const BWRAP_PATH_SETTING = 'AGENTS_SANDBOX_BWRAP';
const PRLIMIT_CANDIDATES = ['/usr/bin/prlimit', '/bin/prlimit'];

/** Inside the sandbox `HOME` is this private directory on the sandbox's own `/tmp`. */
export const SANDBOX_HOME = '/tmp/home';

/** Top-level system directories the tools need, read-only (a symlink such as `/bin -> usr/bin` is recreated as a link). */
const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/**
 * The pieces of `/etc` that programs need to start and that hold no secret: user and group names
 * (no shadow), the dynamic linker's cache, Debian's alternatives links (`/usr/bin/awk` points into
 * `/etc/alternatives`), the time zone, locale and magic databases.
 */
const ETC_FILES = [
  '/etc/passwd',
  '/etc/group',
  '/etc/nsswitch.conf',
  '/etc/ld.so.cache',
  '/etc/ld.so.conf',
  '/etc/ld.so.conf.d',
  '/etc/alternatives',
  '/etc/localtime',
  '/etc/locale.alias',
  '/etc/magic',
  '/etc/mime.types',
];

/** Name resolution and TLS roots, bound only when a git network command may reach a network remote. */
const ETC_NETWORK_FILES = [
  '/etc/resolv.conf',
  '/etc/hosts',
  '/etc/host.conf',
  '/etc/gai.conf',
  '/etc/ssl',
  '/etc/ca-certificates',
  '/etc/ca-certificates.conf',
];

/** How often the number of processes in a running sandbox is checked. */
const PROCESS_WATCH_INTERVAL_MS = 50;

/**
 * The pids controller (cgroup v1 hierarchy) where each command gets its own group with `pids.max`, so
 * the kernel refuses forks past the limit even for a root worker. Used when writable.
 */
const PIDS_CGROUP_ROOT = '/sys/fs/cgroup/pids';
const PIDS_CGROUP_PARENT = 'durable-agents-sandbox';
/** How long to keep trying to remove a command's pids group while its last processes exit. */
const CGROUP_RELEASE_TRIES = 20;
const CGROUP_RELEASE_DELAY_MS = 50;

export class SandboxUnavailableError extends Error {
  override readonly name = 'SandboxUnavailableError';
}

export interface SandboxLimits {
  cpuSeconds: number;
  fileSizeBytes: number;
  addressSpaceBytes: number;
  processes: number;
}

export const DEFAULT_SANDBOX_LIMITS: Readonly<SandboxLimits> = {
  cpuSeconds: SANDBOX_CPU_SECONDS,
  fileSizeBytes: SANDBOX_FILE_SIZE_BYTES,
  addressSpaceBytes: SANDBOX_ADDRESS_SPACE_BYTES,
  processes: SANDBOX_MAX_PROCESSES,
};

/** A remote git may reach from inside the sandbox. */
export type RemoteAccess = { kind: 'path'; path: string; writable: boolean } | { kind: 'network' };

export interface SandboxSpec {
  /** The only writable path (made real before use). */
  workspace: string;
  /** Working directory, inside the workspace. */
  cwd: string;
  /** The whole environment of the program (the caller's allowlist). */
  env: Record<string, string>;
  /** Remotes a git network command may reach; none means no network and no path outside the workspace. */
  remotes?: readonly RemoteAccess[];
  limits?: Partial<SandboxLimits>;
  /** Host paths bound read-only at their own path (a long-lived tool server's program and packages). */
  readOnlyPaths?: readonly string[];
  /** The workspace is bound read-only (a tool server that only reads it). */
  workspaceReadOnly?: boolean;
  /** Shares the host's network (a tool server whose profile asks for it), with name resolution and TLS roots. */
  network?: boolean;
}

export interface PreparedCommand {
  file: string;
  args: string[];
  env: Record<string, string>;
  cwd: string;
  sandboxed: boolean;
  limits: SandboxLimits;
  /** The command's own pids cgroup, when the kernel's pids controller is usable here. */
  pidsCgroup?: string;
  /** Removes what the command needed (its pids cgroup); call once it has exited. */
  release(): Promise<void>;
}

export type SandboxMode = 'bwrap' | 'off';

/** The configured mode; anything but unset, `bwrap`/`on` or `off` is a configuration error, never a downgrade. */
export function sandboxMode(env: NodeJS.ProcessEnv = process.env): SandboxMode {
  const value = (env[SANDBOX_SETTING] ?? '').trim().toLowerCase();
  if (value === '' || value === 'bwrap' || value === 'on') return 'bwrap';
  if (value === 'off') return 'off';
  throw new ConfigurationError(SANDBOX_SETTING, env[SANDBOX_SETTING] ?? '', '"bwrap" (the default) or "off"');
}

/**
 * `AGENTS_SANDBOX_BWRAP`, checked at start: a path that is not there is the operator's typo, refused by
 * name. (Unset, and no bubblewrap in the system folders, is a machine without it: logged, tools refused.)
 */
export function bwrapPathFromEnv(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const value = env[BWRAP_PATH_SETTING];
  if (value === undefined || value.trim() === '') return undefined;
  if (!path.isAbsolute(value) || !existsSync(value))
    throw new ConfigurationError(BWRAP_PATH_SETTING, value, 'the absolute path of an installed bubblewrap (bwrap)');
  return value;
}

let warnedOff = false;
/** The loud line logged when tools run unsandboxed. */
export const SANDBOX_OFF_WARNING =
  `${SANDBOX_SETTING}=off: TOOL PROCESSES RUN WITHOUT THE KERNEL SANDBOX. Agents' commands see the worker's file system, ` +
  'its /proc and the network; only the command classifier stands between a model and the worker. Do not use this in production.';

function warnOff(): void {
  if (warnedOff) return;
  warnedOff = true;
  process.emitWarning(SANDBOX_OFF_WARNING, { code: 'AGENTS_SANDBOX_OFF' });
}

let availability: Promise<{ bwrap: string; prlimit: string } | { error: string }> | undefined;

/**
 * Checks once that bubblewrap can build the sandbox here (user namespaces allowed, /proc mountable,
 * the seccomp filter installable).
 */
export function checkSandbox(): Promise<{ bwrap: string; prlimit: string } | { error: string }> {
  // Also reached from the worker's start-up log (sandboxStatus), before anything is launched.
  closeInheritableDescriptors();
  availability ??= (async () => {
    const configured = process.env[BWRAP_PATH_SETTING];
    const candidates = configured ? [configured] : BWRAP_CANDIDATES;
    const bwrap = candidates.find((candidate) => path.isAbsolute(candidate) && existsSync(candidate));
    if (!bwrap)
      return {
        error: `bubblewrap is not installed (looked for ${candidates.join(', ')}; Debian: apt-get install bubblewrap)`,
      };
    const prlimit = PRLIMIT_CANDIDATES.find((candidate) => existsSync(candidate));
    if (!prlimit) return { error: 'prlimit (util-linux) is not installed, so resource limits cannot be set' };
    const filter = await seccompFilterFile();
    if (!filter) return { error: `no seccomp filter is defined for this architecture (${process.arch})` };
    const probeDir = await fs.mkdtemp(path.join('/tmp', 'sandbox-probe-'));
    try {
      const args = sandboxArgs({ workspace: probeDir, cwd: probeDir, env: { PATH: '/usr/bin:/bin' } }, [
        prlimit,
        '--nofile=64',
        '--',
        '/bin/true',
      ]);
      const launch = launcherCommand(bwrap, args, filter);
      const result = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = spawn(launch.file, launch.args, {
          stdio: ['ignore', 'ignore', 'pipe'],
          env: {},
          timeout: SANDBOX_PROBE_TIMEOUT_MS,
        });
        let stderr = '';
        child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
        child.on('error', (error) => resolve({ code: null, stderr: error.message }));
        child.on('close', (code) => resolve({ code, stderr }));
      });
      if (result.code !== 0) {
        return {
          error: `bubblewrap cannot create the sandbox here (${result.stderr.trim().split('\n')[0] || `exit ${result.code}`}); user, PID, mount and network namespaces and seccomp filters are needed`,
        };
      }
      return { bwrap, prlimit };
    } finally {
      await fs.rm(probeDir, { recursive: true, force: true });
    }
  })();
  return availability;
}

/**
 * The sandbox's state for the worker's start-up log: a loud warning when off, an error when unavailable.
 * A bad AGENTS_SANDBOX or AGENTS_SANDBOX_BWRAP is thrown as a ConfigurationError, which stops the start.
 */
export async function sandboxStatus(): Promise<{ level: 'info' | 'warn' | 'error'; message: string }> {
  if (sandboxMode() === 'off') return { level: 'warn', message: SANDBOX_OFF_WARNING };
  bwrapPathFromEnv();
  const tools = await checkSandbox();
  if ('error' in tools) {
    return {
      level: 'error',
      message: `tool sandbox unavailable: ${tools.error}; shell tools will be refused until it works (or ${SANDBOX_SETTING}=off is set)`,
    };
  }
  return { level: 'info', message: `tool processes run in the bubblewrap sandbox (${tools.bwrap})` };
}

/** Forgets the result of `checkSandbox`, so the next run checks again (after the installation changed). */
export function forgetSandboxCheck(): void {
  availability = undefined;
}

/**
 * The command that runs `program argv…` inside the sandbox (or, with `AGENTS_SANDBOX=off`, as it is).
 * Throws `SandboxUnavailableError` when the sandbox cannot be built and the operator has not opted out.
 */
export async function prepareCommand(
  program: string,
  args: readonly string[],
  spec: SandboxSpec & { pidsCgroup?: boolean },
): Promise<PreparedCommand> {
  const limits = { ...DEFAULT_SANDBOX_LIMITS, ...spec.limits };
  closeInheritableDescriptors();
  if (sandboxMode() === 'off') {
    warnOff();
    return {
      file: program,
      args: [...args],
      env: spec.env,
      cwd: spec.cwd,
      sandboxed: false,
      limits,
      release: async () => undefined,
    };
  }
  const tools = await checkSandbox();
  if ('error' in tools) {
    throw new SandboxUnavailableError(
      `tool sandbox unavailable: ${tools.error}. Shell tools are refused rather than run unconfined; ` +
        `an operator who accepts the risk can set ${SANDBOX_SETTING}=off`,
    );
  }
  const workspace = await fs.realpath(spec.workspace);
  const cwd = await fs.realpath(spec.cwd);
  const inner = [
    tools.prlimit,
    // Soft CPU limit first (SIGXCPU, reported as such), the hard one a second later (SIGKILL).
    `--cpu=${limits.cpuSeconds}:${limits.cpuSeconds + 1}`,
    `--fsize=${limits.fileSizeBytes}`,
    `--as=${limits.addressSpaceBytes}`,
    `--nproc=${limits.processes}`,
    '--core=0',
    '--',
    program,
    ...args,
  ];
  const bwrapArgs = sandboxArgs({ ...spec, workspace, cwd }, inner);
  // Checked at every launch: a temp cleaner may have removed the file since the start.
  const filter = await seccompFilterFile();
  if (!filter)
    throw new SandboxUnavailableError(`no seccomp filter is defined for this architecture (${process.arch})`);
  const group = spec.pidsCgroup ? await createPidsCgroup(limits.processes) : undefined;
  const launch = launcherCommand(tools.bwrap, bwrapArgs, filter, group && path.join(group, 'cgroup.procs'));
  return {
    ...launch,
    env: {},
    cwd: '/',
    sandboxed: true,
    limits,
    ...(group ? { pidsCgroup: group } : {}),
    release: group ? () => releasePidsCgroup(group) : async () => undefined,
  };
}

let pidsParent: Promise<string | undefined> | undefined;

/** A new pids cgroup limited to `max` processes, or undefined when the controller is not writable here. */
async function createPidsCgroup(max: number): Promise<string | undefined> {
  pidsParent ??= (async () => {
    const parent = path.join(PIDS_CGROUP_ROOT, PIDS_CGROUP_PARENT);
    try {
      await fs.mkdir(parent, { recursive: true });
      await fs.access(path.join(parent, 'cgroup.procs'));
      return parent;
    } catch {
      return undefined;
    }
  })();
  const parent = await pidsParent;
  if (!parent) return undefined;
  const group = path.join(parent, randomUUID());
  try {
    await fs.mkdir(group);
    await fs.writeFile(path.join(group, 'pids.max'), String(max));
    return group;
  } catch {
    await fs.rmdir(group).catch(() => undefined);
    return undefined;
  }
}

async function releasePidsCgroup(group: string): Promise<void> {
  for (let attempt = 0; attempt < CGROUP_RELEASE_TRIES; attempt += 1) {
    try {
      await fs.rmdir(group);
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      // EBUSY: the namespace's last processes are still exiting.
      await new Promise((resolve) => setTimeout(resolve, CGROUP_RELEASE_DELAY_MS));
    }
  }
}

/** Forks the kernel refused in a pids cgroup because of its limit (`max N` in `pids.events`). */
async function refusedForks(group: string): Promise<number> {
  const events = await fs.readFile(path.join(group, 'pids.events'), 'utf8').catch(() => '');
  return Number(/^max (\d+)/m.exec(events)?.[1] ?? 0);
}

function sandboxArgs(spec: SandboxSpec, command: readonly string[]): string[] {
  const remotes = spec.remotes ?? [];
  const network = spec.network === true || remotes.some((remote) => remote.kind === 'network');
  const args = [
    '--unshare-all',
    ...(network ? ['--share-net'] : []),
    '--die-with-parent',
    '--new-session',
    '--seccomp',
    String(SECCOMP_FILTER_FD),
    '--cap-drop',
    'ALL',
    '--hostname',
    'sandbox',
  ];
  for (const dir of SYSTEM_DIRS) {
    const info = lstatOrUndefined(dir);
    if (!info) continue;
    if (info.isSymbolicLink()) args.push('--symlink', readlinkSync(dir), dir);
    else args.push('--ro-bind', dir, dir);
  }
  for (const file of [...ETC_FILES, ...(network ? ETC_NETWORK_FILES : [])]) {
    if (lstatOrUndefined(file)) args.push('--ro-bind', file, file);
  }
  args.push('--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp', '--dir', SANDBOX_HOME);
  for (const extra of spec.readOnlyPaths ?? []) {
    const source = realOrUndefined(extra);
    if (source !== undefined) args.push('--ro-bind', source, source);
  }
  args.push(spec.workspaceReadOnly ? '--ro-bind' : '--bind', spec.workspace, spec.workspace);
  for (const remote of remotes) {
    if (remote.kind !== 'path') continue;
    const source = realOrUndefined(remote.path);
    // Only a repository is bound, never a directory holding the workspace (a remote of `..` would
    // otherwise open the host checkout): git reaches it at the path it was recorded with.
    if (source === undefined || isWithin(source, spec.workspace) || !looksLikeRepository(source)) continue;
    args.push(remote.writable ? '--bind' : '--ro-bind', source, remote.path);
  }
  args.push('--chdir', spec.cwd, '--clearenv');
  for (const [name, value] of Object.entries(spec.env)) args.push('--setenv', name, value);
  args.push('--', ...command);
  return args;
}

function realOrUndefined(file: string): string | undefined {
  try {
    return realpathSync(file);
  } catch {
    return undefined;
  }
}

function isWithin(dir: string, target: string): boolean {
  const rel = path.relative(dir, target);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/** A bare repository (`HEAD` beside `objects/`) or a work tree with a `.git` directory. */
function looksLikeRepository(dir: string): boolean {
  const bare = existsSync(path.join(dir, 'HEAD')) && existsSync(path.join(dir, 'objects'));
  return bare || lstatOrUndefined(path.join(dir, '.git'))?.isDirectory() === true;
}

function lstatOrUndefined(file: string) {
  try {
    return lstatSync(file);
  } catch {
    return undefined;
  }
}

/**
 * Watches the number of processes in a running sandbox (its own `/proc`, seen through the sandbox's
 * root) and calls `onExceeded` once when it passes `max`. The kernel's `RLIMIT_NPROC` does the same
 * for a worker that is not root; for root it is not applied, so this watch is what stops a fork bomb.
 */
export function watchProcesses(bwrapPid: number, max: number, onExceeded: () => void, pidsCgroup?: string): () => void {
  let stopped = false;
  let sandboxRoot: string | undefined;
  const timer = setInterval(() => {
    if (stopped) return;
    void (async () => {
      if (pidsCgroup) {
        // The kernel already refuses the forks; a command that hit the limit is stopped and reported.
        if ((await refusedForks(pidsCgroup)) > 0 && !stopped) {
          stopped = true;
          clearInterval(timer);
          onExceeded();
        }
        return;
      }
      sandboxRoot ??= await sandboxInitRoot(bwrapPid);
      if (!sandboxRoot) return;
      const entries = await fs.readdir(path.join(sandboxRoot, 'proc')).catch(() => undefined);
      if (!entries || stopped) return;
      const count = entries.filter((name) => /^\d+$/.test(name)).length;
      if (count > max) {
        stopped = true;
        clearInterval(timer);
        onExceeded();
      }
    })();
  }, PROCESS_WATCH_INTERVAL_MS);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}

/** `/proc/<pid>/root` of the sandbox's first process (bubblewrap's child in the new PID namespace). */
async function sandboxInitRoot(bwrapPid: number): Promise<string | undefined> {
  const children = await fs.readFile(`/proc/${bwrapPid}/task/${bwrapPid}/children`, 'utf8').catch(() => '');
  const first = children.trim().split(/\s+/)[0];
  return first ? `/proc/${first}/root` : undefined;
}

/** What ended a sandboxed run, when a limit did: a sentence for the model, or undefined. */
export function limitVerdict(
  result: { exitCode: number | null; signal: string | null; stderr: string },
  limits: SandboxLimits,
  processLimitHit: boolean,
): string | undefined {
  if (processLimitHit)
    return `killed: process limit of ${limits.processes} processes reached (the whole sandbox was stopped)`;
  // bubblewrap reports a program killed by a signal as 128 + the signal number.
  if (result.exitCode === 128 + SIGXCPU || result.signal === 'SIGXCPU')
    return `killed: CPU time limit of ${limits.cpuSeconds} s`;
  if (
    result.exitCode === 128 + SIGXFSZ ||
    result.signal === 'SIGXFSZ' ||
    /File size limit exceeded/i.test(result.stderr)
  ) {
    return `stopped: file size limit of ${formatBytes(limits.fileSizeBytes)} per file`;
  }
  if (
    /Cannot allocate memory|out of memory|memory exhausted|std::bad_alloc|Resource temporarily unavailable/i.test(
      result.stderr,
    )
  ) {
    return `failed at a resource limit (memory: ${formatBytes(limits.addressSpaceBytes)} of address space; processes: ${limits.processes})`;
  }
  return undefined;
}

const SIGXCPU = 24;
const SIGXFSZ = 25;

function formatBytes(bytes: number): string {
  if (bytes % (1024 * 1024 * 1024) === 0) return `${bytes / (1024 * 1024 * 1024)} GiB`;
  if (bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)} MiB`;
  return `${bytes} bytes`;
}
