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
import {
  DENIED_GLOBAL_OPTIONS,
  SAFE_GLOBAL_OPTIONS,
  PROGRAM_OPTIONS,
  DRIVER_OPTIONS,
  FILE_WRITING_OPTIONS,
  EXACT_HARMLESS_OPTIONS,
  PROGRAM_RUNNING_OPTIONS,
  COMMAND_CONFIG_KEYS,
  CONFIG_READ_OPTIONS,
  CONFIG_WRITE_OPTIONS,
  CONFIG_WRITE_ACTIONS,
  DENIED_SUBCOMMANDS,
  APPROVAL_SUBCOMMANDS,
  CONFIG_OUTSIDE_SOURCES,
  BRANCH_LIST_FLAGS,
  TAG_LIST_FLAGS,
  TAG_LIST_OPTIONS_WITH_VALUE,
  BRANCH_LIST_OPTIONS_WITH_VALUE,
} from './git-vocabulary';

export { branchCreatedBy } from './classify-git-branches';

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
