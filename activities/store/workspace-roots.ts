/**
 * Where an agent's workspace folder may lie: under its organisation's workspace root or a root the
 * operator lists, and never in a folder no configuration can open (the operating system's, a home's
 * dot-folders, the data folder, the product's checkout, a root itself or one of its ancestors).
 *
 * The rule is a function of paths only: `workspacePlacementProblem` is given the folder's real
 * location (`..` and symbolic links already resolved by `ensureWorkspaceDir`, the one validator every
 * caller goes through) and answers the reason it is refused, with where the folder must lie instead.
 * The roots are read from the environment by `parseWorkspaceRoots`, which refuses a malformed or
 * dangerous variable at start naming the variable, its value and what is allowed.
 */
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_ORG } from './tenancy';
import { ConfigurationError } from '../env-values';

/** The operating system's own folders: no root the operator lists can open them. */
const SYSTEM_FOLDERS = ['/etc', '/usr', '/bin', '/sbin', '/boot'] as const;
/** `/lib`, `/lib32`, `/lib64`, `/libx32` …: the dynamic loader and libraries every program maps. */
const SYSTEM_LIBRARY_FOLDER = /^\/lib[^/]*(\/|$)/;
/** The kernel's views of processes, devices and its state: never storage. */
const KERNEL_FOLDERS = ['/proc', '/sys', '/dev'] as const;
/**
 * Folders that hold services' state (`/var/lib/postgresql`, `/run/docker.sock`) and installed
 * applications (`/opt/<product>`): a workspace there only under a root the operator named inside them
 * (`/var/lib/agents`), never the folder itself or anything beside that root.
 */
const STATE_FOLDERS = ['/var', '/opt', '/run'] as const;
/** Where users' homes live: `/home/<name>`, whose dot-folders hold keys, tokens and shell start-up files. */
const HOMES_FOLDER = '/home';
/** root's home. */
const ROOT_HOME = '/root';
/** The embedded PostgreSQL's cluster inside DATA_DIR (see worker/config.ts). */
const EMBEDDED_DB_SUBFOLDER = 'postgres';
/** The product's package name: how its checkout is recognised walking up from this module. */
const PRODUCT_PACKAGE_NAME = 'durable-agents';

/** The roots and the protected folders the rule is applied with; `parseWorkspaceRoots` builds it. */
export interface WorkspaceRoots {
  /**
   * AGENTS_WORKSPACE_ROOT (default `<DATA_DIR>/workspaces`): an organisation without a root of its own
   * has `<base>/<org>`. Undefined only when a client library is given an empty root on purpose.
   */
  readonly base: string | undefined;
  /** AGENTS_WORKSPACE_ROOTS: organisations with a root of their own (`acme=/srv/acme`). */
  readonly orgRoots: ReadonlyMap<string, string>;
  /** AGENTS_WORKSPACE_ALLOWED_ROOTS: folders under which any organisation's agents may have workspaces. */
  readonly allowed: readonly string[];
  /** DATA_DIR: the embedded database lives in it. */
  readonly dataDir: string;
  /** The product's own source folder (this module's package). */
  readonly checkout: string;
  /** Homes guarded beside `/root` and `/home/<name>`: this process's (`os.homedir()`) and `$HOME`. */
  readonly homes: readonly string[];
}

/** Who the folder is for: its organisation's root, and the default organisation's legacy folder. */
export interface WorkspaceOwner {
  agentId: string;
  /** The agent's organisation (`orgOfConfig`: `config.org`, else `default`). */
  org: string;
}

/** A workspace variable the operator set that cannot be used: names the variable, its value and what is allowed. */
export class WorkspaceRootsConfigError extends ConfigurationError {
  override readonly name = 'WorkspaceRootsConfigError';
  readonly type = 'WorkspaceRootsConfig';
}

/**
 * The product's checkout: the nearest folder above this module whose package.json is the product's
 * (the source tree when run with tsx, the same folder above `dist/` when built). Its source, its
 * `.git` and its `node_modules` are code every process runs.
 */
export const PRODUCT_CHECKOUT = findCheckout(__dirname);

