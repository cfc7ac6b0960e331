import { existsSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureWorkspaceDir, InvalidWorkspaceDirError } from '../../activities/store/workspace-dir';
import { parseWorkspaceRoots } from '../../activities/store/workspace-roots';

/**
 * A workspace is checked whole once per process and then, before each tool call, only for still
 * being a plain directory: one that was removed, or replaced by a file or a link, is checked whole
 * again (created again, or refused), never trusted from the first check.
 */
describe('a workspace checked before every tool call', () => {
  let scratch: string;
  /** The scratch folder is the allowed root these folders lie under (workspace-roots.ts). */
  const placement = () => ({
    agentId: 'agent',
    org: 'default',
    roots: parseWorkspaceRoots({ AGENTS_WORKSPACE_ALLOWED_ROOTS: scratch }),
  });
  beforeEach(() => {
    scratch = mkdtempSync(path.join(os.tmpdir(), 'da-ensured-'));
  });
  afterEach(() => rmSync(scratch, { recursive: true, force: true }));

  test('removed after its first check: created again', async () => {
    const dir = path.join(scratch, 'agent');
    await ensureWorkspaceDir(dir, placement());
    rmSync(dir, { recursive: true });
    await ensureWorkspaceDir(dir, placement());
    expect(statSync(dir).isDirectory()).toBe(true);
  });

  test('replaced by a file after its first check: refused, as on the first check', async () => {
    const dir = path.join(scratch, 'agent');
    await ensureWorkspaceDir(dir, placement());
    rmSync(dir, { recursive: true });
    writeFileSync(dir, 'not a folder');
    await expect(ensureWorkspaceDir(dir, placement())).rejects.toThrow(InvalidWorkspaceDirError);
  });

  test('replaced by a link into /proc after its first check: refused', async () => {
    const dir = path.join(scratch, 'agent');
    await ensureWorkspaceDir(dir, placement());
    rmSync(dir, { recursive: true });
    symlinkSync('/proc/self', dir);
    await expect(ensureWorkspaceDir(dir, placement())).rejects.toThrow(/virtual filesystem/);
    expect(existsSync(path.join(scratch, 'agent', 'environ'))).toBe(true);
  });
});
