/**
 * Makes git safe to run in a repository whose configuration the agent (or whoever made the repository)
 * controls. A repository's own config can make "read-only" commands run programs: `core.fsmonitor`
 * on `git status`, `diff.external` and textconv drivers on `git diff`/`log`/`show`/`blame`, filter
 * drivers on `git add`/`status`, hooks on `git commit`/`checkout`, `credential.helper`/`core.askPass` on
 * anything that authenticates, `remote.<name>.uploadpack` on `git fetch`, `gpg.program` with
 * `commit.gpgSign`. Emptying the global and system config does not help (that was reproduced on git
 * 2.39); command-line configuration wins over the repository's, so every git invocation gets:
 *
 * 1. fixed `-c` overrides (`GIT_HARDENING_CONFIG`) and environment (`GIT_HARDENING_ENV`);
 * 2. `--no-ext-diff --no-textconv` after `diff`/`log`/`show` (`--no-textconv` after `blame`/`grep`);
 * 3. an empty override for every command-running driver key found in the repository's config and in
 *    its submodules' configs (driver names are free-form, so they are looked up before each run);
 *    `remote.<name>.uploadpack`/`receivepack` cannot be overridden (git keeps the first value it
 *    reads), so a repository that sets one is refused for commands that contact a remote;
 * 4. `submodule.<name>.ignore=all` for every submodule, so status and diff do not descend into them;
 * 5. for `push`, refspecs without a destination made explicit, so `remote.<name>.push` cannot redirect
 *    `git push origin feature` to `main`; for `fetch`, `--no-prune --no-prune-tags` first, so pruning
 *    set in the repository config does not delete local refs.
 *
 * Known gap: a repository nested two levels deep that is neither registered in `.gitmodules` nor kept
 * under `.git/modules` is not scanned.
 */
