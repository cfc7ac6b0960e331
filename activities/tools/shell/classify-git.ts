/**
 * Git governance: safe operations run, risky ones (checkout or switch of an existing
 * branch, merge, rebase, push to a protected branch) wait for approval, destructive ones never run.
 *
 * Where the design document and its reference code disagree, the document is the spec: force push
 * (`-f`, `--force`, `--force-with-lease`, `--force-if-includes`, `--mirror`, a `+refspec`) is always
 * denied, with no workspace exemption. Global options that let the command line change git's
 * configuration or which program or repository it uses are denied, and only builtin subcommands from
 * explicit lists are accepted, because a repository-local alias can be `!sh …`.
 */
import {
  classifyBranchMove,
  classifyFetch,
  classifyLsRemote,
  classifyPush,
  type GitHandler,
} from './classify-git-branches';
import { splitGitArgv } from './git-argv';
import { judgeConfigKey } from '../../security/git-config-policy';
import { hasShortOption, isLongOptionFor, longOptionName, positionalArguments } from './options';
import { allow, approval, deny, type ShellDecision, type ShellPolicyContext } from './tiers';

export { branchCreatedBy } from './classify-git-branches';

/** Global options that change configuration, the repository, the work tree or the programs git runs. */
const DENIED_GLOBAL_OPTIONS = [
  '-c',
  '-C',
  '--config-env',
  '--exec-path',
  '--git-dir',
  '--work-tree',
  '--super-prefix',
  '--upload-pack',
  '--receive-pack',
  '--exec',
];

/** Global options with no effect on what git executes or where. */
const SAFE_GLOBAL_OPTIONS = new Set([
  '--no-pager',
  '-P',
  '--no-replace-objects',
  '--literal-pathspecs',
  '--glob-pathspecs',
  '--noglob-pathspecs',
  '--icase-pathspecs',
  '--no-optional-locks',
  '--no-lazy-fetch',
  '--no-advice',
]);

/** Options (any subcommand) naming a program for git to run: `--upload-pack`, `--receive-pack`, `--exec`. */
const PROGRAM_OPTIONS = ['upload-pack', 'receive-pack', 'exec'];

/** Options that re-enable the diff drivers the runner switches off (`--no-ext-diff --no-textconv`). */
const DRIVER_OPTIONS = ['ext-diff', 'textconv'];

/**
 * Long options that write a file, or put a repository or its files somewhere chosen on the command
 * line, in any git subcommand (`git rev-list --output=…`, `git blame --output=…`, `git init
 * --template=…`). Git accepts any unique prefix of a long option, so `--out=x` means `--output=x`:
 * every prefix of these names needs approval, whatever the subcommand. A prefix that would be
 * ambiguous makes git refuse, so treating it as the dangerous option only ever errs towards asking.
 */
const FILE_WRITING_OPTIONS = [
  'output',
  'output-directory',
  'template',
  'separate-git-dir',
  'index-output',
  'lost-found',
  'shallow-file',
];

/** Long options of other commands that are exact names of harmless options, not abbreviations (`--text` is not `--textconv`). */
const EXACT_HARMLESS_OPTIONS = new Set(['text']);

/** Long options that run a program named on the command line or in configuration. */
const PROGRAM_RUNNING_OPTIONS = ['extcmd', 'tool'];

/** Config keys whose value git runs as a command, or which change where git looks for code or config. */
const COMMAND_CONFIG_KEYS: readonly RegExp[] = [
  /^core\.(fsmonitor|hookspath|sshcommand|pager|editor|askpass|gitproxy|worktree|attributesfile)$/,
  /^alias\./,
  /^diff\.external$/,
  /\.textconv$/,
  /^filter\./,
  /^diff\..+\.command$/,
  /^merge\..+\.driver$/,
  /^credential\./,
  /^gpg\./,
  /^remote\..+\.(uploadpack|receivepack|vcs|push|mirror)$/,
  /^pager\./,
  /^sequence\.editor$/,
  /^include\./,
  /^includeif\./,
  /^(difftool|mergetool|man|browser)\./,
  /^submodule\..+\.update$/,
  /^protocol\./,
  /^url\./,
  /^uploadpack\./,
  /^init\.templatedir$/,
  /^web\.browser$/,
  /^sendemail\./,
  /^ssh\./,
];

/** `git config` options that only read. */
const CONFIG_READ_OPTIONS = new Set([
  '--get',
  '--get-all',
  '--get-regexp',
  '--get-urlmatch',
  '--get-color',
  '--get-colorbool',
  '-l',
  '--list',
]);

