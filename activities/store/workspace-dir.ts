/**
 * An agent's workspace folder: the one validator every caller goes through (the HTTP API, the CLI and
 * the client library all reach it via `upsertAgent`; the worker before every tool call), and the
 * preparation that follows it (the folder created, its repositories given the agent's git identity).
 *
 * Where the folder may lie is workspace-roots.ts's rule, applied to its real location (`..` and
 * symbolic links resolved through the longest existing prefix) before anything is created, and again
 * once the folder exists, so a link planted between the two is caught too.
 *
 * The folder is created one component at a time with a plain `mkdir`, never `mkdir(…, { recursive })`:
 * Node's recursive mkdir retries a parent that already exists for as long as the kernel answers ENOENT
 * for the child, and procfs answers ENOENT for every new name, so `/proc/nope/ws` made it loop forever
 * on a core. Walking the components bounds the work by the path's length.
 */
import { execFile } from 'node:child_process';
import { lstatSync, promises as fs, realpathSync, type Stats } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { ConfigurationError } from '../env-values';
import {
  mapWorkspaceRoots,
  parseWorkspaceRoots,
  workspacePlacementProblem,
  type WorkspaceOwner,
  type WorkspaceRoots,
} from './workspace-roots';

const run = promisify(execFile);

/** Linux's PATH_MAX: a longer path cannot be opened anyway, so it is refused before any mkdir. */
export const MAX_WORKSPACE_PATH_BYTES = 4_096;
/** Linux's NAME_MAX for one path component (ext4, xfs, tmpfs). */
const MAX_PATH_COMPONENT_BYTES = 255;
/**
 * The kernel's virtual filesystems: files there are views of processes, devices and kernel state,
 * never storage, so no workspace can live under them (mkdir there fails oddly, or worse, succeeds).
 */
const VIRTUAL_FILESYSTEM_ROOTS = ['/proc', '/sys', '/dev'] as const;
/** statfs magic numbers of procfs, sysfs, cgroup v1/v2, debugfs, securityfs, devpts: the same virtual trees mounted elsewhere. */
const VIRTUAL_FILESYSTEM_MAGIC = new Set([0x9fa0, 0x62656572, 0x27e0eb, 0x63677270, 0x64626720, 0x73636673, 0x1cd1]);

/** A workspace path that cannot be used; `message` says why in words (the API answers it with 400). */
export class InvalidWorkspaceDirError extends Error {
  readonly type = 'InvalidWorkspaceDir';
  constructor(
    readonly workspaceDir: string,
    readonly reason: string,
  ) {
    super(`${JSON.stringify(workspaceDir)} cannot be a workspace folder: ${reason}`);
    this.name = 'InvalidWorkspaceDirError';
  }
}

/** What the path alone shows is wrong (no filesystem access): undefined when it may be used. */
export function workspaceDirSyntaxProblem(workspaceDir: string): string | undefined {
  if (workspaceDir.includes('\0')) return 'it contains a NUL character';
  if (!path.isAbsolute(workspaceDir)) return 'it is not an absolute path';
  if (Buffer.byteLength(workspaceDir) > MAX_WORKSPACE_PATH_BYTES)
    return `it is longer than ${MAX_WORKSPACE_PATH_BYTES} bytes`;
  const long = workspaceDir.split('/').find((part) => Buffer.byteLength(part) > MAX_PATH_COMPONENT_BYTES);
  if (long !== undefined)
    return `the component ${JSON.stringify(long.slice(0, 40) + '…')} is longer than ${MAX_PATH_COMPONENT_BYTES} bytes`;
  if (workspaceDir === '/') return 'it is the filesystem root';
  const virtual = virtualRootOf(workspaceDir);
  if (virtual) return `it is under ${virtual}, a virtual filesystem of the kernel, not storage`;
  return undefined;
}

function virtualRootOf(absolute: string): string | undefined {
  return VIRTUAL_FILESYSTEM_ROOTS.find((root) => absolute === root || absolute.startsWith(`${root}/`));
}

/** Workspace folders this process has checked whole (`ensureWorkspaceDir`), bounded like its sessions. */
const ENSURED_DIRS_MAX = 10_000;
const ensuredDirs = new Set<string>();

/** Who a folder is for and the roots it is checked against (absent: read from the environment). */
export interface WorkspacePlacement extends WorkspaceOwner {
  roots?: WorkspaceRoots;
  /** Roots of the product's own, for the worker only (a fork's workspace under the forks' root). */
  extraRoots?: readonly string[];
}

