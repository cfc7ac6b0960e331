/**
 * Where work goes: moving between branches (`checkout`, `switch`) and exchanging them with remotes
 * (`push`, `fetch`, `ls-remote`). Checkout or switch of an existing branch and push to a
 * protected branch need approval; force push is always denied.
 */
import { DEFAULT_PROTECTED_BRANCHES } from './limits';
import { splitGitArgv } from './git-argv';
import { isLongOptionFor, isShortCluster, longOptionName, positionalArguments } from './options';
import { allow, approval, deny, type ShellDecision, type ShellPolicyContext } from './tiers';

export type GitHandler = (args: string[], ctx: ShellPolicyContext) => ShellDecision;

/** Push options that overwrite remote history. */
const FORCE_PUSH_OPTIONS = ['force', 'force-with-lease', 'force-if-includes', 'mirror'];

/** A remote given by name (not a URL or a path, which could be another agent's repository). */
const REMOTE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** A branch name without anything git would interpret (revision syntax, globs, `..`). */
export const PLAIN_BRANCH_NAME = /^(?!-)(?!.*\.\.)(?!.*\/\/)(?!.*\.lock$)(?!.*[./]$)[A-Za-z0-9._/-]+$/;

const CHECKOUT_BENIGN = new Set(['-q', '--quiet', '--track', '-t', '--no-track', '--progress', '--no-progress']);
const SWITCH_BENIGN = new Set([...CHECKOUT_BENIGN, '--guess', '--no-guess']);

const BRANCH_RESETTING_OPTIONS = new Map(
  Object.entries({
    '-B': 'resets an existing branch',
    '-C': 'resets an existing branch',
    '--force-create': 'resets an existing branch',
    '-f': 'discards local changes',
    '--force': 'discards local changes',
    '--discard-changes': 'discards local changes',
    '-m': 'merges local changes into the target',
    '--merge': 'merges local changes into the target',
    '--orphan': 'starts a branch without history',
    '-d': 'detaches HEAD',
    '--detach': 'detaches HEAD',
    '-p': 'discards selected changes',
    '--patch': 'discards selected changes',
  }),
);

/**
 * `checkout -b <new> [<start>]` / `switch -c <new> [<start>]` create a branch and are safe (git refuses
 * if the branch exists). Moving to an existing branch needs approval, and a plain
 * `checkout <name>` may be a path whose uncommitted changes would be discarded.
 */
export function classifyBranchMove(subcommand: 'checkout' | 'switch'): GitHandler {
  const createFlags = subcommand === 'checkout' ? ['-b'] : ['-c', '--create'];
  const benign = subcommand === 'checkout' ? CHECKOUT_BENIGN : SWITCH_BENIGN;
  return (args, ctx) => {
    let newBranch: string | undefined;
    const positionals: string[] = [];
    for (let i = 0; i < args.length; i += 1) {
      const arg = args[i] as string;
      if (createFlags.includes(arg)) {
        newBranch = args[i + 1];
        i += 1;
        if (newBranch === undefined) return approval(`\`git ${subcommand} ${arg}\` without a branch name`);
        continue;
      }
      if (benign.has(arg) || arg.startsWith('--track=')) continue;
      if (arg === '--') return approval(`\`git ${subcommand} -- <paths>\` discards uncommitted changes to those paths`);
      const resetting = BRANCH_RESETTING_OPTIONS.get(arg);
      if (resetting) return approval(`\`git ${subcommand} ${arg}\` ${resetting}`);
      if (arg.startsWith('-')) return approval(`\`git ${subcommand}\` option ${arg} is not on the allow list`);
      positionals.push(arg);
    }
    if (newBranch !== undefined) {
      if (!PLAIN_BRANCH_NAME.test(newBranch))
        return approval(`${JSON.stringify(newBranch)} is not a plain branch name`);
      if (positionals.length > 1) return approval(`\`git ${subcommand}\` with extra paths may discard changes`);
      return allow(`\`git ${subcommand}\` creates and switches to the new branch ${newBranch}`);
    }
    const target = positionals[0];
    if (target === undefined || positionals.length > 1) {
      return approval(`\`git ${subcommand}\` with these arguments may discard uncommitted changes`);
    }
    const existingRef = namedRef(target, ctx.existingRefs);
    if (existingRef !== undefined) {
      return approval(
        `\`git ${subcommand} ${target}\` names the existing ref ${existingRef}, which needs approval (git resolves ${JSON.stringify(target)} to it)`,
      );
    }
    const existing = ctx.existingBranches;
    if (existing?.includes(target)) {
      return approval(`\`git ${subcommand} ${target}\` moves to an existing branch, which needs approval`);
    }
    if (subcommand === 'switch' && existing !== undefined && PLAIN_BRANCH_NAME.test(target)) {
      return allow(`\`git switch ${target}\` creates a local branch from the remote branch of that name (or fails)`);
    }
    return approval(
      subcommand === 'checkout'
        ? `\`git checkout ${target}\` may move to an existing branch or discard uncommitted changes to a path of that name`
        : `\`git switch ${target}\`: cannot tell whether the branch exists (no branch list given)`,
    );
  };
}

