/**
 * Shell command governance: every invocation gets a tier (see `tiers.ts`).
 *
 * - allow: a curated list of read-only commands, checked argument by argument (`find` without
 *   `-exec`/`-delete`, `sort` without `-o` …), `--version` of a few tools, and the git operations of
 *   `classify-git.ts`.
 * - deny: what must never run even with approval: force push, recursive wipes of `/`, a top-level
 *   directory, a home directory or the workspace itself; inline shell scripts (`sh -c`, which hide
 *   commands from this classifier); shell builtins, which have no effect without a shell.
 * - approval: everything else, including every command not on a list.
 *
 * Wrappers (`sudo`, `env`, `timeout`, `xargs` …) and `find -exec` are looked through, so
 * `env git push --force` is denied like `git push --force`. A command given by path (`/usr/bin/ls`,
 * `./ls`) is never allowed: the name on the allow list is looked up on the runner's fixed PATH, a path
 * could be any program.
 */
import path from 'node:path';
import type { ParsedCommand } from './parse';
import { branchCreatedBy, classifyGit } from './classify-git';
import { MAX_WRAPPER_DEPTH } from './limits';
import { hasLongOption, hasShortOption, isLongOptionFor, isShortCluster, positionalArguments } from './options';
import { allow, approval, deny, displayArgv, strictest, type ShellDecision, type ShellPolicyContext } from './tiers';

export type { ShellDecision, ShellPolicyContext, ShellTier } from './tiers';

/** Read-only commands; the check returns why a particular use is not read-only, if it is not. */
const READ_ONLY_COMMANDS = new Map<string, (args: string[]) => string | undefined>([
  [
    'ls',
    (args) =>
      hasShortOption(args, 'L') || hasLongOption(args, ['dereference'])
        ? 'with -L follows symbolic links out of the workspace'
        : undefined,
  ],
  ['cat', () => undefined],
  ['head', () => undefined],
  ['tail', () => undefined],
  ['wc', () => undefined],
  [
    'grep',
    // -R follows every symbolic link it meets, out of the workspace too (-r follows only those named).
    (args) =>
      hasShortOption(args, 'R') || hasLongOption(args, ['dereference-recursive'])
        ? 'with -R follows symbolic links out of the workspace'
        : undefined,
  ],
  ['pwd', () => undefined],
  ['echo', () => undefined],
  ['which', () => undefined],
  ['stat', () => undefined],
  // GNU diff -r follows every symbolic link it meets, out of the workspace too.
  [
    'diff',
    (args) =>
      hasShortOption(args, 'r') || hasLongOption(args, ['recursive'])
        ? 'with -r follows symbolic links out of the workspace'
        : undefined,
  ],
  ['du', () => undefined],
  ['df', () => undefined],
  ['find', findProblem],
  [
    'date',
    (args) =>
      hasShortOption(args, 's') || hasLongOption(args, ['set']) ? 'with -s/--set changes the system clock' : undefined,
  ],
  [
    'sort',
    (args) =>
      hasShortOption(args, 'o') || hasLongOption(args, ['output', 'compress-program'])
        ? 'with -o/--output writes a file, and --compress-program runs a program'
        : undefined,
  ],
  ['uniq', (args) => (positionalArguments(args).length > 1 ? 'with a second file name writes that file' : undefined)],
  [
    'tree',
    (args) =>
      hasShortOption(args, 'oR')
        ? 'with -o or -R writes files'
        : hasShortOption(args, 'l')
          ? 'with -l follows symbolic links out of the workspace'
          : undefined,
  ],
  [
    'file',
    (args) =>
      hasShortOption(args, 'C') || hasLongOption(args, ['compile'])
        ? 'with -C compiles and writes a magic file'
        : undefined,
  ],
]);

/** Tools whose `--version` is harmless (anything else they do runs code or installs packages). */
const VERSION_FLAGS = new Map<string, readonly string[]>([
  ['node', ['--version', '-v']],
  ['npm', ['--version', '-v']],
  ['python', ['--version', '-V']],
  ['python3', ['--version', '-V']],
]);