/** `git config` options and (git ≥ 2.46) actions that write. */
const CONFIG_WRITE_OPTIONS = ['unset', 'unset-all', 'add', 'replace-all', 'remove-section', 'rename-section', 'edit'];
const CONFIG_WRITE_ACTIONS = new Set(['set', 'unset', 'edit', 'rename-section', 'remove-section']);

/** Subcommands that are never run: they exist to run programs named by configuration or a peer. */
const DENIED_SUBCOMMANDS = new Map<string, string>([
  ['difftool', 'runs the external diff tool configured in the repository'],
  ['mergetool', 'runs the external merge tool configured in the repository'],
  ['hook', 'runs repository hooks'],
  ['instaweb', 'starts a web server and a browser from configuration'],
  ['web--browse', 'starts a browser from configuration'],
  ['send-email', 'sends mail and runs commands from configuration'],
  ['imap-send', 'sends mail to an IMAP server'],
  ['daemon', 'starts a git server'],
  ['http-backend', 'is a server-side program'],
  ['upload-pack', 'is a server-side program'],
  ['receive-pack', 'is a server-side program'],
  ['upload-archive', 'is a server-side program'],
  ['shell', 'is a restricted login shell'],
  ['credential', 'reads or stores credentials'],
  ['credential-store', 'reads or stores credentials'],
  ['credential-cache', 'reads or stores credentials'],
  ['credential-cache--daemon', 'reads or stores credentials'],
  ['send-pack', 'takes a --receive-pack program'],
  ['fetch-pack', 'takes a --upload-pack program'],
  ['remote-ext', 'runs an arbitrary command as a transport'],
  ['remote-fd', 'is a transport helper'],
  ['cvsserver', 'is a server-side program'],
]);

/** Builtin subcommands that are legitimate but change history, the work tree or other repositories. */
const APPROVAL_SUBCOMMANDS = new Map<string, string>([
  ['merge', 'merges another branch into the current one'],
  ['rebase', 'rewrites the commits of the current branch'],
  ['pull', 'fetches and then merges or rebases'],
  ['reset', 'moves the branch and can discard uncommitted work (reset --hard)'],
  ['clean', 'deletes untracked files'],
  ['restore', 'discards uncommitted changes'],
  ['rm', 'deletes files'],
  ['mv', 'moves files'],
  ['cherry-pick', 'applies commits onto the current branch'],
  ['revert', 'creates commits that undo others'],
  ['am', 'applies patches as commits'],
  ['apply', 'changes files from a patch'],
  ['bisect', 'moves HEAD through history (and `bisect run` runs a command)'],
  ['clone', 'copies a repository into a new directory'],
  ['init', 'creates a repository'],
  ['init-db', 'creates a repository'],
  ['gc', 'rewrites the object store'],
  ['prune', 'deletes unreachable objects'],
  ['repack', 'rewrites the object store'],
  ['maintenance', 'rewrites the object store and can register scheduled jobs'],
  ['fsck', 'checks (and with --lost-found writes into) the object store'],
  ['notes', 'changes notes refs'],
  ['submodule', 'updates submodules (whose update setting can run a command)'],
  ['update-ref', 'moves refs directly'],
  ['symbolic-ref', 'moves refs directly'],
  ['replace', 'replaces objects'],
  ['filter-branch', 'rewrites history with shell filters'],
  ['filter-repo', 'rewrites history'],
  ['format-patch', 'writes patch files'],
  ['archive', 'writes an archive'],
  ['bundle', 'writes or reads bundles'],
  ['sparse-checkout', 'changes which files are checked out'],
  ['update-index', 'changes the index directly'],
  ['read-tree', 'changes the index directly'],
  ['write-tree', 'writes objects directly'],
  ['commit-tree', 'writes objects directly'],
  ['hash-object', 'writes objects directly'],
  ['mktag', 'writes objects directly'],
  ['mktree', 'writes objects directly'],
  ['pack-refs', 'rewrites the refs store'],
  ['fast-import', 'writes objects and refs'],
  ['fast-export', 'exports history'],
  ['help', 'opens a manual page viewer or a browser'],
  ['bugreport', 'writes a report file'],
  ['diagnose', 'writes a diagnostics archive'],
  ['rerere', 'changes recorded conflict resolutions'],
  ['merge-file', 'merges files in place'],
  ['merge-tree', 'performs a merge'],
  ['range-diff', 'compares commit ranges (not on the read-only list)'],
  ['request-pull', 'contacts a remote'],
  ['whatchanged', 'is not on the read-only list'],
  ['show-branch', 'is not on the read-only list'],
  ['diff-tree', 'is a plumbing diff not on the read-only list'],
  ['diff-files', 'is a plumbing diff not on the read-only list'],
  ['diff-index', 'is a plumbing diff not on the read-only list'],
  ['verify-commit', 'runs the signature verification program'],
  ['verify-tag', 'runs the signature verification program'],
  ['interpret-trailers', 'can edit files in place'],
  ['stripspace', 'is not on the read-only list'],
  ['column', 'is not on the read-only list'],
  ['check-ref-format', 'is not on the read-only list'],
  ['var', 'prints configured programs (editor, pager)'],
  ['unpack-objects', 'writes objects directly'],
  ['index-pack', 'writes objects directly'],
  ['pack-objects', 'writes pack files'],
  ['commit-graph', 'rewrites the commit graph'],
  ['multi-pack-index', 'rewrites pack indexes'],
  ['prune-packed', 'deletes objects'],
]);

