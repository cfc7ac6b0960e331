/**
 * The vocabulary git governance judges with: which global options, long options, config keys and
 * subcommands are denied, need approval or only list. Data only; `classify-git.ts` applies it.
 */
/** Global options that change configuration, the repository, the work tree or the programs git runs. */
export const DENIED_GLOBAL_OPTIONS = [
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
export const SAFE_GLOBAL_OPTIONS = new Set([
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
export const PROGRAM_OPTIONS = ['upload-pack', 'receive-pack', 'exec'];

/** Options that re-enable the diff drivers the runner switches off (`--no-ext-diff --no-textconv`). */
export const DRIVER_OPTIONS = ['ext-diff', 'textconv'];

/**
 * Long options that write a file, or put a repository or its files somewhere chosen on the command
 * line, in any git subcommand (`git rev-list --output=…`, `git blame --output=…`, `git init
 * --template=…`). Git accepts any unique prefix of a long option, so `--out=x` means `--output=x`:
 * every prefix of these names needs approval, whatever the subcommand. A prefix that would be
 * ambiguous makes git refuse, so treating it as the dangerous option only ever errs towards asking.
 */
export const FILE_WRITING_OPTIONS = [
  'output',
  'output-directory',
  'template',
  'separate-git-dir',
  'index-output',
  'lost-found',
  'shallow-file',
];

/** Long options of other commands that are exact names of harmless options, not abbreviations (`--text` is not `--textconv`). */
export const EXACT_HARMLESS_OPTIONS = new Set(['text']);

/** Long options that run a program named on the command line or in configuration. */
export const PROGRAM_RUNNING_OPTIONS = ['extcmd', 'tool'];

/** Config keys whose value git runs as a command, or which change where git looks for code or config. */
export const COMMAND_CONFIG_KEYS: readonly RegExp[] = [
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
export const CONFIG_READ_OPTIONS = new Set([
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
export const CONFIG_WRITE_OPTIONS = [
  'unset',
  'unset-all',
  'add',
  'replace-all',
  'remove-section',
  'rename-section',
  'edit',
];

export const CONFIG_WRITE_ACTIONS = new Set(['set', 'unset', 'edit', 'rename-section', 'remove-section']);

/** Subcommands that are never run: they exist to run programs named by configuration or a peer. */
export const DENIED_SUBCOMMANDS = new Map<string, string>([
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
export const APPROVAL_SUBCOMMANDS = new Map<string, string>([
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

/** `git config` options that read configuration from outside the repository (the system's, the user's, included files, blobs, other files). */
export const CONFIG_OUTSIDE_SOURCES = ['system', 'global', 'includes', 'file', 'blob'];

/** Options of `git branch` / `git tag` that only affect what a listing shows. */
const LISTING_FLAGS = ['-i', '--ignore-case', '--no-color', '--color', '--no-column', '--column', '--omit-empty'];

export const BRANCH_LIST_FLAGS = new Set([
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

export const TAG_LIST_FLAGS = new Set([...LISTING_FLAGS, '-l', '--list']);

/** Listing options that take the next argument as their value (`--contains HEAD`). */
export const TAG_LIST_OPTIONS_WITH_VALUE = [
  '--contains',
  '--no-contains',
  '--merged',
  '--no-merged',
  '--points-at',
  '--sort',
  '--format',
];

export const BRANCH_LIST_OPTIONS_WITH_VALUE = [...TAG_LIST_OPTIONS_WITH_VALUE, '--color', '--abbrev', '--column'];