/** `find` actions that run commands, delete, or write files. */
const FIND_EXEC_ACTIONS = ['-exec', '-execdir', '-ok', '-okdir'];
const FIND_WRITING_ACTIONS = ['-delete', '-fprint', '-fprint0', '-fprintf', '-fls'];
/** `find` options that follow symbolic links (and so can walk out of the workspace). */
const FIND_FOLLOWING_OPTIONS = ['-L', '-H', '-follow'];

/** Builtins: without a shell they do nothing (cd, export) or exist to run other code (eval, source). */
const SHELL_BUILTINS = new Set([
  'cd',
  'pushd',
  'popd',
  'export',
  'unset',
  'set',
  'shopt',
  'alias',
  'unalias',
  'source',
  '.',
  'eval',
  'exec',
  'builtin',
  'declare',
  'typeset',
  'local',
  'readonly',
  'let',
  'trap',
  'ulimit',
  'umask',
  'hash',
  'enable',
  'history',
  'fc',
  'jobs',
  'fg',
  'bg',
  'wait',
  'disown',
  'suspend',
  'logout',
  'exit',
  'return',
  'shift',
  'complete',
  'compgen',
  'read',
  'mapfile',
  'readarray',
]);

/** Shells: with `-c` they run an inline script, which would bypass this classifier. */
const SHELLS = new Set(['sh', 'bash', 'dash', 'zsh', 'ksh', 'mksh', 'ash', 'fish', 'csh', 'tcsh', 'rbash']);

/** Commands whose `-c` (or whose arguments, for `watch`) is a shell script. */
const SHELL_STRING_RUNNERS = new Map<string, (args: string[]) => boolean>([
  ['su', (args) => hasShortOption(args, 'c') || hasLongOption(args, ['command', 'session-command'])],
  ['script', (args) => hasShortOption(args, 'c') || hasLongOption(args, ['command'])],
  ['flock', (args) => hasShortOption(args, 'c') || hasLongOption(args, ['command'])],
  ['watch', (args) => !(hasShortOption(args, 'x') || hasLongOption(args, ['exec']))],
  // `env -S 'cmd args'` splits a string into a command line itself.
  ['env', (args) => hasShortOption(args, 'S') || hasLongOption(args, ['split-string'])],
]);

/** Commands that run another command given in their arguments. */
const WRAPPERS = new Set([
  'sudo',
  'doas',
  'env',
  'nice',
  'nohup',
  'timeout',
  'time',
  'command',
  'xargs',
  'stdbuf',
  'ionice',
  'setsid',
  'chroot',
  'flock',
  'watch',
  'strace',
  'ltrace',
  'unbuffer',
  'taskset',
  'chrt',
  'runuser',
  'busybox',
  'npx',
  'nsenter',
  'unshare',
  'firejail',
  'caffeinate',
]);

/** Wrapped commands are looked for among the first few non-option arguments (`timeout 10 cmd`, `sudo -u root cmd`). */
const WRAPPED_COMMAND_CANDIDATES = 4;

const FILE_CHANGING = new Set([
  'rm',
  'rmdir',
  'unlink',
  'mv',
  'cp',
  'ln',
  'touch',
  'mkdir',
  'truncate',
  'tee',
  'install',
  'chmod',
  'chown',
  'chgrp',
  'shred',
  'patch',
  'sed',
  'awk',
  'gawk',
  'perl',
]);
const NETWORK = new Set([
  'curl',
  'wget',
  'ssh',
  'scp',
  'sftp',
  'rsync',
  'nc',
  'ncat',
  'netcat',
  'telnet',
  'ftp',
  'socat',
]);
const PACKAGE_MANAGERS = new Set([
  'npm',
  'pnpm',
  'yarn',
  'bun',
  'pip',
  'pip3',
  'pipx',
  'uv',
  'poetry',
  'conda',
  'apt',
  'apt-get',
  'dpkg',
  'brew',
  'cargo',
  'go',
  'gem',
  'bundle',
  'composer',
]);

/** Commands that destroy a filesystem or a block device. */
const DEVICE_DESTROYERS = new Set(['mkfs', 'mke2fs', 'wipefs', 'fdisk', 'sfdisk', 'parted', 'mkswap']);

/**
 * The tier of one invocation. Pure and synchronous; `ctx` carries what only the caller knows (which
 * branches are protected, which exist).
 */