export function classifyGit(argv: readonly string[], ctx: ShellPolicyContext): ShellDecision {
  const line = splitGitArgv(argv);
  const globalDecision = judgeGlobalOptions(line.globals);
  if (globalDecision) return globalDecision;

  const subcommand = line.subcommand;
  if (subcommand === undefined) {
    if (line.globals.length === 1 && (line.globals[0] === '--version' || line.globals[0] === '-v')) {
      return allow('`git --version` only prints the version');
    }
    return approval('`git` without a subcommand is not on the allow list');
  }
  const args = line.args;

  const optionDecision = judgeProgramAndDriverOptions(subcommand, args);
  if (optionDecision) return optionDecision;

  const deniedBecause = DENIED_SUBCOMMANDS.get(subcommand);
  if (deniedBecause) return deny(`\`git ${subcommand}\` ${deniedBecause}`);

  const handler = SUBCOMMAND_HANDLERS.get(subcommand);
  if (handler) return handler(args, ctx);

  const approvalBecause = APPROVAL_SUBCOMMANDS.get(subcommand);
  if (approvalBecause) return approval(`\`git ${subcommand}\` ${approvalBecause}`);

  return deny(
    `\`git ${subcommand}\` is not a builtin git subcommand this policy knows; ` +
      'repository aliases can run shell commands, so only listed subcommands are accepted',
  );
}

function judgeGlobalOptions(globals: readonly string[]): ShellDecision | undefined {
  for (let i = 0; i < globals.length; i += 1) {
    const option = globals[i] as string;
    const denied = DENIED_GLOBAL_OPTIONS.find((name) =>
      name.startsWith('--') ? option === name || option.startsWith(`${name}=`) : option.startsWith(name),
    );
    if (denied) {
      return deny(
        `git's global option ${denied} lets the command line change git's configuration, repository or the programs it runs`,
      );
    }
    if (SAFE_GLOBAL_OPTIONS.has(option) || option.startsWith('--namespace=')) continue;
    if (option === '--namespace') {
      i += 1;
      continue;
    }
    if ((option === '--version' || option === '-v') && globals.length === 1) continue;
    return approval(`git's global option ${option} is not on the allow list`);
  }
  return undefined;
}

function judgeProgramAndDriverOptions(subcommand: string, args: readonly string[]): ShellDecision | undefined {
  let writing: ShellDecision | undefined;
  for (const arg of args) {
    // After `--` everything is a path.
    if (arg === '--') break;
    if (EXACT_HARMLESS_OPTIONS.has(longOptionName(arg) ?? '')) continue;
    if (isLongOptionFor(arg, PROGRAM_OPTIONS)) {
      return deny(`\`${arg}\` names a program for git to run (--upload-pack / --receive-pack / --exec)`);
    }
    if (isLongOptionFor(arg, DRIVER_OPTIONS)) {
      return deny(`\`${arg}\` turns on external diff or textconv programs from repository configuration`);
    }
    if (isLongOptionFor(arg, PROGRAM_RUNNING_OPTIONS))
      return deny(`\`${arg}\` runs a program named on the command line or in configuration`);
    if (!writing && isLongOptionFor(arg, FILE_WRITING_OPTIONS)) {
      writing = approval(
        `\`git ${subcommand} ${arg}\` writes a file or a repository at a place chosen on the command line`,
      );
    }
  }
  if (writing) return writing;
  if ((subcommand === 'clone' || subcommand === 'ls-remote') && hasShortOption(args, 'u')) {
    return deny(`\`git ${subcommand} -u\` names an upload-pack program for git to run`);
  }
  return undefined;
}