/**
 * Validates the folder and creates what is missing of it. Throws `InvalidWorkspaceDirError` naming the
 * reason: a place the roots do not allow (workspace-roots.ts; also reached through `..` or a symbolic
 * link), a virtual filesystem, a component that is a file or a device, a folder that cannot be created
 * or written (permissions, read-only, full disk). Nothing is created for a refused folder. Bounded:
 * one `realpath` per missing trailing component, one `lstat` and at most one `mkdir` per component.
 */
export async function ensureWorkspaceDir(workspaceDir: string, placement: WorkspacePlacement): Promise<void> {
  const absolute = path.resolve(workspaceDir);
  const syntax = workspaceDirSyntaxProblem(absolute);
  if (syntax) throw new InvalidWorkspaceDirError(workspaceDir, syntax);
  // A stored path is used as written: the kernel resolves `link/..` through the link, where
  // path.resolve only drops a component, so what was checked would not be where tools run.
  if (workspaceDir.split('/').includes('..'))
    throw new InvalidWorkspaceDirError(workspaceDir, `it contains "..": give the folder as ${absolute} instead`);
  checkPlacement(workspaceDir, absolute, placement);
  // Checked whole once per process: after that, the folder itself still being a plain directory is
  // enough (a tool call runs this before each call; the path above it is the operator's, and its real
  // location was checked above). One lstat, made synchronously: microseconds, where a thread-pool
  // round trip costs a loaded worker ~0.4 ms.
  if (ensuredDirs.has(absolute)) {
    let info: Stats | undefined;
    try {
      info = lstatSync(absolute);
    } catch {
      info = undefined;
    }
    if (info?.isDirectory()) return;
    ensuredDirs.delete(absolute);
  }
  const parts = absolute.split('/').filter(Boolean);
  let current = '/';
  for (const [index, part] of parts.entries()) {
    const next = path.join(current, part);
    let info = await lstatOrMissing(next, workspaceDir);
    if (!info) {
      await checkCreatableIn(current, workspaceDir);
      await fs.mkdir(next).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'EEXIST')
          throw new InvalidWorkspaceDirError(workspaceDir, `${next} could not be created: ${errnoReason(error)}`);
      });
      info = await lstatOrMissing(next, workspaceDir);
      if (!info)
        throw new InvalidWorkspaceDirError(
          workspaceDir,
          `${next} was created but does not exist (the filesystem does not keep folders)`,
        );
    }
    if (info.isSymbolicLink()) {
      // A link is followed (an operator may keep workspaces behind one), but where it leads is checked.
      const real = await fs.realpath(next).catch((error: NodeJS.ErrnoException) => {
        throw new InvalidWorkspaceDirError(
          workspaceDir,
          `${next} is a symbolic link that leads nowhere usable: ${errnoReason(error)}`,
        );
      });
      const virtual = virtualRootOf(real);
      if (virtual)
        throw new InvalidWorkspaceDirError(
          workspaceDir,
          `${next} is a symbolic link into ${virtual}, a virtual filesystem of the kernel, not storage`,
        );
      info = await fs.stat(real);
    }
    if (!info.isDirectory()) {
      const where =
        index === parts.length - 1
          ? `it is ${kindOf(info)}, not a folder`
          : `${next} is ${kindOf(info)}, not a folder, so nothing can be created below it`;
      throw new InvalidWorkspaceDirError(workspaceDir, where);
    }
    current = next;
  }
  await checkCreatableIn(absolute, workspaceDir);
  // A link planted while the folders were made: the folder's real location is checked once more.
  checkPlacement(workspaceDir, absolute, placement);
  if (ensuredDirs.size >= ENSURED_DIRS_MAX) ensuredDirs.clear();
  ensuredDirs.add(absolute);
}

/** The roots read from the environment, parsed again only when one of their variables changes. */
let envRoots: { key: string; roots: WorkspaceRoots } | undefined;
/** Roots with their folders' real paths, by the roots object (a root may itself be a link). */
const realRoots = new WeakMap<WorkspaceRoots, WorkspaceRoots>();

/** The roots the process's environment configures (`parseWorkspaceRoots`), with `base` replacing AGENTS_WORKSPACE_ROOT. */
export function workspaceRootsFromEnv(base?: string): WorkspaceRoots {
  const env = process.env;
  const key = [
    base,
    env.DATA_DIR,
    env.AGENTS_WORKSPACE_ROOT,
    env.AGENTS_WORKSPACE_ROOTS,
    env.AGENTS_WORKSPACE_ALLOWED_ROOTS,
    env.HOME,
  ].join('\0');
  if (envRoots?.key !== key) envRoots = { key, roots: parseWorkspaceRoots(env, base ? { base } : {}) };
  return envRoots.roots;
}

