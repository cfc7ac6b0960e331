/**
 * How bubblewrap is started: through a trusted host shell that joins the command's pids cgroup (when
 * there is one), opens the seccomp filter on descriptor 3 and then becomes bubblewrap, which reads the
 * filter from there, closes it and installs it before the command runs. So the command sees
 * descriptors 0–2 only: the filter's is consumed, and the worker closes whatever else it could pass on
 * (`inherited-descriptors.ts`) before each launch.
 */
import { existsSync, promises as fs, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { seccompFilter } from './seccomp-filter';

/** The descriptor bubblewrap reads the filter from (`--seccomp 3`): the first after stdio, which no caller's stdio uses. */
export const SECCOMP_FILTER_FD = 3;

/**
 * `$1`: the pids cgroup's `cgroup.procs`, or empty; `$2`: the filter file; then bubblewrap and its
 * arguments. The shell writes its own pid into the cgroup before it becomes bubblewrap, so every
 * process of the command is counted from its first fork.
 */
const LAUNCHER_SCRIPT = `[ -z "$1" ] || echo $$ > "$1" || exit 125; filter=$2; shift 2; exec "$@" ${SECCOMP_FILTER_FD}<"$filter"`;

/** The trusted host shell the launch goes through (never looked up on a PATH). */
export const LAUNCHER_SHELL = '/bin/sh';

/** `/bin/sh` and its arguments to run `bwrap bwrapArgs…` with the filter on descriptor 3. */
export function launcherCommand(
  bwrap: string,
  bwrapArgs: readonly string[],
  filterFile: string,
  cgroupProcs?: string,
): { file: string; args: string[] } {
  return {
    file: LAUNCHER_SHELL,
    args: ['-c', LAUNCHER_SCRIPT, 'sandbox', cgroupProcs ?? '', filterFile, bwrap, ...bwrapArgs],
  };
}

let filterFile: Promise<string | undefined> | undefined;

/**
 * The compiled filter, written once per process to a file only the worker's user can read (in a
 * private folder under the OS temp directory, removed at exit), or undefined when this architecture
 * has no filter. Written again if a temp cleaner removed it while the worker ran.
 */
export async function seccompFilterFile(): Promise<string | undefined> {
  filterFile ??= writeFilterFile();
  const file = await filterFile.catch((error: unknown) => {
    filterFile = undefined; // a full or read-only temp directory: tried again on the next launch
    throw error;
  });
  if (file === undefined || existsSync(file)) return file;
  filterFile = undefined;
  return seccompFilterFile();
}

async function writeFilterFile(): Promise<string | undefined> {
  const filter = seccompFilter();
  if (!filter) return undefined;
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'durable-agents-seccomp-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'filter.bpf');
  await fs.writeFile(file, filter, { mode: 0o400 });
  return file;
}