import { execFile, spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { GIT_PROBE_OUTPUT_BYTES, GIT_PROBE_TIMEOUT_MS, MAX_SCANNED_GIT_DIRS, MAX_SUBMODULE_PATH_DEPTH } from './limits';
import { splitGitArgv } from './git-argv';
import { prepareCommand } from './sandbox';

/** `-c` values put before every git subcommand. */
export const GIT_HARDENING_CONFIG: readonly string[] = [
  'core.fsmonitor=false',
  'core.hooksPath=/dev/null',
  'core.pager=cat',
  'diff.external=',
  'core.sshCommand=false',
  'protocol.ext.allow=never',
  // An empty value resets the helper list, so no helper from the repository config runs.
  'credential.helper=',
  'commit.gpgSign=false',
  'tag.gpgSign=false',
  'push.gpgSign=false',
  'log.showSignature=false',
  // Submodules are separate repositories with their own (unscanned) drivers: do not descend.
  'diff.ignoreSubmodules=all',
  'submodule.recurse=false',
  'fetch.recurseSubmodules=false',
  'push.recurseSubmodules=no',
  'push.followTags=false',
  // A workspace made to look like a bare repository (HEAD, config, objects/ written as plain files) is
  // never picked up by discovery; only an explicit --git-dir (denied to the agent) opens one.
  'safe.bareRepository=explicit',
];

/**
 * Environment for every git process. Empty `GIT_ASKPASS` / `GIT_PROXY_COMMAND` are deliberate: git
 * then ignores `core.askPass` / `core.gitProxy` from config and runs nothing.
 */
export const GIT_HARDENING_ENV: Readonly<Record<string, string>> = {
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_TERMINAL_PROMPT: '0',
  GIT_PAGER: 'cat',
  GIT_EDITOR: 'false',
  GIT_SEQUENCE_EDITOR: 'false',
  GIT_ASKPASS: '',
  GIT_PROXY_COMMAND: '',
};

/** Config keys whose values git runs as programs; matched against the lower-cased key. */
const COMMAND_RUNNING_KEYS: readonly RegExp[] = [
  /^filter\..+\.(clean|smudge|process)$/,
  /^diff\..+\.(command|textconv)$/,
  /^merge\..+\.driver$/,
  /^gpg\.(.+\.)?program$/,
  /^gpg\.ssh\.defaultkeycommand$/,
  /^(difftool|mergetool)\..+\.cmd$/,
  /^submodule\..+\.update$/,
  /^core\.(gitproxy|alternaterefscommand)$/,
];

/**
 * Keys where git keeps the FIRST value it reads, so the repository's value beats any `-c` override.
 * A repository that sets one is refused for commands that contact a remote.
 */
const UNOVERRIDABLE_COMMAND_KEY = /^remote\..+\.(uploadpack|receivepack)$/;

/** Subcommands that start a transport, and so run `remote.<name>.uploadpack` / `receivepack`. */
const REMOTE_CONTACTING_SUBCOMMANDS = new Set([
  'fetch',
  'pull',
  'push',
  'ls-remote',
  'remote',
  'submodule',
  'clone',
  'archive',
]);

const SUBMODULE_KEY = /^submodule\.(.+)\.[^.]+$/i;

/** A branch name the push rewrite may qualify with `refs/heads/`. */
const PUSH_BRANCH_NAME = /^(?!-)(?!.*\.\.)[A-Za-z0-9._/-]+$/;

export class GitHardeningError extends Error {
  override readonly name = 'GitHardeningError';
}

export interface GitProbeOptions {
  /** Absolute path of the git binary (resolved on the runner's PATH, never the workspace). */
  git: string;
  cwd: string;
  /** The workspace: probes run in the same sandbox as the command, with it as the only writable path. */
  workspace: string;
  env: Record<string, string>;
  signal?: AbortSignal;
}

/** `['git', …]` as it will be run: hardening options around the model's global options and subcommand. */
export async function hardenGitArgv(argv: readonly string[], probe: GitProbeOptions): Promise<string[]> {
  const line = splitGitArgv(argv);
  const fixed = GIT_HARDENING_CONFIG.flatMap((setting) => ['-c', setting]);
  if (line.subcommand === undefined) return ['git', ...fixed, ...line.globals];
  const { overrides, unoverridable } = await repositoryOverrides(probe);
  if (unoverridable.length > 0 && REMOTE_CONTACTING_SUBCOMMANDS.has(line.subcommand)) {
    throw new GitHardeningError(
      `refusing \`git ${line.subcommand}\`: repository config sets ${unoverridable.join(', ')}, ` +
        'a program git would run that command-line configuration cannot override',
    );
  }
  let args = [...line.args];
  if (line.subcommand === 'diff' || line.subcommand === 'log' || line.subcommand === 'show') {
    args = ['--no-ext-diff', '--no-textconv', ...args];
  } else if (line.subcommand === 'blame' || line.subcommand === 'grep') {
    args = ['--no-textconv', ...args];
  } else if (line.subcommand === 'push') {
    args = explicitPushRefspecs(args);
  } else if (line.subcommand === 'fetch') {
    // `remote.<name>.prune` / `pruneTags` in the repository config would delete local refs on a plain
    // `git fetch`; an explicit (approved) `--prune` after these still wins.
    args = ['--no-prune', '--no-prune-tags', ...args];
  }
  return [
    'git',
    ...fixed,
    ...overrides.flatMap((setting) => ['-c', setting]),
    ...line.globals,
    line.subcommand,
    ...args,
  ];
}

/** `git push origin feature` → `git push origin refs/heads/feature:refs/heads/feature`. */
export function explicitPushRefspecs(args: readonly string[]): string[] {
  const out: string[] = [];
  let seenRemote = false;
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i] as string;
    out.push(arg);
    if (arg === '-o' || arg === '--push-option') {
      if (i + 1 < args.length) out.push(args[i + 1] as string);
      i += 1;
      continue;
    }
    if (arg.startsWith('-')) continue;
    if (!seenRemote) {
      seenRemote = true;
      continue;
    }
    if (arg !== 'HEAD' && !arg.includes(':') && PUSH_BRANCH_NAME.test(arg)) {
      const ref = arg.startsWith('refs/') ? arg : `refs/heads/${arg}`;
      out[out.length - 1] = `${ref}:${ref}`;
    }
  }
  return out;
}