function findCheckout(from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        if ((JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name === PRODUCT_PACKAGE_NAME)
          return dir;
      } catch {
        // An unreadable manifest is not the product's: keep walking up.
      }
    }
    if (path.dirname(dir) === dir) return path.resolve(from, '..', '..');
  }
}

const ROOTS_FORMAT = 'comma-separated ORG=/absolute/folder pairs, e.g. acme=/srv/acme,globex=/srv/globex';
const ALLOWED_FORMAT = 'comma-separated absolute folders, e.g. /srv/shared,/mnt/projects';
const ROOT_LIMITS =
  'a root must be an absolute folder outside the system folders (/etc, /usr, /bin, /sbin, /lib*, /boot, /proc, /sys, /dev), ' +
  'not /var, /opt or /run themselves, not a home or a home dot-folder, not the data folder, its embedded database or the checkout';

/**
 * Reads the workspace roots from the environment and validates them (`WorkspaceRootsConfigError`
 * naming the variable, its value and what is allowed):
 *
 * - `AGENTS_WORKSPACE_ROOT` (default `$DATA_DIR/workspaces`): organisation `org`'s root is `<it>/<org>`;
 * - `AGENTS_WORKSPACE_ROOTS`: `acme=/srv/acme,globex=/srv/globex`, organisations with a root elsewhere;
 * - `AGENTS_WORKSPACE_ALLOWED_ROOTS`: `/srv/shared,/mnt/projects`, folders any organisation may use.
 *
 * `base` replaces AGENTS_WORKSPACE_ROOT (a client library's `workspaceRoot` option).
 */
export function parseWorkspaceRoots(
  env: NodeJS.ProcessEnv = process.env,
  overrides: { base?: string } = {},
): WorkspaceRoots {
  const dataDir = path.resolve(env.DATA_DIR ?? '.data');
  const protectedOnly: WorkspaceRoots = {
    base: undefined,
    orgRoots: new Map(),
    allowed: [],
    dataDir,
    checkout: PRODUCT_CHECKOUT,
    homes: [...new Set([os.homedir(), env.HOME].filter((h): h is string => !!h).map((h) => path.resolve(h)))],
  };
  // The value named in a refusal is the one the operator gave (DATA_DIR itself, not the root under it).
  const [baseVariable, givenValue, baseValue] = overrides.base
    ? ['workspaceRoot', overrides.base, overrides.base]
    : env.AGENTS_WORKSPACE_ROOT
      ? ['AGENTS_WORKSPACE_ROOT', env.AGENTS_WORKSPACE_ROOT, env.AGENTS_WORKSPACE_ROOT]
      : ['DATA_DIR', env.DATA_DIR ?? '.data', path.join(dataDir, 'workspaces')];
  const base = path.resolve(baseValue);
  const baseProblem = rootProblem(base, protectedOnly);
  if (baseProblem)
    throw new WorkspaceRootsConfigError(
      baseVariable,
      givenValue,
      `${base} cannot be the workspace root: ${baseProblem}; ${ROOT_LIMITS}`,
    );

  const orgRoots = new Map<string, string>();
  const rootsValue = env.AGENTS_WORKSPACE_ROOTS ?? '';
  for (const entry of splitList(rootsValue)) {
    const at = entry.indexOf('=');
    const org = at > 0 ? entry.slice(0, at).trim() : '';
    const folder = at > 0 ? entry.slice(at + 1).trim() : '';
    const fail = (reason: string) => new WorkspaceRootsConfigError('AGENTS_WORKSPACE_ROOTS', rootsValue, reason);
    if (!org || !folder) throw fail(`${JSON.stringify(entry)} is not ORG=/folder; use ${ROOTS_FORMAT}`);
    if (!path.isAbsolute(folder) || folder.includes('\0'))
      throw fail(`the root of ${org}, ${JSON.stringify(folder)}, is not an absolute path; use ${ROOTS_FORMAT}`);
    if (orgRoots.has(org)) throw fail(`organisation ${org} is given two roots; give each organisation one`);
    const root = path.resolve(folder);
    const problem = rootProblem(root, protectedOnly);
    if (problem) throw fail(`${root} cannot be the workspace root of ${org}: ${problem}; ${ROOT_LIMITS}`);
    for (const [other, otherRoot] of orgRoots) {
      if (isInside(root, otherRoot) || isInside(otherRoot, root))
        throw fail(
          `the roots of ${other} (${otherRoot}) and ${org} (${root}) overlap; an organisation's root must not contain another's`,
        );
    }
    orgRoots.set(org, root);
  }

  const allowedValue = env.AGENTS_WORKSPACE_ALLOWED_ROOTS ?? '';
  const allowed: string[] = [];
  for (const folder of splitList(allowedValue)) {
    const fail = (reason: string) =>
      new WorkspaceRootsConfigError('AGENTS_WORKSPACE_ALLOWED_ROOTS', allowedValue, reason);
    if (!path.isAbsolute(folder) || folder.includes('\0'))
      throw fail(`${JSON.stringify(folder)} is not an absolute path; use ${ALLOWED_FORMAT}`);
    const root = path.resolve(folder);
    const problem = rootProblem(root, protectedOnly);
    if (problem) throw fail(`${root} cannot be an allowed root: ${problem}; ${ROOT_LIMITS}`);
    if (!allowed.includes(root)) allowed.push(root);
  }
  return { ...protectedOnly, base, orgRoots, allowed };
}