export function classifyInvocation(argv: readonly string[], ctx: ShellPolicyContext = {}): ShellDecision {
  return classifyAt(argv, ctx, 0);
}

/**
 * The tier of a parsed command: the strictest over its invocations. A parse failure is `deny`: a
 * string that cannot be reduced to clean invocations fails closed and never reaches an approver.
 */
export function classifyCommand(parsed: ParsedCommand, ctx: ShellPolicyContext = {}): ShellDecision {
  if (!parsed.ok) return deny(`the command cannot be reduced to plain invocations: ${parsed.reason}`);
  let result: ShellDecision | undefined;
  const existing = ctx.existingBranches ? [...ctx.existingBranches] : undefined;
  for (const argv of parsed.invocations) {
    const decision = classifyInvocation(argv, { ...ctx, existingBranches: existing });
    const labelled =
      parsed.invocations.length > 1 && decision.tier !== 'allow'
        ? { tier: decision.tier, reason: `${displayArgv(argv)}: ${decision.reason}` }
        : decision;
    result = result ? strictest(result, labelled) : labelled;
    const created = branchCreatedBy(argv);
    if (created !== undefined && existing) existing.push(created);
  }
  if (!result) return deny('the command has no invocations');
  if (result.tier === 'allow' && parsed.invocations.length > 1) {
    return allow(`all ${parsed.invocations.length} commands are allowed: ${result.reason}`);
  }
  return result;
}

function classifyAt(argv: readonly string[], ctx: ShellPolicyContext, depth: number): ShellDecision {
  const [name, ...args] = argv;
  if (name === undefined || name === '') return deny('the invocation is empty');
  if (depth > MAX_WRAPPER_DEPTH) return deny('commands are wrapped too deeply to be judged');

  if (name.includes('/')) {
    const asBareName = classifyAt([path.posix.basename(name), ...args], ctx, depth + 1);
    if (asBareName.tier === 'deny') return asBareName;
    return approval(`\`${name}\` is run by path; only bare command names from the allow list run without approval`);
  }
  if (name === 'git') return classifyGit(argv, ctx);
  if (SHELL_BUILTINS.has(name)) {
    return deny(
      `\`${name}\` is a shell builtin and there is no shell: use the working-directory option or run the command directly`,
    );
  }
  if (SHELLS.has(name)) {
    if (args.some((arg) => isShortCluster(arg, 'c') || isLongOptionFor(arg, ['command']))) {
      return deny(
        `\`${name} -c\` runs an inline shell script, which bypasses command governance: run the commands directly, joined with &&`,
      );
    }
    return approval(`\`${name}\` runs a shell script`);
  }
  const runsShellString = SHELL_STRING_RUNNERS.get(name);
  if (runsShellString?.(args)) {
    return deny(`\`${name}\` here runs a shell string, which bypasses command governance`);
  }
  if (WRAPPERS.has(name)) return classifyWrapper(name, args, ctx, depth);

  const readOnlyCheck = READ_ONLY_COMMANDS.get(name);
  const nameList = args.find(
    (arg) =>
      isLongOptionFor(arg, ['files0-from', 'files-from']) ||
      arg === '-files0-from' ||
      (name === 'file' && isShortCluster(arg, 'f')),
  );
  if (readOnlyCheck && nameList) {
    return approval(
      `\`${name} ${nameList}\` reads the names of the files to open from a file, so they are not judged as paths`,
    );
  }
  if (readOnlyCheck) {
    if (name === 'find') {
      const embedded = classifyFindExec(args, ctx, depth);
      if (embedded) return embedded;
    }
    const problem = readOnlyCheck(args);
    return problem ? approval(`\`${name}\` ${problem}`) : allow(`\`${name}\` only reads`);
  }
  const versionFlags = VERSION_FLAGS.get(name);
  if (versionFlags && args.length === 1 && versionFlags.includes(args[0] as string)) {
    return allow(`\`${name} ${args[0]}\` only prints a version`);
  }

  const destructive = destructiveReason(name, args);
  if (destructive) return deny(destructive);

  if (name === 'rm' || name === 'rmdir' || name === 'unlink' || name === 'shred')
    return approval(`\`${name}\` deletes files`);
  if (FILE_CHANGING.has(name)) return approval(`\`${name}\` changes files (or can run commands)`);
  if (NETWORK.has(name)) return approval(`\`${name}\` uses the network`);
  if (PACKAGE_MANAGERS.has(name)) return approval(`\`${name}\` installs packages or runs project scripts`);
  return approval(`\`${name}\` is not on the read-only allow list`);
}