function checkPlacement(workspaceDir: string, absolute: string, placement: WorkspacePlacement): void {
  const roots = placement.roots ?? workspaceRootsFromEnv();
  let real = realRoots.get(roots);
  if (!real) {
    real = mapWorkspaceRoots(roots, realLocation);
    realRoots.set(roots, real);
  }
  const location = realLocation(absolute);
  const problem = workspacePlacementProblem(location, real, placement, (placement.extraRoots ?? []).map(realLocation));
  if (!problem) return;
  const link = location === absolute ? undefined : firstLink(absolute);
  const through = link ? `${link.path} is a symbolic link into ${link.target}, so it is ${location}, and ` : '';
  throw new InvalidWorkspaceDirError(workspaceDir, `${through}${link ? problem.replace(/^it /, '') : problem}`);
}

/**
 * Where `absolute` really is: the real path of its longest existing prefix (links resolved by the
 * kernel) with the missing components after it. One `realpath` per missing component, synchronous:
 * the whole usually exists, and then it is one system call.
 */
export function realLocation(absolute: string): string {
  const missing: string[] = [];
  for (let current = absolute; ;) {
    try {
      return path.join(realpathSync.native(current), ...missing.reverse());
    } catch {
      // Missing, not a folder or not searchable: what is above it decides where it would be.
      const parent = path.dirname(current);
      if (parent === current) return absolute;
      missing.push(path.basename(current));
      current = parent;
    }
  }
}

/** The first component of `absolute` that is a symbolic link, and where it leads (for messages). */
function firstLink(absolute: string): { path: string; target: string } | undefined {
  let current = '/';
  for (const part of absolute.split('/').filter(Boolean)) {
    current = path.join(current, part);
    try {
      if (lstatSync(current).isSymbolicLink()) return { path: current, target: realLocation(current) };
    } catch {
      return undefined;
    }
  }
  return undefined;
}

async function lstatOrMissing(target: string, workspaceDir: string): Promise<Stats | undefined> {
  try {
    return await fs.lstat(target);
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    if (e.code === 'ENOENT') return undefined;
    throw new InvalidWorkspaceDirError(workspaceDir, `${target} cannot be inspected: ${errnoReason(e)}`);
  }
}

/** The folder must be real storage this process may write in (a folder inside it is created or used). */
async function checkCreatableIn(dir: string, workspaceDir: string): Promise<void> {
  const stats = await fs.statfs(dir).catch(() => undefined);
  if (stats && VIRTUAL_FILESYSTEM_MAGIC.has(Number(stats.type))) {
    throw new InvalidWorkspaceDirError(
      workspaceDir,
      `${dir} is on a virtual filesystem of the kernel (procfs, sysfs, cgroup …), not storage`,
    );
  }
  await fs.access(dir, fs.constants.W_OK | fs.constants.X_OK).catch((error: NodeJS.ErrnoException) => {
    throw new InvalidWorkspaceDirError(workspaceDir, `this process cannot write in ${dir}: ${errnoReason(error)}`);
  });
}

function kindOf(info: Stats): string {
  if (info.isFile()) return 'a regular file';
  if (info.isCharacterDevice() || info.isBlockDevice()) return 'a device';
  if (info.isFIFO()) return 'a named pipe';
  if (info.isSocket()) return 'a socket';
  return 'not a folder';
}

function errnoReason(error: NodeJS.ErrnoException): string {
  switch (error.code) {
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'EROFS':
      return 'the filesystem is read-only';
    case 'ENOSPC':
    case 'EDQUOT':
      return 'no space left on the device';
    case 'ENAMETOOLONG':
      return 'the name is too long';
    case 'ENOTDIR':
      return 'a component of the path is not a folder';
    case 'ELOOP':
      return 'too many symbolic links';
    case 'ENOENT':
      return 'the filesystem refuses new names there';
    default:
      return error.code ?? error.message;
  }
}

// ---- the agent's git identity --------------------------------------------------------------------

/** Where agents' commit addresses live unless AGENTS_GIT_EMAIL_DOMAIN says otherwise: never routable mail. */
export const DEFAULT_AGENT_GIT_EMAIL_DOMAIN = 'agents.localhost';
/** A hostname: labels of letters, digits and '-', dot-separated (what an e-mail address's domain may be). */
const EMAIL_DOMAIN_PATTERN =
  /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/i;
/** Repositories looked for one level inside the workspace (a clone in a subfolder); more are left alone. */
const MAX_NESTED_REPOSITORIES_SCANNED = 50;
/** A local `git config` answers in milliseconds; a hung one must not hold a tool call. */
const GIT_CONFIG_TIMEOUT_MS = 5_000;

/**
 * Config files already seen with an identity, by path, with the identity and the file's mtime and size
 * then: before every tool call only a changed file is read again (two `git config` processes saved).
 */
