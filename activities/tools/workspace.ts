/**
 * Safe file access inside an agent's workspace. Node has no `openat`, so confinement is built from
 * three steps that together leave no window for a symlink, a hard link or a swapped directory:
 *
 * 1. the requested path is normalised against the workspace's real path and split into components;
 *    `..` out of the workspace and any component named `.git` are refused, and so is anything inside
 *    the target of a `gitdir:` file or inside any directory git would accept as a repository (a
 *    `HEAD` file beside `objects/` or a `commondir` file): repository metadata belongs to the governed
 *    git layer;
 * 2. every directory component is checked with `lstat`: a symlink anywhere on the path is refused
 *    (missing directories are created one at a time for writes, never following a link);
 * 3. the file itself is opened with `O_NOFOLLOW`, and then the path the kernel actually opened is read
 *    back from `/proc/self/fd/<fd>` (elsewhere: the open file's device and inode are compared with an
 *    `lstat` of the checked path). If a component was swapped for a symlink between step 2 and the
 *    open, that path lies elsewhere and the call is refused before a byte is read or written. A file
 *    with more than one hard link is refused too, since its other name may be outside.
 *
 * A write opens without `O_TRUNC` and truncates only after the checks pass, so a refused write
 * changes nothing; a file it had to create (`O_EXCL`) at a swapped location is unlinked again. The
 * file tools' writes go through `replaceWorkspaceFile`, which writes a new file and renames it over
 * the old one, so no reader and no crash ever sees a half-written file.
 *
 * The checks are a dozen metadata system calls (`realpath`, `lstat`, `readlink`, `rename` …), each a
 * few microseconds on a local disk; sent through libuv's thread pool one after another they cost a
 * write about 1–2 ms. They are made synchronously; opening, reading, writing and closing the file go
 * through the thread pool as before, since their cost grows with the file. A workspace is a local
 * directory: on a stalled network mount these calls would hold the worker's event loop (the thread
 * pool's would hold every file tool).
 */
import {
  closeSync,
  constants as fsConstants,
  fchmodSync,
  ftruncateSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  promises as fs,
  readlinkSync,
  readSync,
  realpathSync,
  renameSync,
  unlinkSync,
  writeFileSync,
  type Stats,
} from 'node:fs';
import path from 'node:path';

export const WORKSPACE_ESCAPE_ERROR = 'WorkspaceEscape';

/**
 * A replacement this small is written synchronously: one copy into the page cache, microseconds,
 * where the thread pool's round trips cost a loaded worker about a millisecond per write. A larger
 * one (up to `FILE_WRITE_MAX_CHARS`) goes through the thread pool, so it never holds the event loop.
 */
export const SYNC_WRITE_MAX_BYTES = 64 * 1024;

/** How a file is opened for the tools: read only, or write (create, then truncate after checks). */
export type OpenMode = 'read' | 'write';

export class WorkspacePathError extends Error {
  override readonly name = WORKSPACE_ESCAPE_ERROR;
}

/** Path components that belong to git's metadata, compared case-insensitively (case-folding filesystems). */
const GIT_METADATA_NAME = '.git';

export interface OpenedWorkspaceFile {
  handle: fs.FileHandle;
  /** The real, absolute path that was opened. */
  realPath: string;
  stats: Stats;
  /** True when a write created the file. */
  created: boolean;
}

/** Opens a workspace file safely (see the module comment). Throws `WorkspacePathError` when refused. */
export async function openInWorkspace(
  workspaceDir: string,
  requested: string,
  mode: OpenMode,
): Promise<OpenedWorkspaceFile> {
  return openSplit(splitRequested(workspaceDir, requested), mode, requested);
}