export interface RepositoryOverrides {
  /** `key=value` settings to pass with `-c`. */
  overrides: string[];
  /** Command-running keys that are set and cannot be overridden (see `UNOVERRIDABLE_COMMAND_KEY`). */
  unoverridable: string[];
}

/**
 * Empty overrides for command-running keys in the repository's config and its submodules' configs,
 * plus `submodule.<name>.ignore=all` for every submodule. Outside a repository there is nothing to
 * override. Throws `GitHardeningError` for a key that cannot be written on the command line.
 */
export async function repositoryOverrides(probe: GitProbeOptions): Promise<RepositoryOverrides> {
  const location = await gitOutput(['rev-parse', '--git-common-dir', '--show-cdup'], probe);
  if (location === undefined) return { overrides: [], unoverridable: [] };
  const [commonDirLine, cdupLine] = location.split('\n');
  const commonDir = path.resolve(probe.cwd, commonDirLine ?? '.git');
  const topLevel = cdupLine === undefined ? undefined : path.resolve(probe.cwd, cdupLine || '.');

  const keys = new Set<string>();
  const unoverridable = new Set<string>();
  const submoduleNames = new Set<string>();
  const addConfig = (listing: string | undefined) => {
    for (const key of configKeys(listing ?? '')) {
      if (COMMAND_RUNNING_KEYS.some((pattern) => pattern.test(key.toLowerCase()))) keys.add(key);
      if (UNOVERRIDABLE_COMMAND_KEY.test(key.toLowerCase())) unoverridable.add(key);
      const submodule = SUBMODULE_KEY.exec(key);
      if (submodule?.[1]) submoduleNames.add(submodule[1]);
    }
  };

  addConfig(await requiredGitOutput(['config', '--null', '--list'], probe));
  if (topLevel !== undefined) {
    const gitmodules = path.join(topLevel, '.gitmodules');
    const fromFile = (await exists(gitmodules)) ? ['--file', gitmodules] : ['--blob', ':.gitmodules'];
    addConfig(await gitOutput(['config', ...fromFile, '--null', '--list'], probe));
  }
  const nestedGitDirs = await submoduleGitDirs(commonDir, topLevel, probe);
  for (const gitDir of nestedGitDirs) {
    addConfig(await requiredGitOutput([`--git-dir=${gitDir}`, 'config', '--null', '--list'], probe));
  }

  const overrides: string[] = [];
  for (const key of keys) {
    if (key.includes('='))
      throw new GitHardeningError(`repository config key ${JSON.stringify(key)} cannot be overridden safely`);
    overrides.push(`${key}=`);
  }
  for (const name of submoduleNames) {
    if (name.includes('='))
      throw new GitHardeningError(`submodule name ${JSON.stringify(name)} cannot be overridden safely`);
    overrides.push(`submodule.${name}.ignore=all`);
  }
  return { overrides, unoverridable: [...unoverridable] };
}

/** Keys of `git config --null --list` output (`key\nvalue\0` per entry; `key\0` for a bare boolean). */
function configKeys(listing: string): string[] {
  return listing
    .split('\0')
    .filter((entry) => entry !== '')
    .map((entry) => entry.split('\n', 1)[0] as string);
}