/**
 * The local ref a checkout or switch target names, by git's own lookup rules (`<name>`, `refs/<name>`,
 * `refs/tags/<name>`, `refs/heads/<name>`, `refs/remotes/<name>`, `refs/remotes/<name>/HEAD`), so a tag
 * named `main` or a target spelled `refs/heads/main` is seen as what it is. A remote-tracking branch
 * alone is not an existing local ref: `git switch x` then creates `x` from `origin/x`.
 */
function namedRef(target: string, refs: readonly string[] | undefined): string | undefined {
  if (refs === undefined) return undefined;
  if (target.startsWith('refs/')) return target;
  const candidates = [target, `refs/${target}`, `refs/tags/${target}`, `refs/heads/${target}`];
  const exact = candidates.find((candidate) => refs.includes(candidate));
  if (exact) return exact;
  const tracking = [`refs/remotes/${target}`, `refs/remotes/${target}/HEAD`].find((candidate) =>
    refs.includes(candidate),
  );
  // `git checkout origin/x` detaches HEAD at a remote-tracking branch.
  return tracking;
}

export function isProtectedBranch(branch: string, patterns: readonly string[]): boolean {
  const name = branch.toLowerCase();
  return patterns.some((pattern) => {
    const source = pattern
      .toLowerCase()
      .split('*')
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*');
    return new RegExp(`^${source}$`).test(name);
  });
}

/** Push options with no effect on what is overwritten where. */
const PUSH_BENIGN = new Set([
  '-u',
  '--set-upstream',
  '-q',
  '--quiet',
  '-v',
  '--verbose',
  '--progress',
  '--no-progress',
  '--no-verify',
  '--verify',
  '-n',
  '--dry-run',
  '--porcelain',
  '--atomic',
  '--no-atomic',
  '--no-signed',
  '--signed',
  '-4',
  '--ipv4',
  '-6',
  '--ipv6',
  '--no-recurse-submodules',
  '--recurse-submodules=no',
  '--recurse-submodules=check',
]);

/**
 * Push: force in any spelling is denied; a named remote and explicit branch refspecs to non-protected
 * branches are allowed. A refspec without a destination (`feature`) is allowed because the runner
 * makes it explicit (`refs/heads/feature:refs/heads/feature`); otherwise `remote.<name>.push` in the
 * repository config could send it to `main`.
 */