const readOnly =
  (subcommand: string, problem?: (args: string[]) => string | undefined): GitHandler =>
  (args) => {
    const why = problem?.(args);
    return why ? approval(`\`git ${subcommand}\` ${why}`) : allow(`\`git ${subcommand}\` only reads the repository`);
  };

/** `branch`, `tag`: listing is read-only; anything else creates, deletes or changes refs. */
function listingOnly(
  subcommand: string,
  flags: ReadonlySet<string>,
  flagCluster: RegExp,
  optionsWithValue: readonly string[],
  listFlags: readonly string[],
): GitHandler {
  return (args) => {
    const listing = args.some((arg) => listFlags.includes(arg) || (flagCluster.test(arg) && arg.includes('l')));
    for (let i = 0; i < args.length; i += 1) {
      const arg = args[i] as string;
      if (flags.has(arg) || flagCluster.test(arg)) continue;
      if (optionsWithValue.some((name) => arg.startsWith(`${name}=`))) continue;
      if (optionsWithValue.includes(arg)) {
        i += 1;
        continue;
      }
      if (!arg.startsWith('-') && listing) continue;
      return approval(
        `\`git ${subcommand}\` with ${JSON.stringify(arg)} creates, deletes or changes a ${subcommand}, which is not a listing`,
      );
    }
    return allow(`\`git ${subcommand}\` only lists`);
  };
}

function classifyRemote(args: string[]): ShellDecision {
  if (args.every((arg) => arg === '-v' || arg === '--verbose')) return allow('`git remote` only lists remotes');
  if (args[0] === 'get-url' || args[0] === 'show') return allow(`\`git remote ${args[0]}\` only reads`);
  return approval('`git remote` with these arguments adds, removes or changes remotes');
}

/** `stash`, `reflog`, `worktree`: a few actions only list; `bareIsListing` says what the bare command does. */
function classifySubcommandList(
  subcommand: string,
  readOnlyActions: readonly string[],
  bareIsListing: boolean,
  why: string,
): GitHandler {
  return (args) => {
    const action = args[0];
    if (action === undefined ? bareIsListing : readOnlyActions.includes(action))
      return allow(`\`git ${subcommand}\` only lists`);
    return approval(`\`git ${subcommand}${action === undefined ? '' : ` ${action}`}\` ${why}`);
  };
}

/** `git config` options that read configuration from outside the repository (the system's, the user's, included files, blobs, other files). */
const CONFIG_OUTSIDE_SOURCES = ['system', 'global', 'includes', 'file', 'blob'];

function classifyConfig(args: string[]): ShellDecision {
  const outside =
    args.find((arg) => isLongOptionFor(arg, CONFIG_OUTSIDE_SOURCES) && longOptionName(arg) !== 'no-includes') ??
    args.find((arg) => arg === '-f');
  const positionals = positionalArguments(args);
  const action = positionals[0];
  const writes =
    args.some((arg) => arg === '-e' || isLongOptionFor(arg, CONFIG_WRITE_OPTIONS)) ||
    (action !== undefined && CONFIG_WRITE_ACTIONS.has(action));
  const reads =
    args.some((arg) => CONFIG_READ_OPTIONS.has(arg)) ||
    action === 'get' ||
    action === 'list' ||
    positionals.length === 1;
  if (reads && !writes) {
    if (outside)
      return approval(`\`git config ${outside}\` reads configuration from outside the repository's own config file`);
    return allow('`git config` only reads configuration');
  }
  if (args.includes('--rename-section') || action === 'rename-section') {
    return deny('`git config --rename-section` can turn a section into one whose keys run commands (alias, filter …)');
  }
  const candidates = args.map((arg) =>
    arg.startsWith('--') && arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : arg,
  );
  const dangerous = candidates.find(
    (candidate) =>
      COMMAND_CONFIG_KEYS.some((pattern) => pattern.test(candidate.toLowerCase())) ||
      judgeConfigKey(candidate).tier === 'deny',
  );
  if (dangerous) {
    return deny(
      `\`git config\` must not write \`${dangerous}\`: git would run its value as a command or load code or config from it`,
    );
  }
  return approval('`git config` changes repository configuration');
}

function classifyCommit(args: string[]): ShellDecision {
  if (args.some((arg) => isLongOptionFor(arg, ['amend']))) {
    return approval('`git commit --amend` rewrites the last commit, which may already be pushed');
  }
  return allow('`git commit` records staged changes in the workspace repository');
}