/** Git directories of submodules: everything under `<common-dir>/modules`, plus gitlinks' own `.git` directories. */
async function submoduleGitDirs(
  commonDir: string,
  topLevel: string | undefined,
  probe: GitProbeOptions,
): Promise<string[]> {
  const found = new Set<string>();
  // `<gitdir>/modules/<name>` holds each submodule's git directory (names may contain '/'), and a
  // submodule's own submodules sit in its `modules/` again.
  const walk = async (dir: string, depth: number): Promise<void> => {
    if (found.size >= MAX_SCANNED_GIT_DIRS || depth > MAX_SUBMODULE_PATH_DEPTH) return;
    const entries = await fs.readdir(dir, { withFileTypes: true }).catch(() => []);
    const isGitDir = entries.some((entry) => entry.name === 'HEAD') && entries.some((entry) => entry.name === 'config');
    if (isGitDir) {
      found.add(dir);
      await walk(path.join(dir, 'modules'), depth + 1);
      return;
    }
    for (const entry of entries) if (entry.isDirectory()) await walk(path.join(dir, entry.name), depth + 1);
  };
  await walk(path.join(commonDir, 'modules'), 0);

  if (topLevel !== undefined) {
    for (const gitlink of await gitlinkPaths(probe)) {
      if (found.size >= MAX_SCANNED_GIT_DIRS) break;
      const dotGit = path.join(topLevel, gitlink, '.git');
      const stat = await fs.stat(dotGit).catch(() => undefined);
      if (stat?.isDirectory()) found.add(dotGit);
      else if (stat?.isFile()) {
        const pointer = /^gitdir: (.+)$/m.exec(await fs.readFile(dotGit, 'utf8'));
        if (pointer?.[1]) found.add(path.resolve(path.dirname(dotGit), pointer[1].trim()));
      }
    }
  }
  if (found.size >= MAX_SCANNED_GIT_DIRS) {
    throw new GitHardeningError(`more than ${MAX_SCANNED_GIT_DIRS} submodule repositories: refusing to run git here`);
  }
  return [...found];
}

/** Paths of gitlink (mode 160000) index entries, streamed so a large index is not buffered whole. */
async function gitlinkPaths(probe: GitProbeOptions): Promise<string[]> {
  const command = await prepareCommand(probe.git, [...hardeningPrefix(), 'ls-files', '--stage', '-z'], {
    workspace: probe.workspace,
    cwd: probe.cwd,
    env: probe.env,
  });
  return new Promise((resolve) => {
    const child = spawn(command.file, command.args, {
      cwd: command.cwd,
      env: command.env,
      stdio: ['ignore', 'pipe', 'ignore'],
      signal: probe.signal,
      timeout: GIT_PROBE_TIMEOUT_MS,
    });
    const paths: string[] = [];
    let pending = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      const entries = (pending + chunk).split('\0');
      pending = entries.pop() ?? '';
      for (const entry of entries) {
        if (entry.startsWith('160000 ')) paths.push(entry.slice(entry.indexOf('\t') + 1));
      }
    });
    child.on('error', () => resolve(paths));
    child.on('close', () => resolve(paths));
  });
}

export function hardeningPrefix(): string[] {
  return GIT_HARDENING_CONFIG.flatMap((setting) => ['-c', setting]);
}

/** Like `gitOutput`, but a failure stops the run: git must not run with config we could not read. */
async function requiredGitOutput(args: readonly string[], probe: GitProbeOptions): Promise<string> {
  const output = await gitOutput(args, probe);
  if (output === undefined) throw new GitHardeningError(`could not read git configuration (git ${args.join(' ')})`);
  return output;
}

async function gitOutput(args: readonly string[], probe: GitProbeOptions): Promise<string | undefined> {
  const command = await prepareCommand(probe.git, [...hardeningPrefix(), ...args], {
    workspace: probe.workspace,
    cwd: probe.cwd,
    env: probe.env,
  });
  return new Promise((resolve) => {
    execFile(
      command.file,
      command.args,
      {
        cwd: command.cwd,
        env: command.env,
        signal: probe.signal,
        timeout: GIT_PROBE_TIMEOUT_MS,
        maxBuffer: GIT_PROBE_OUTPUT_BYTES,
      },
      (error, stdout) => resolve(error ? undefined : stdout.replace(/\n$/, '')),
    );
  });
}

async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}