function classifyWrapper(name: string, args: string[], ctx: ShellPolicyContext, depth: number): ShellDecision {
  let result = approval(`\`${name}\` runs another command`);
  let candidates = 0;
  for (let i = 0; i < args.length && candidates < WRAPPED_COMMAND_CANDIDATES; i += 1) {
    const arg = args[i] as string;
    if (arg.startsWith('-') || /^[A-Za-z_][A-Za-z0-9_]*=/.test(arg)) continue;
    candidates += 1;
    const inner = classifyAt(args.slice(i), ctx, depth + 1);
    if (inner.tier === 'deny')
      result = strictest(result, { tier: 'deny', reason: `${displayArgv(args.slice(i))}: ${inner.reason}` });
  }
  return result;
}

/** `find … -exec cmd … ;`: the embedded command is judged like any other; at least approval. */
function classifyFindExec(args: string[], ctx: ShellPolicyContext, depth: number): ShellDecision | undefined {
  let result: ShellDecision | undefined;
  for (let i = 0; i < args.length; i += 1) {
    if (!FIND_EXEC_ACTIONS.includes(args[i] as string)) continue;
    const end = args.findIndex((arg, j) => j > i && (arg === ';' || arg === '+'));
    const embedded = args.slice(i + 1, end === -1 ? undefined : end);
    const inner = embedded.length > 0 ? classifyAt(embedded, ctx, depth + 1) : approval('empty -exec');
    const decision = strictest(approval(`\`find ${args[i]}\` runs a command for each file`), inner);
    result = result ? strictest(result, decision) : decision;
  }
  return result;
}

function findProblem(args: string[]): string | undefined {
  const writing = args.find((arg) => FIND_WRITING_ACTIONS.includes(arg));
  if (writing) return `with ${writing} deletes or writes files`;
  const following = args.find((arg) => FIND_FOLLOWING_OPTIONS.includes(arg));
  return following ? `with ${following} follows symbolic links out of the workspace` : undefined;
}

function destructiveReason(name: string, args: string[]): string | undefined {
  if (DEVICE_DESTROYERS.has(name) || name.startsWith('mkfs.')) return `\`${name}\` destroys a filesystem or device`;
  if (name === 'dd' && args.some((arg) => arg.startsWith('of=/dev/'))) return '`dd of=/dev/…` overwrites a device';
  const recursive = hasShortOption(args, 'rR') || hasLongOption(args, ['recursive']);
  if (name === 'rm') {
    if (hasLongOption(args, ['no-preserve-root'])) return '`rm --no-preserve-root` is always denied';
    const target = recursive ? positionalArguments(args).find(isWipeTarget) : undefined;
    if (target !== undefined)
      return `\`rm -r ${target}\` would wipe the root, a top-level or home directory, or the workspace`;
  }
  if (
    (name === 'chmod' || name === 'chown' || name === 'chgrp') &&
    (hasShortOption(args, 'R') || hasLongOption(args, ['recursive']))
  ) {
    const target = positionalArguments(args).find(isWipeTarget);
    if (target !== undefined) return `\`${name} -R ${target}\` would change a root, top-level or home directory tree`;
  }
  return undefined;
}

/** `/`, a top-level directory, a home directory, `~`/`$HOME`, or the workspace (`.`) or above (`..`). */
function isWipeTarget(target: string): boolean {
  if (/^~[^/]*\/*$/.test(target) || /^\$\{?HOME\}?\/*$/.test(target)) return true;
  const normalised = path.posix.normalize(target).replace(/\/+$/, '');
  if (target.startsWith('/')) {
    const segments = normalised.split('/').filter(Boolean);
    if (segments.length <= 1) return true;
    return (segments[0] === 'home' || segments[0] === 'Users') && segments.length === 2;
  }
  return normalised === '' || normalised === '.' || /^\.\.(\/\.\.)*$/.test(normalised);
}