function splitList(value: string): string[] {
  return value
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean);
}

/** The root of an organisation: its own (AGENTS_WORKSPACE_ROOTS), else `<base>/<org>`; undefined without either. */
export function orgWorkspaceRoot(roots: WorkspaceRoots, org: string): string | undefined {
  const own = roots.orgRoots.get(org);
  if (own) return own;
  // A name that is not one plain folder name (`..`, `a/b`) would make `<base>/<org>` another folder.
  return roots.base && isPlainFolderName(org) ? path.join(roots.base, org) : undefined;
}

function isPlainFolderName(name: string): boolean {
  return name !== '.' && name !== '..' && !/[/\0]/.test(name);
}

/**
 * The folder agents of the default organisation had before organisations: `<base>/<agentId>`. Kept
 * valid for that organisation only, so a deployment upgraded in place changes nothing (its agents keep
 * their folders and files). Not the whole of AGENTS_WORKSPACE_ROOT as a root of the default
 * organisation: that would give its agents every other organisation's `<base>/<org>` as well.
 */
export function legacyWorkspaceDir(roots: WorkspaceRoots, agentId: string): string | undefined {
  return roots.base ? path.join(roots.base, agentId) : undefined;
}

/** A new agent's folder when it names none: `<org root>/<agentId>`; undefined when its organisation has no root. */
export function defaultWorkspaceDir(roots: WorkspaceRoots, owner: WorkspaceOwner): string | undefined {
  const root = orgWorkspaceRoot(roots, owner.org);
  return root ? path.join(root, owner.agentId) : undefined;
}

/** `inner` is `outer` or lies below it. */
export function isInside(inner: string, outer: string): boolean {
  return inner === outer || outer === '/' || inner.startsWith(`${outer}/`);
}

function isStrictlyInside(inner: string, outer: string): boolean {
  return inner !== outer && isInside(inner, outer);
}

/** Where the folder sits among the folders nothing may open; undefined when none. Shared by roots and workspaces. */
function protectedFolderProblem(folder: string, roots: WorkspaceRoots): string | undefined {
  if (folder === '/') return 'it is the filesystem root';
  const kernel = KERNEL_FOLDERS.find((dir) => isInside(folder, dir));
  if (kernel)
    return `it is ${folder === kernel ? '' : 'under '}${kernel}, a virtual filesystem of the kernel, not storage`;
  const system = SYSTEM_FOLDERS.find((dir) => isInside(folder, dir)) ?? SYSTEM_LIBRARY_FOLDER.exec(folder)?.[0];
  if (system) {
    const dir = system.replace(/\/$/, '');
    return `it is ${folder === dir ? '' : 'under '}${dir}, a folder of the operating system`;
  }
  if ((STATE_FOLDERS as readonly string[]).includes(folder))
    return `it is ${folder}, the operating system's folder for services' state and installed applications`;
  if (folder === HOMES_FOLDER) return `it is ${HOMES_FOLDER}, the folder of every user's home`;
  for (const home of homesOf(folder, roots)) {
    if (folder === home)
      return `it is ${home}, a home folder (its dot-folders hold keys, tokens and shell start-up files)`;
    const first = folder.slice(home === '/' ? 1 : home.length + 1).split('/')[0]!;
    if (first.startsWith('.'))
      return `it is ${folder === path.join(home, first) ? '' : 'under '}${path.join(home, first)}, a dot-folder of the home ${home} (keys, tokens, shell start-up files)`;
  }
  const database = path.join(roots.dataDir, EMBEDDED_DB_SUBFOLDER);
  if (isInside(folder, database))
    return `it is ${folder === database ? '' : 'under '}${database}, the embedded database's folder`;
  if (folder === roots.dataDir) return `it is the data folder (DATA_DIR), which holds the embedded database`;
  if (folder === roots.checkout) return `it is the product's checkout (its source code)`;
  return undefined;
}