export function classifyPush(args: string[], ctx: ShellPolicyContext): ShellDecision {
  for (const arg of args) {
    if (isShortCluster(arg, 'f') || isLongOptionFor(arg, FORCE_PUSH_OPTIONS) || arg.startsWith('+')) {
      return deny(`force push (\`${arg}\`) is always denied: it can destroy commits on the remote`);
    }
  }
  const positionals: string[] = [];
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i] as string;
    if (arg === '-o' || arg === '--push-option') {
      i += 1;
      continue;
    }
    if (arg.startsWith('--push-option=') || /^-o./.test(arg) || PUSH_BENIGN.has(arg)) continue;
    if (/^-[uqvn46]+$/.test(arg)) continue;
    if (arg === '-d' || isShortCluster(arg, 'd') || isLongOptionFor(arg, ['delete'])) {
      return approval('`git push --delete` deletes a remote branch');
    }
    if (arg.startsWith('-')) return approval(`\`git push ${arg}\` may push more than named branches`);
    positionals.push(arg);
  }
  const [remote, ...refspecs] = positionals;
  if (remote === undefined || refspecs.length === 0) {
    return approval('`git push` without explicit refspecs pushes whatever the repository configuration says');
  }
  if (!REMOTE_NAME.test(remote))
    return approval(`\`git push ${remote}\` pushes to a URL or path rather than a named remote`);
  const patterns = ctx.protectedBranches ?? DEFAULT_PROTECTED_BRANCHES;
  const destinations: string[] = [];
  for (const refspec of refspecs) {
    if (refspec.startsWith('^') || refspec.includes('*'))
      return approval(`refspec ${refspec} is a pattern, not a single branch`);
    const colon = refspec.indexOf(':');
    const source = colon === -1 ? refspec : refspec.slice(0, colon);
    const destination = colon === -1 ? refspec : refspec.slice(colon + 1);
    if (source === '') return approval(`refspec ${refspec} deletes the remote branch ${destination}`);
    if (destination === '')
      return approval(`refspec ${refspec} has an empty destination, which git fills in from configuration`);
    if (colon === -1 && !PLAIN_BRANCH_NAME.test(source)) {
      return approval(`refspec ${refspec}: name the destination branch explicitly (for example HEAD:my-branch)`);
    }
    if (source === 'HEAD' && colon === -1) return approval('refspec HEAD: name the destination branch (HEAD:<branch>)');
    const resolved = resolvePushDestination(destination);
    if (resolved.kind === 'ask') return approval(`refspec ${refspec}: ${resolved.why}`);
    const hit = resolved.branches.find((branch) => isProtectedBranch(branch, patterns));
    if (hit !== undefined) {
      return approval(
        `\`git push\` to the protected branch ${hit} needs approval (${JSON.stringify(destination)} resolves to refs/heads/${hit})`,
      );
    }
    destinations.push(resolved.branches[0] as string);
  }
  return allow(`\`git push\` updates the non-protected branch(es) ${destinations.join(', ')} on ${remote}`);
}

/**
 * The branches a push destination can name once git resolves it, or why it needs a human. Git
 * qualifies a destination that does not start with `refs/` by matching it against the remote's refs
 * with the rules `%s`, `refs/%s`, `refs/tags/%s`, `refs/heads/%s`, `refs/remotes/%s` (so `heads/main`
 * is `refs/heads/main`), and otherwise gives it the source's kind. Every branch a rule could produce
 * is returned, so the protected-branch check sees each.
 */