const checkedConfigs = new Map<string, string>();

export interface GitIdentity {
  name: string;
  email: string;
}

/** `AGENTS_GIT_EMAIL_DOMAIN`, default agents.localhost; checked at every process's start by `loadConfig`. */
export function gitEmailDomainFromEnv(env: NodeJS.ProcessEnv = process.env): string {
  const domain = env.AGENTS_GIT_EMAIL_DOMAIN?.trim() || DEFAULT_AGENT_GIT_EMAIL_DOMAIN;
  if (!EMAIL_DOMAIN_PATTERN.test(domain))
    throw new ConfigurationError('AGENTS_GIT_EMAIL_DOMAIN', domain, 'a domain name such as example.com');
  return domain;
}

/** The identity an agent commits with: its name and `<agentId>@<AGENTS_GIT_EMAIL_DOMAIN or agents.localhost>`. */
export function agentGitIdentity(
  agent: { id: string; name: string },
  env: NodeJS.ProcessEnv = process.env,
): GitIdentity {
  const domain = gitEmailDomainFromEnv(env);
  // A newline in a name would end the config value; the agent's name is a single line by its schema, but be sure.
  return { name: agent.name.replace(/[\r\n\0]/g, ' ').trim() || agent.id, email: `${agent.id}@${domain}` };
}

/**
 * Gives the workspace's repositories (the workspace itself and its direct subfolders) the agent's
 * identity, in each repository's own config, where the repository sets none: a fresh `git init` by the
 * agent then commits as the agent instead of failing with "Author identity unknown", and an identity
 * someone configured is kept. Only a real `.git` folder with a regular `config` file is written: a
 * `gitdir:` file or a linked config could point outside the workspace.
 */
export async function applyGitIdentity(workspaceDir: string, identity: GitIdentity): Promise<string[]> {
  const candidates = [workspaceDir];
  const entries = await fs.readdir(workspaceDir, { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    if (candidates.length > MAX_NESTED_REPOSITORIES_SCANNED) break;
    if (entry.isDirectory() && entry.name !== '.git') candidates.push(path.join(workspaceDir, entry.name));
  }
  const configured: string[] = [];
  for (const repo of candidates) {
    const config = path.join(repo, '.git', 'config');
    const gitDir = await fs.lstat(path.join(repo, '.git')).catch(() => undefined);
    if (!gitDir?.isDirectory()) continue;
    const file = await fs.lstat(config).catch(() => undefined);
    if (!file?.isFile() || file.nlink !== 1) continue;
    const version = `${identity.name}\0${identity.email}\0${file.mtimeMs}\0${file.size}`;
    if (checkedConfigs.get(config) === version) continue;
    let changed = false;
    try {
      for (const [key, value] of [
        ['user.name', identity.name],
        ['user.email', identity.email],
      ] as const) {
        if ((await gitConfig(['--get', key], config)) === undefined) {
          await gitConfig([key, value], config);
          changed = true;
        }
      }
    } catch {
      // A config git cannot parse (or a key set twice) is the repository's business: its own git
      // commands will say so; the identity is best effort and must never stop a tool call.
      continue;
    }
    if (changed) configured.push(repo);
    const after = await fs.lstat(config).catch(() => undefined);
    if (after) checkedConfigs.set(config, `${identity.name}\0${identity.email}\0${after.mtimeMs}\0${after.size}`);
  }
  return configured;
}

/** `git config --file <config> …`: only that file (no includes, no global or system config); undefined when unset. */
async function gitConfig(args: string[], configFile: string): Promise<string | undefined> {
  try {
    const { stdout } = await run('git', ['config', '--file', configFile, ...args], {
      timeout: GIT_CONFIG_TIMEOUT_MS,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_CONFIG_GLOBAL: '/dev/null',
        GIT_TERMINAL_PROMPT: '0',
      },
    });
    return stdout.trim();
  } catch (error) {
    // Exit 1 from `--get`: the key is not set.
    if ((error as { code?: unknown }).code === 1) return undefined;
    throw error;
  }
}

/**
 * Prepares an agent's workspace: validated and created (`ensureWorkspaceDir`), then its repositories
 * given the agent's git identity (unless `gitIdentity: false`). Run when the agent is defined and
 * before every tool call (with the identity before every call that runs programs), so a repository
 * the agent created with one command has the identity by its next.
 */
export async function prepareWorkspace(
  agent: { id: string; name: string },
  workspaceDir: string,
  placement: WorkspacePlacement,
  options: { gitIdentity?: boolean } = {},
): Promise<void> {
  await ensureWorkspaceDir(workspaceDir, placement);
  if (options.gitIdentity ?? true) await applyGitIdentity(workspaceDir, agentGitIdentity(agent));
}