/** The homes `folder` lies in: `/root`, `/home/<name>`, this process's and $HOME. */
function homesOf(folder: string, roots: WorkspaceRoots): string[] {
  const homes = [ROOT_HOME, ...roots.homes];
  const user = /^\/home\/[^/]+/.exec(folder)?.[0];
  if (user) homes.push(user);
  return homes.filter((home) => isInside(folder, home));
}

/** Why `root` cannot be a workspace root; undefined when it can. */
function rootProblem(root: string, roots: WorkspaceRoots): string | undefined {
  const problem = protectedFolderProblem(root, roots);
  if (problem) return problem;
  // The default layout keeps workspaces in the data folder, which sits in the checkout: a root inside
  // the checkout is accepted only inside the data folder, never among the product's source files.
  if (isInside(root, roots.checkout) && !isInside(root, roots.dataDir))
    return `it is inside the product's checkout ${roots.checkout} (its source code), outside the data folder`;
  return undefined;
}

/** Every root of the rule, named for messages: the base, each organisation's, the allowed ones and `extra`. */
function namedRoots(roots: WorkspaceRoots, owner: WorkspaceOwner, extra: readonly string[]): Array<[string, string]> {
  const named: Array<[string, string]> = [];
  if (roots.base) named.push([roots.base, 'AGENTS_WORKSPACE_ROOT']);
  const own = orgWorkspaceRoot(roots, owner.org);
  if (own) named.push([own, `the workspace root of organisation ${owner.org}`]);
  for (const [org, root] of roots.orgRoots) named.push([root, `the workspace root of organisation ${org}`]);
  for (const root of roots.allowed) named.push([root, 'an allowed root (AGENTS_WORKSPACE_ALLOWED_ROOTS)']);
  for (const root of extra) named.push([root, "the forks' workspace root"]);
  return named;
}

/** "must lie under …": where a folder of this owner may be. */
export function whereWorkspaceMayLie(
  roots: WorkspaceRoots,
  owner: WorkspaceOwner,
  extra: readonly string[] = [],
): string {
  const own = orgWorkspaceRoot(roots, owner.org);
  const places = [
    own
      ? `under ${own} (the workspace root of organisation ${owner.org})`
      : `under a workspace root of organisation ${owner.org} (it has none: set AGENTS_WORKSPACE_ROOT or give it one in AGENTS_WORKSPACE_ROOTS)`,
  ];
  if (roots.allowed.length) places.push(`under an allowed root (${roots.allowed.join(', ')})`);
  for (const root of extra) places.push(`under ${root}`);
  const legacy = owner.org === DEFAULT_ORG ? legacyWorkspaceDir(roots, owner.agentId) : undefined;
  if (legacy) places.push(`be ${legacy} (its folder from before organisations)`);
  return `a workspace of organisation ${owner.org} must lie ${places.join(' or ')}`;
}

/**
 * Why `folder` (a real path: `..` and links resolved) cannot be `owner`'s workspace, or undefined when
 * it can. `roots` must be real paths too. `extraRoots` are further roots of the product's own
 * (the forks' workspaces), usable by the worker only, never given by a user.
 *
 * Refused whatever the roots: the filesystem root, the operating system's folders, a home or its
 * dot-folders, the data folder and its embedded database, the checkout, anything that contains one of
 * them or a root, and `/var`, `/opt`, `/run` except under a root. Then the folder must lie under the
 * organisation's root, an allowed root or an extra root; or be the default organisation's legacy
 * `<base>/<agentId>`. Never under another organisation's root, even where an allowed root covers it.
 */