async function openSplit(
  { root, parts }: { root: string; parts: string[] },
  mode: OpenMode,
  requested: string,
): Promise<OpenedWorkspaceFile> {
  if (parts.length === 0)
    throw new WorkspacePathError(`${JSON.stringify(requested)} is the workspace directory itself, not a file`);
  const gitDirs = gitDirTargets(root, parts);
  const dir = checkedParent(root, parts, mode, requested);
  const target = path.join(dir, parts.at(-1) as string);
  const { handle, created } = await openNoFollow(target, mode, requested);
  try {
    const stats = fstatSync(handle.fd);
    const realPath = openedPath(handle, target, stats);
    if (realPath === undefined || !isInside(root, realPath) || realPath !== target) {
      if (created && realPath !== undefined) unlinkQuietly(realPath);
      throw new WorkspacePathError(
        `${JSON.stringify(requested)} changed while it was being opened (a directory was swapped for a link); refused`,
      );
    }
    if (gitDirs.some((gitDir) => isInside(gitDir, realPath)))
      throw new WorkspacePathError(gitMetadataRefusal(requested));
    refuseUnlessPlainFile(stats, requested);
    return { handle, realPath, stats, created };
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/**
 * Replaces a workspace file's content all at once: the content goes to a new file beside it (opened
 * with every check above), which is then renamed over the target. A worker killed mid-write leaves
 * the old content (or no file) and at most that partial file, which `removePartialWrite` deletes when
 * the interrupted call is reported; never a truncated or empty target. The old file's permission
 * bits are kept. `partialName` must be unique per call (the ledger's call key, hashed).
 */
export async function replaceWorkspaceFile(
  workspaceDir: string,
  requested: string,
  content: string,
  partialName: string,
): Promise<void> {
  const { root, parts } = splitRequested(workspaceDir, requested);
  if (parts.length === 0)
    throw new WorkspacePathError(`${JSON.stringify(requested)} is the workspace directory itself, not a file`);
  const partialPath = path.join(...parts.slice(0, -1), partialName);
  const partial = await openSplit({ root, parts: [...parts.slice(0, -1), partialName] }, 'write', partialPath);
  const target = path.join(path.dirname(partial.realPath), parts.at(-1) as string);
  let renamed = false;
  try {
    const existing = lstatIfPresent(target);
    if (existing?.isSymbolicLink())
      throw new WorkspacePathError(`${JSON.stringify(requested)} is a symbolic link; file tools never follow links`);
    if (existing) refuseUnlessPlainFile(existing, requested);
    // A partial left by an earlier attempt of the same call is reused, so it starts empty.
    const bytes = Buffer.from(content, 'utf8');
    if (bytes.length <= SYNC_WRITE_MAX_BYTES) {
      if (!partial.created) ftruncateSync(partial.handle.fd, 0);
      writeFileSync(partial.handle.fd, bytes);
    } else {
      if (!partial.created) await partial.handle.truncate(0);
      await partial.handle.writeFile(bytes);
    }
    if (existing) fchmodSync(partial.handle.fd, existing.mode & 0o7777);
    renameSync(partial.realPath, target);
    renamed = true;
    // The open descriptor follows its file through the rename: it must now be the target, in place.
    const landed = openedPath(partial.handle, target);
    if (landed !== target) {
      if (landed !== undefined && isInside(root, landed)) unlinkQuietly(landed);
      throw new WorkspacePathError(
        `${JSON.stringify(requested)} changed while it was being written (a directory was swapped for a link); refused`,
      );
    }
  } catch (error) {
    if (!renamed) unlinkQuietly(partial.realPath);
    throw error;
  } finally {
    await partial.handle.close();
  }
}

/** Deletes the partial file a write cut off by a crash may have left (see `replaceWorkspaceFile`). */
export async function removePartialWrite(workspaceDir: string, requested: string, partialName: string): Promise<void> {
  try {
    const { root, parts } = splitRequested(workspaceDir, requested);
    if (parts.length === 0) return;
    const dir = checkedParent(root, parts, 'read', requested);
    unlinkSync(path.join(dir, partialName));
  } catch (error) {
    // Nothing to delete, or a path the write itself would have refused: nothing was left there.
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' || error instanceof WorkspacePathError) return;
    throw error;
  }
}

function refuseUnlessPlainFile(stats: Stats, requested: string): void {
  if (!stats.isFile()) throw new WorkspacePathError(`not a regular file: ${requested}`);
  if (stats.nlink > 1) {
    throw new WorkspacePathError(
      `${JSON.stringify(requested)} has ${stats.nlink} hard links; one of them may be outside the workspace, so file tools refuse it`,
    );
  }
}

/** The directory holding the requested file, every component checked (and, for writes, created). */
function checkedParent(root: string, parts: readonly string[], mode: OpenMode, requested: string): string {
  let dir = root;
  for (const part of parts.slice(0, -1)) {
    const next = path.join(dir, part);
    let info = lstatIfPresent(next);
    if (!info && mode === 'write') {
      // mkdir never follows a symlink in its last component: if one appeared, it fails with EEXIST.
      try {
        mkdirSync(next);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      info = lstatSync(next);
    }
    if (!info) throw Object.assign(new Error(`file not found: ${requested}`), { code: 'ENOENT' });
    if (info.isSymbolicLink())
      throw new WorkspacePathError(
        `${JSON.stringify(requested)} goes through the symbolic link ${path.relative(root, next)}; file tools never follow links`,
      );
    if (!info.isDirectory())
      throw new WorkspacePathError(`${JSON.stringify(requested)}: ${path.relative(root, next)} is not a directory`);
    if (looksLikeGitDirectory(next)) throw new WorkspacePathError(gitMetadataRefusal(requested));
    dir = next;
  }
  return dir;
}

async function openNoFollow(
  target: string,
  mode: OpenMode,
  requested: string,
): Promise<{ handle: fs.FileHandle; created: boolean }> {
  const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK } = fsConstants;
  // O_NONBLOCK: opening a FIFO must not hang the activity; it is refused as "not a regular file".
  try {
    if (mode === 'read') return { handle: await fs.open(target, O_RDONLY | O_NOFOLLOW | O_NONBLOCK), created: false };
    try {
      return {
        handle: await fs.open(target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK, 0o644),
        created: true,
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      return { handle: await fs.open(target, O_WRONLY | O_NOFOLLOW | O_NONBLOCK), created: false };
    }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ELOOP' || code === 'EMLINK') {
      throw new WorkspacePathError(`${JSON.stringify(requested)} is a symbolic link; file tools never follow links`);
    }
    if (code === 'ENOENT') throw Object.assign(new Error(`file not found: ${requested}`), { code: 'ENOENT' });
    if (code === 'EISDIR') throw new WorkspacePathError(`not a regular file: ${requested}`);
    throw error;
  }
}

/** The path the kernel opened: `/proc/self/fd/<fd>` where it exists; otherwise the checked path if its inode matches. */
function openedPath(handle: fs.FileHandle, expected: string, stats?: Stats): string | undefined {
  const viaProc = orUndefined(() => readlinkSync(`/proc/self/fd/${handle.fd}`));
  if (viaProc !== undefined) return viaProc;
  const opened = stats ?? fstatSync(handle.fd);
  const again = orUndefined(() => lstatSync(expected));
  if (!again || again.ino !== opened.ino || again.dev !== opened.dev) return undefined;
  const realDir = orUndefined(() => realpathSync(path.dirname(expected)));
  return realDir === path.dirname(expected) ? expected : undefined;
}

function orUndefined<T>(call: () => T): T | undefined {
  try {
    return call();
  } catch {
    return undefined;
  }
}

/** `lstat`, or undefined when nothing is there (any other error is thrown). */
function lstatIfPresent(target: string): Stats | undefined {
  try {
    return lstatSync(target);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

function unlinkQuietly(target: string): void {
  orUndefined(() => unlinkSync(target));
}

function splitRequested(workspaceDir: string, requested: string): { root: string; parts: string[] } {
  if (requested.includes('\0')) throw new WorkspacePathError('path contains a NUL byte');
  const root = realpathSync(workspaceDir);
  const candidate = path.resolve(root, requested);
  // An absolute path naming the workspace through its unresolved name is accepted too.
  const lexicalRoot = path.resolve(workspaceDir);
  const relative = isInside(root, candidate)
    ? path.relative(root, candidate)
    : isInside(lexicalRoot, candidate)
      ? path.relative(lexicalRoot, candidate)
      : undefined;
  if (relative === undefined) {
    throw new WorkspacePathError(
      `path ${JSON.stringify(requested)} is outside the agent's workspace (${root}); use a path relative to the workspace`,
    );
  }
  const parts = relative.split(path.sep).filter((part) => part !== '' && part !== '.');
  if (parts.some((part) => part.toLowerCase() === GIT_METADATA_NAME))
    throw new WorkspacePathError(gitMetadataRefusal(requested));
  return { root, parts };
}

/**
 * Real paths of the git directories named by `gitdir:` files in the workspace root and in each
 * directory on the requested path (worktrees and submodules use them), so writing through the target
 * is refused like writing into `.git`.
 */
function gitDirTargets(root: string, parts: readonly string[]): string[] {
  const targets: string[] = [];
  let dir = root;
  for (let i = 0; i <= parts.length - 1; i += 1) {
    const dotGit = path.join(dir, GIT_METADATA_NAME);
    const info = orUndefined(() => lstatSync(dotGit));
    if (info?.isFile()) {
      // A `gitdir:` pointer is one line: the file's head is enough.
      const text = orUndefined(() => readHead(dotGit)) ?? '';
      const pointer = /^gitdir:\s*(.+)$/m.exec(text)?.[1]?.trim();
      if (pointer) {
        const resolved = path.resolve(dir, pointer);
        targets.push(orUndefined(() => realpathSync(resolved)) ?? resolved);
      }
    }
    dir = path.join(dir, parts[i] as string);
  }
  return targets;
}

/** What git's own check accepts as a repository directory: `HEAD` plus `objects/` (or a `commondir` file, for worktrees). */
/** Bytes of a `.git` file read for its `gitdir:` line (longer than any path the kernel resolves). */
const GITDIR_FILE_HEAD_BYTES = 8_192;

function readHead(file: string): string {
  const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fsConstants;
  const fd = openSync(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  try {
    const buffer = Buffer.alloc(GITDIR_FILE_HEAD_BYTES);
    return buffer.subarray(0, readSync(fd, buffer, 0, buffer.length, 0)).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

function looksLikeGitDirectory(dir: string): boolean {
  if (!orUndefined(() => lstatSync(path.join(dir, 'HEAD')))) return false;
  return (
    orUndefined(() => lstatSync(path.join(dir, 'objects'))) !== undefined ||
    orUndefined(() => lstatSync(path.join(dir, 'commondir'))) !== undefined
  );
}

function gitMetadataRefusal(requested: string): string {
  return (
    `${JSON.stringify(requested)} is inside a git directory (.git). Repository metadata (config, refs, HEAD, hooks) ` +
    'belongs to the governed git layer: use git commands through shell_execute instead'
  );
}

export function isInside(root: string, target: string): boolean {
  const rel = path.relative(root, target);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}
