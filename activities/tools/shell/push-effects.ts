/**
 * Git decides what a push would change. The refspec parse in `classify-git-branches.ts` is a first
 * filter; a push it allows is then run as `git push --dry-run --porcelain` (in the sandbox, against the
 * same remote) and the ref updates git reports are judged, together with the remote's symbolic refs
 * from `git ls-remote --symref`:
 *
 * - a deletion needs approval, a forced update is denied;
 * - a ref that is not a branch (a tag, a note, anything outside `refs/heads/`) needs approval;
 * - a protected branch needs approval, also when it is reached through a symbolic ref on the remote
 *   (`trunk -> main`).
 */
import { DEFAULT_PROTECTED_BRANCHES } from './limits';
import { isProtectedBranch } from './classify-git-branches';
import { splitGitArgv } from './git-argv';
import type { RunResult } from './run';
import { allow, approval, deny, type ShellDecision } from './tiers';

export type GitRunner = (argv: string[]) => Promise<RunResult>;

export interface PushUpdate {
  flag: string;
  source: string;
  destination: string;
  summary: string;
}

/** Lines of `git push --porcelain` output: `<flag>\t<from>:<to>\t<summary>`. */
export function parsePorcelainPush(stdout: string): PushUpdate[] {
  const updates: PushUpdate[] = [];
  for (const line of stdout.split('\n')) {
    const match = /^(.)\t([^\t]*)\t(.*)$/.exec(line);
    if (!match) continue;
    const refs = match[2] as string;
    const colon = refs.lastIndexOf(':');
    updates.push({
      flag: match[1] as string,
      source: refs.slice(0, colon),
      destination: refs.slice(colon + 1),
      summary: match[3] as string,
    });
  }
  return updates;
}

/** `ref: <target>\t<name>` lines of `git ls-remote --symref`: alias → target. */
export function parseSymrefs(stdout: string): Map<string, string> {
  const symrefs = new Map<string, string>();
  for (const line of stdout.split('\n')) {
    const match = /^ref: (\S+)\t(\S+)$/.exec(line);
    if (match) symrefs.set(match[2] as string, match[1] as string);
  }
  return symrefs;
}

/** Arguments of `git push` that are not options (skipping option values), in order. */
function pushPositionals(args: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i] as string;
    if (arg === '-o' || arg === '--push-option' || arg === '--repo') {
      i += 1;
      continue;
    }
    if (!arg.startsWith('-')) out.push(arg);
  }
  return out;
}

/** Judges an allowed `git push` by what git says it would do. */
export async function judgePushByGit(
  argv: readonly string[],
  run: GitRunner,
  protectedBranches: readonly string[] = DEFAULT_PROTECTED_BRANCHES,
): Promise<ShellDecision> {
  const line = splitGitArgv(argv);
  if (line.subcommand !== 'push') return allow('not a push');
  const [remote] = pushPositionals(line.args);
  const dry = await run(['git', ...line.globals, 'push', '--dry-run', '--porcelain', ...line.args]);
  const updates = parsePorcelainPush(dry.stdout);
  if (updates.length === 0) {
    const why =
      (dry.stderr || dry.stdout)
        .trim()
        .split('\n')
        .find((l) => l.trim() !== '') ?? `exit code ${dry.exitCode ?? dry.signal}`;
    return approval(`git could not say what this push would change (${why}), so a human decides`);
  }
  let symrefs = new Map<string, string>();
  if (remote !== undefined) {
    const listing = await run(['git', 'ls-remote', '--symref', remote]);
    if (listing.exitCode !== 0)
      return approval(
        `the remote's symbolic refs could not be listed (${listing.stderr.trim().split('\n')[0] ?? ''}), so a human decides`,
      );
    symrefs = parseSymrefs(listing.stdout);
  }
  const changed: string[] = [];
  let decision: ShellDecision | undefined;
  const ask = (reason: string) => {
    decision ??= approval(reason);
  };
  for (const update of updates) {
    if (update.flag === '=' || update.flag === '!') continue;
    if (update.flag === '+')
      return deny(`git reports a forced update of ${update.destination}: force push is always denied`);
    if (update.flag === '-') {
      ask(`the push deletes ${update.destination} on the remote`);
      continue;
    }
    const target = symrefs.get(update.destination);
    for (const ref of target ? [update.destination, target] : [update.destination]) {
      if (!ref.startsWith('refs/heads/')) {
        ask(
          `the push ${ref === update.destination ? 'updates' : `updates ${update.destination}, an alias of`} ${ref}, which is not a branch (tag, note or other ref)`,
        );
        continue;
      }
      const branch = ref.slice('refs/heads/'.length);
      if (isProtectedBranch(branch, protectedBranches)) {
        ask(
          ref === update.destination
            ? `\`git push\` to the protected branch ${branch} needs approval`
            : `\`git push\` to ${update.destination} moves the protected branch ${branch}: on the remote it is a symbolic ref to ${ref}`,
        );
      }
    }
    changed.push(update.destination);
  }
  if (decision) return decision;
  return allow(
    changed.length > 0
      ? `git reports the push updates only ${changed.join(', ')}`
      : 'git reports the push changes nothing',
  );
}