export function workspacePlacementProblem(
  folder: string,
  roots: WorkspaceRoots,
  owner: WorkspaceOwner,
  extraRoots: readonly string[] = [],
): string | undefined {
  const problem = placementProblem(folder, roots, owner, extraRoots);
  return problem && `${problem}; ${whereWorkspaceMayLie(roots, owner, extraRoots)}`;
}

function placementProblem(
  folder: string,
  roots: WorkspaceRoots,
  owner: WorkspaceOwner,
  extraRoots: readonly string[],
): string | undefined {
  const named = namedRoots(roots, owner, extraRoots);
  const underARoot = named.some(([root]) => isStrictlyInside(folder, root));
  const protectedProblem = protectedFolderProblem(folder, roots);
  if (protectedProblem) return protectedProblem;
  const state = STATE_FOLDERS.find((dir) => isInside(folder, dir));
  if (state && !underARoot)
    return `it is under ${state}, the operating system's folder for services' state and installed applications, outside every workspace root`;
  // What contains a protected folder exposes it to the agent's tools as much as the folder itself.
  const contained: Array<[string, string]> = [
    [roots.dataDir, 'the data folder (DATA_DIR), which holds the embedded database'],
    [roots.checkout, "the product's checkout (its source code)"],
    [HOMES_FOLDER, "the users' homes"],
    [ROOT_HOME, 'the home /root'],
    ...roots.homes.map((home): [string, string] => [home, `the home ${home}`]),
    ...SYSTEM_FOLDERS.map((dir): [string, string] => [dir, 'a folder of the operating system']),
    ...STATE_FOLDERS.map((dir): [string, string] => [dir, 'a folder of the operating system']),
  ];
  for (const [dir, what] of contained) if (isStrictlyInside(dir, folder)) return `it contains ${dir}, ${what}`;
  for (const [root, what] of named) {
    if (folder === root) return `it is ${root}, ${what}, itself`;
    if (isStrictlyInside(root, folder)) return `it contains ${root}, ${what}`;
  }
  // Inside the data folder or the checkout only within a root that is itself inside them (the default
  // `<DATA_DIR>/workspaces`): a root such as /tmp above them does not open their other files.
  for (const [dir, what] of [
    [roots.dataDir, 'the data folder (DATA_DIR)'],
    [roots.checkout, "the product's checkout"],
  ] as const) {
    if (
      isStrictlyInside(folder, dir) &&
      !named.some(([root]) => isStrictlyInside(root, dir) && isStrictlyInside(folder, root))
    )
      return `it is inside ${dir}, ${what}, outside the workspace roots there`;
  }
  const legacy = owner.org === DEFAULT_ORG ? legacyWorkspaceDir(roots, owner.agentId) : undefined;
  if (legacy && folder === legacy) return undefined;
  for (const [org, root] of roots.orgRoots) {
    if (org !== owner.org && isStrictlyInside(folder, root))
      return `it lies under ${root}, the workspace root of organisation ${org}, not of ${owner.org}`;
  }
  const own = orgWorkspaceRoot(roots, owner.org);
  if (own && isStrictlyInside(folder, own)) return undefined;
  if (roots.base && isStrictlyInside(folder, roots.base)) {
    const other = path.join(roots.base, folder.slice(roots.base.length + 1).split('/')[0]!);
    return `it lies under ${other}, another organisation's root or another agent's folder, not in organisation ${owner.org}'s`;
  }
  if (roots.allowed.some((root) => isStrictlyInside(folder, root))) return undefined;
  if (extraRoots.some((root) => isStrictlyInside(folder, root))) return undefined;
  return 'it is outside every workspace root';
}

/** The same roots with every folder mapped (to its real path, by `ensureWorkspaceDir`). */
export function mapWorkspaceRoots(roots: WorkspaceRoots, map: (folder: string) => string): WorkspaceRoots {
  return {
    base: roots.base && map(roots.base),
    orgRoots: new Map([...roots.orgRoots].map(([org, root]) => [org, map(root)])),
    allowed: roots.allowed.map(map),
    dataDir: map(roots.dataDir),
    checkout: map(roots.checkout),
    homes: roots.homes.map(map),
  };
}
