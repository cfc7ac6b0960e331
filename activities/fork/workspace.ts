/**
 * A fork's own workspace: a copy of the source workspace as of the fork step, so nothing the fork runs
 * touches the folder (or the repository, or its remotes) the source worked in.
 *
 * Where the source workspace is a git repository, the copy is a clone with its own object store (no
 * hard links into the source's) checked out at the commit HEAD pointed to at the step's time, read
 * from git's reflog; the source's remotes are configured under their names and URLs, so read-only git
 * work (fetch, log origin/main) behaves as it did. Git records HEAD moves to the second, and it does
 * not record uncommitted changes: both approximations are stated in the fork's workspace note. A
 * workspace that is not a repository is copied as it is now (stated too).
 *
 * Git runs hardened (no system or global config, no hooks, no fsmonitor, no pager): the source
 * repository's own config was written by whoever controlled the source workspace.
 */
import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { GIT_HARDENING_ENV, hardeningPrefix } from '../tools/shell/git-hardening';

const run = promisify(execFile);

/** Cloning a large workspace copies its whole object store; minutes, not hours. */
const GIT_COPY_TIMEOUT_MS = 300_000;
/** `git config`, `rev-parse` and the like answer at once. */
const GIT_QUERY_TIMEOUT_MS = 10_000;

/** Where forks' workspaces live: AGENTS_FORK_WORKSPACE_ROOT, else `forks/` in the system's temporary folder. */
export function forkWorkspaceRoot(env: NodeJS.ProcessEnv = process.env): string {
  return path.resolve(env.AGENTS_FORK_WORKSPACE_ROOT ?? path.join(os.tmpdir(), 'durable-agents-forks'));
}

export interface ForkWorkspace {
  dir: string;
  /** How the copy was made, in words, with the approximation taken. */
  note: string;
}

export async function git(args: string[], cwd: string, timeout = GIT_QUERY_TIMEOUT_MS): Promise<string> {
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: os.tmpdir(), ...GIT_HARDENING_ENV };
  const { stdout } = await run('git', [...hardeningPrefix(), ...args], {
    cwd,
    env,
    timeout,
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout.trim();
}

export async function isRepositoryRoot(dir: string): Promise<boolean> {
  const dotGit = await fs.lstat(path.join(dir, '.git')).catch(() => undefined);
  if (!dotGit?.isDirectory()) return false;
  const top = await git(['rev-parse', '--show-toplevel'], dir).catch(() => undefined);
  return top !== undefined && (await fs.realpath(top)) === (await fs.realpath(dir));
}

/**
 * Makes the fork's workspace at `<root>/<forkTaskId>` from `sourceDir` as of `at`. Idempotent: a
 * folder already made for this fork (a retried activity) is kept with its recorded note.
 */
export async function copyWorkspace(
  sourceDir: string,
  forkTaskId: string,
  at: Date,
  root = forkWorkspaceRoot(),
): Promise<ForkWorkspace> {
  const dir = path.join(root, forkTaskId);
  await fs.mkdir(root, { recursive: true });
  const marker = path.join(root, `${forkTaskId}.note`);
  const done = await fs.readFile(marker, 'utf8').catch(() => undefined);
  if (done !== undefined) return { dir, note: done };
  // A copy cut off half-way is made again from scratch.
  await fs.rm(dir, { recursive: true, force: true });
  const source = await fs.realpath(sourceDir).catch(() => undefined);
  let note: string;
  if (!source) {
    await fs.mkdir(dir);
    note = `the source workspace ${sourceDir} does not exist any more: the fork starts in an empty folder`;
  } else if (await isRepositoryRoot(source)) {
    note = await cloneAsOf(source, dir, at);
  } else {
    // A `.git` file points at another repository's git directory (a worktree, a submodule): copied, the
    // fork's git commands would write into the source's repository, so it is left out.
    const pointers: string[] = [];
    await fs.cp(source, dir, {
      recursive: true,
      verbatimSymlinks: true,
      errorOnExist: false,
      force: true,
      filter: async (src) => {
        if (path.basename(src) !== '.git' || !(await fs.lstat(src)).isFile()) return true;
        pointers.push(path.relative(source, src) || '.git');
        return false;
      },
    });
    note =
      `the source workspace is not a git repository: copied as it is now, not as it was at the fork step` +
      (pointers.length
        ? `; left out ${pointers.length} .git pointer file(s) to other repositories (${pointers.slice(0, 3).join(', ')})`
        : '');
  }
  await fs.writeFile(marker, note);
  return { dir, note };
}

/** The commit HEAD pointed to at `at` by the reflog (to the second); undefined when the reflog cannot say. */
export async function headAsOf(repo: string, at: Date): Promise<string | undefined> {
  const when = `${at.toISOString().slice(0, 19).replace('T', ' ')} +0000`;
  return git(['rev-parse', '--verify', '--quiet', `HEAD@{${when}}`], repo).catch(() => undefined);
}

/** The commit a fork's workspace was checked out at (undefined when it is not a repository or had no commit). */
export async function forkBaseCommit(root: string, forkTaskId: string): Promise<string | undefined> {
  return (await fs.readFile(path.join(root, `${forkTaskId}.base`), 'utf8').catch(() => '')).trim() || undefined;
}

async function cloneAsOf(source: string, dir: string, at: Date): Promise<string> {
  const commit = await headAsOf(source, at);
  const head = commit ?? (await git(['rev-parse', '--verify', '--quiet', 'HEAD'], source).catch(() => undefined));
  const branch = await git(['symbolic-ref', '--quiet', '--short', 'HEAD'], source).catch(() => undefined);
  const remotes = await git(['config', '--local', '--get-regexp', '^remote\\..*\\.url$'], source).catch(() => '');
  const dirty = (await git(['status', '--porcelain', '--untracked-files=no'], source).catch(() => '')) !== '';
  // A local clone copies the whole object store (commits no ref reaches any more included); no hard links.
  await git(
    ['clone', '--quiet', '--no-hardlinks', '--no-checkout', source, dir],
    path.dirname(dir),
    GIT_COPY_TIMEOUT_MS,
  );
  await git(['remote', 'remove', 'origin'], dir);
  for (const line of remotes.split('\n').filter(Boolean)) {
    const match = /^remote\.(.+)\.url (.+)$/.exec(line);
    if (match) await git(['remote', 'add', match[1]!, match[2]!], dir);
  }
  // The source's own branches and what it knew of its remotes' (without contacting any remote).
  await git(
    [
      'fetch',
      '--quiet',
      '--no-tags',
      '--update-head-ok',
      source,
      '+refs/heads/*:refs/heads/*',
      '+refs/remotes/*:refs/remotes/*',
      '+refs/tags/*:refs/tags/*',
    ],
    dir,
    GIT_COPY_TIMEOUT_MS,
  );
  if (!head) return 'the source repository has no commit yet: the fork starts from an empty repository';
  await git(
    branch
      ? ['checkout', '--quiet', '--force', '-B', branch, head]
      : ['checkout', '--quiet', '--force', '--detach', head],
    dir,
    GIT_COPY_TIMEOUT_MS,
  );
  await fs.writeFile(path.join(path.dirname(dir), `${path.basename(dir)}.base`), head);
  const how = commit
    ? `HEAD as of ${at.toISOString()} by the reflog`
    : 'HEAD now (the reflog does not go back to the fork step)';
  return (
    `git clone of the source workspace at ${head.slice(0, 12)} (${how}${branch ? `, on ${branch}` : ''}); ` +
    `the reflog records HEAD moves to the second and no uncommitted changes${dirty ? ' (the source has uncommitted changes now)' : ''}`
  );
}