function onlyAbort(subcommand: string, why: string): GitHandler {
  return (args) =>
    args.length === 1 && args[0] === '--abort'
      ? allow(`\`git ${subcommand} --abort\` returns to the state before the ${subcommand}`)
      : approval(`\`git ${subcommand}\` ${why}`);
}

/** Options of `git branch` / `git tag` that only affect what a listing shows. */
const LISTING_FLAGS = ['-i', '--ignore-case', '--no-color', '--color', '--no-column', '--column', '--omit-empty'];
const BRANCH_LIST_FLAGS = new Set([
  ...LISTING_FLAGS,
  ...[
    '-a',
    '--all',
    '-r',
    '--remotes',
    '-v',
    '-vv',
    '--verbose',
    '-l',
    '--list',
    '--show-current',
    '--abbrev',
    '--no-abbrev',
  ],
]);
const TAG_LIST_FLAGS = new Set([...LISTING_FLAGS, '-l', '--list']);
/** Listing options that take the next argument as their value (`--contains HEAD`). */
const TAG_LIST_OPTIONS_WITH_VALUE = [
  '--contains',
  '--no-contains',
  '--merged',
  '--no-merged',
  '--points-at',
  '--sort',
  '--format',
];
const BRANCH_LIST_OPTIONS_WITH_VALUE = [...TAG_LIST_OPTIONS_WITH_VALUE, '--color', '--abbrev', '--column'];

const SUBCOMMAND_HANDLERS = new Map<string, GitHandler>([
  ['status', readOnly('status')],
  ['log', readOnly('log')],
  ['show', readOnly('show')],
  ['diff', readOnly('diff')],
  ['shortlog', readOnly('shortlog')],
  ['blame', readOnly('blame')],
  ['annotate', readOnly('annotate')],
  ['rev-parse', readOnly('rev-parse')],
  ['rev-list', readOnly('rev-list')],
  ['ls-files', readOnly('ls-files')],
  ['ls-tree', readOnly('ls-tree')],
  ['describe', readOnly('describe')],
  ['merge-base', readOnly('merge-base')],
  ['show-ref', readOnly('show-ref')],
  ['for-each-ref', readOnly('for-each-ref')],
  ['name-rev', readOnly('name-rev')],
  ['count-objects', readOnly('count-objects')],
  ['check-ignore', readOnly('check-ignore')],
  ['check-attr', readOnly('check-attr')],
  ['cherry', readOnly('cherry')],
  ['version', readOnly('version')],
  [
    'grep',
    readOnly('grep', (args) => {
      if (hasShortOption(args, 'O') || args.some((arg) => isLongOptionFor(arg, ['open-files-in-pager'])))
        return 'with -O opens files in a pager program';
      // Without the index git reads files directly, following symbolic links out of the workspace.
      if (args.some((arg) => isLongOptionFor(arg, ['no-index'])))
        return 'with --no-index reads files outside git, following symbolic links';
      return undefined;
    }),
  ],
  [
    'cat-file',
    // `--filter` is an abbreviation git accepts for `--filters`.
    readOnly('cat-file', (args) =>
      args.some((arg) => isLongOptionFor(arg, ['filters'])) ? 'with --filters runs filter programs' : undefined,
    ),
  ],
  ['branch', listingOnly('branch', BRANCH_LIST_FLAGS, /^-[arvil]+$/, BRANCH_LIST_OPTIONS_WITH_VALUE, ['-l', '--list'])],
  ['tag', listingOnly('tag', TAG_LIST_FLAGS, /^-(l|n\d*)$/, TAG_LIST_OPTIONS_WITH_VALUE, ['-l', '--list'])],
  ['remote', classifyRemote],
  ['stash', classifySubcommandList('stash', ['list', 'show'], false, 'changes the working tree')],
  ['reflog', classifySubcommandList('reflog', ['show', 'exists'], true, 'deletes reflog entries')],
  [
    'worktree',
    classifySubcommandList(
      'worktree',
      ['list'],
      false,
      'creates, moves or removes working trees, possibly outside the workspace',
    ),
  ],
  ['config', classifyConfig],
  ['add', () => allow('`git add` stages files in the workspace repository')],
  ['stage', () => allow('`git stage` stages files in the workspace repository')],
  ['commit', classifyCommit],
  ['checkout', classifyBranchMove('checkout')],
  ['switch', classifyBranchMove('switch')],
  ['push', classifyPush],
  ['fetch', classifyFetch],
  ['ls-remote', classifyLsRemote],
  ['merge', onlyAbort('merge', 'merges another branch into the current one')],
  ['rebase', onlyAbort('rebase', 'rewrites the commits of the current branch')],
]);
