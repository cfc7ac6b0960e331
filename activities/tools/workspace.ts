import { realpath } from 'node:fs/promises';
import path from 'node:path';

export const WORKSPACE_ESCAPE_ERROR = 'WorkspaceEscape';

/**
 * Resolves a model-supplied path inside the agent's workspace, refusing anything that lands outside
 * it: `..`, absolute paths elsewhere, and symlinks pointing out (checked on the real path of the
 * deepest existing ancestor).
 */
export async function resolveInWorkspace(workspaceDir: string, requested: string): Promise<string> {
  if (requested.includes('\0')) throw new Error('path contains a NUL byte');
  const root = await realpath(workspaceDir);
  const candidate = path.resolve(root, requested);
  if (!isInside(root, candidate)) {
    throw new Error(`path ${JSON.stringify(requested)} is outside the agent's workspace (${root}); use a path relative to the workspace`);
  }
  let probe = candidate;
  for (;;) {
    try {
      const real = await realpath(probe);
      if (!isInside(root, real)) {
        throw new Error(`path ${JSON.stringify(requested)} resolves through a symlink to ${real}, outside the agent's workspace`);
      }
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      const parent = path.dirname(probe);
      if (parent === probe) break;
      probe = parent;
    }
  }
  return candidate;
}

function isInside(root: string, target: string): boolean {
  const rel = path.relative(root, target);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}
