/**
 * Paths confined for every command: an argument of any command that names a place outside the
 * workspace (after following symlinks, dangling ones included) needs approval, and the kernel's
 * pseudo-filesystems (`/proc`, `/sys`, `/dev` except `/dev/null`) are denied: `/proc/<pid>/environ`
 * holds the worker's secrets, and nothing an agent legitimately does reads them.
 *
 * Arguments are judged as paths whether or not the command takes them as paths (a commit message
 * `-m /etc` asks too): a false match only makes a command stricter. Option values are looked at as
 * well: `--output=/tmp/x`, `-F/etc/passwd`.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { isInside } from '../workspace';
import { allow, approval, deny, displayArgv, strictest, type ShellDecision } from './tiers';

/** Pseudo-filesystems that expose the worker's process, its environment and devices. */
const DENIED_ROOTS = ['/proc', '/sys', '/dev'];
/** The one device path every tool may name. */
const ALLOWED_DEVICES = new Set(['/dev/null']);
/** Symlinks followed when resolving a dangling link, before giving up (and asking). */
const MAX_LINK_HOPS = 16;

/** The strictest decision over every path-like argument of `invocations`, run in `workspaceDir`. */
export async function confinePaths(
  invocations: readonly (readonly string[])[],
  workspaceDir: string,
): Promise<ShellDecision> {
  const root = await fs.realpath(workspaceDir);
  let result = allow('every path argument is inside the workspace');
  for (const argv of invocations) {
    for (const candidate of argv.slice(1).flatMap(pathCandidates)) {
      const decision = await judgePath(candidate, root);
      if (decision.tier === 'allow') continue;
      const labelled = { tier: decision.tier, reason: `${displayArgv(argv)}: ${decision.reason}` };
      result = strictest(result, labelled);
      if (result.tier === 'deny') return result;
    }
  }
  return result;
}

/** The strings in one argument that could be paths: the argument, an option's `=value`, a short option's attached `/value`. */
export function pathCandidates(arg: string): string[] {
  if (!arg.startsWith('-')) return arg === '' ? [] : [arg];
  const out: string[] = [];
  const equals = arg.indexOf('=');
  if (equals !== -1 && equals + 1 < arg.length) out.push(arg.slice(equals + 1));
  // A short-option cluster may end in an attached value (`-F/etc/passwd`, `-Flink`, `-vFlink`): every
  // tail after the first letter is a candidate.
  if (!arg.startsWith('--')) for (let i = 2; i < arg.length; i += 1) out.push(arg.slice(i));
  return out;
}

async function judgePath(candidate: string, root: string): Promise<ShellDecision> {
  const absolute = path.resolve(root, candidate);
  const pseudo = pseudoFilesystem(absolute);
  if (pseudo)
    return deny(
      `${JSON.stringify(candidate)} is in ${pseudo}, which exposes the worker's processes, environment and devices`,
    );
  const real = await resolveFollowingLinks(absolute);
  const realPseudo = pseudoFilesystem(real);
  if (realPseudo)
    return deny(
      `${JSON.stringify(candidate)} leads to ${real} in ${realPseudo}, which exposes the worker's processes, environment and devices`,
    );
  if (ALLOWED_DEVICES.has(real) || isInside(root, real)) return allow('inside the workspace');
  return approval(`${JSON.stringify(candidate)} is outside the workspace (${real})`);
}

function pseudoFilesystem(absolute: string): string | undefined {
  if (ALLOWED_DEVICES.has(absolute)) return undefined;
  return DENIED_ROOTS.find((rootDir) => absolute === rootDir || absolute.startsWith(`${rootDir}/`));
}

/**
 * Where `absolute` really leads: `realpath` when it exists; otherwise the real path of its deepest
 * existing ancestor plus the rest, following a dangling symlink's target (which is where a write through
 * it would land).
 */
async function resolveFollowingLinks(absolute: string, hops = 0): Promise<string> {
  const real = await fs.realpath(absolute).catch(() => undefined);
  if (real !== undefined) return real;
  if (hops > MAX_LINK_HOPS) return absolute;
  const parent = path.dirname(absolute);
  if (parent === absolute) return absolute;
  const realParent = await resolveFollowingLinks(parent, hops + 1);
  const here = path.join(realParent, path.basename(absolute));
  const info = await fs.lstat(here).catch(() => undefined);
  if (info?.isSymbolicLink()) {
    const target = await fs.readlink(here);
    return resolveFollowingLinks(path.resolve(realParent, target), hops + 1);
  }
  return here;
}