export function resolvePushDestination(
  destination: string,
): { kind: 'branches'; branches: string[] } | { kind: 'ask'; why: string } {
  // `refs/heads/./main`, `refs//heads/main`: git refuses such names, but judge what they would mean.
  const normalised = destination
    .split('/')
    .filter((part) => part !== '' && part !== '.')
    .join('/');
  if (normalised.split('/').includes('..'))
    return { kind: 'ask', why: `${JSON.stringify(destination)} is not a plain ref name` };
  if (/(^|\/)HEAD$/.test(normalised) || normalised === '@') {
    return {
      kind: 'ask',
      why: `${JSON.stringify(destination)} names the remote's HEAD, which points at its default branch`,
    };
  }
  // Lower-cased for the prefixes: a case-folding filesystem on the remote may store `Refs/Heads/x` as `refs/heads/x`.
  const lower = normalised.toLowerCase();
  if (lower.startsWith('refs/')) {
    if (!lower.startsWith('refs/heads/'))
      return { kind: 'ask', why: 'it pushes a ref that is not a branch (tag, note, remote-tracking ref …)' };
    const branch = normalised.slice('refs/heads/'.length);
    if (!PLAIN_BRANCH_NAME.test(branch))
      return { kind: 'ask', why: `${JSON.stringify(branch)} is not a plain branch name` };
    return { kind: 'branches', branches: [branch] };
  }
  if (!PLAIN_BRANCH_NAME.test(normalised))
    return { kind: 'ask', why: `${JSON.stringify(destination)} is not a plain branch name` };
  const [first = '', ...rest] = normalised.split('/');
  const branches = [normalised];
  // `heads/x` → refs/heads/x; `tags/x`, `remotes/x` are not branches at all.
  if (first.toLowerCase() === 'heads' && rest.length > 0) branches.push(rest.join('/'));
  if ((first.toLowerCase() === 'tags' || first.toLowerCase() === 'remotes') && rest.length > 0) {
    return {
      kind: 'ask',
      why: `${JSON.stringify(destination)} may resolve to refs/${normalised}, which is not a branch`,
    };
  }
  return { kind: 'branches', branches };
}

export function classifyFetch(args: string[]): ShellDecision {
  for (const arg of args) {
    // `--prune` alone only drops remote-tracking refs, which the next fetch rebuilds; pruning tags
    // deletes the repository's own tags.
    if (
      isShortCluster(arg, 'P') ||
      (longOptionName(arg) !== undefined && longOptionName(arg) !== 'prune' && isLongOptionFor(arg, ['prune-tags']))
    ) {
      return approval(`\`git fetch ${arg}\` deletes local tags (pruning), which needs approval`);
    }
    if (
      isShortCluster(arg, 'fu') ||
      isLongOptionFor(arg, ['force', 'update-head-ok', 'refmap', 'recurse-submodules'])
    ) {
      return approval(`\`git fetch ${arg}\` can overwrite local branches or fetch into submodules`);
    }
  }
  const [remote, ...refspecs] = positionalArguments(args);
  if (remote !== undefined && !REMOTE_NAME.test(remote)) {
    return approval(`\`git fetch ${remote}\` fetches from a URL or path rather than a named remote`);
  }
  const writing = refspecs.find((refspec) => refspec.includes(':') || refspec.startsWith('+'));
  if (writing) return approval(`\`git fetch\` refspec ${writing} writes into local refs`);
  return allow('`git fetch` only updates remote-tracking refs');
}

export function classifyLsRemote(args: string[]): ShellDecision {
  const [remote] = positionalArguments(args);
  if (remote !== undefined && !REMOTE_NAME.test(remote)) {
    return approval(`\`git ls-remote ${remote}\` contacts a URL or path rather than a named remote`);
  }
  return allow('`git ls-remote` only lists remote refs');
}

/**
 * The branch an invocation creates (`checkout -b X`, `switch -c X`), so that a later `switch X` in
 * the same `&&` list is judged as a move to an existing branch.
 */
const BRANCH_CREATING_FLAGS = new Map<string, readonly string[]>([
  ['checkout', ['-b', '-B']],
  ['switch', ['-c', '--create', '-C', '--force-create']],
]);

export function branchCreatedBy(argv: readonly string[]): string | undefined {
  if (argv[0] !== 'git') return undefined;
  const line = splitGitArgv(argv);
  const flags = BRANCH_CREATING_FLAGS.get(line.subcommand ?? '') ?? [];
  const index = line.args.findIndex((arg) => flags.includes(arg));
  return index === -1 ? undefined : line.args[index + 1];
}
