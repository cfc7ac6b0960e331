/**
 * file_write replaces a file all at once (a new file renamed over the old): a concurrent reader and a
 * worker killed mid-write see the old content or the new, never an empty or half-written file, and
 * the interrupted call's partial file is removed when the call is reported.
 */
import {
  chmodSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileWrite, partialWriteName } from '../../activities/tools/file-tools';
import type { ToolContext } from '../../activities/tools/types';
import { replaceWorkspaceFile, SYNC_WRITE_MAX_BYTES } from '../../activities/tools/workspace';

describe('file_write replaces files atomically', () => {
  let root: string;
  let ws: string;
  let outside: string;

  beforeEach(() => {
    root = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'atomic-write-')));
    ws = path.join(root, 'ws');
    outside = path.join(root, 'outside');
    mkdirSync(ws);
    mkdirSync(outside);
    writeFileSync(path.join(outside, 'secret.txt'), 'outside');
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  const ctx = (toolCallId: string) =>
    ({ workspaceDir: ws, sessionId: 'session-1', toolCallId }) as unknown as ToolContext;

  test('a reader polling during 2 MB rewrites only ever sees one whole version', async () => {
    const size = 2_000_000;
    const versions = ['a', 'b'].map((c) => c.repeat(size));
    writeFileSync(path.join(ws, 'big.txt'), versions[0]!);
    let writing = true;
    const seen = new Set<string>();
    const reader = (async () => {
      while (writing) {
        const text = await readFile(path.join(ws, 'big.txt'), 'utf8');
        seen.add(
          text.length === size && (text === versions[0] || text === versions[1]) ? 'whole' : `torn ${text.length}`,
        );
      }
    })();
    for (let i = 1; i <= 30; i += 1) {
      const result = await fileWrite.run({ path: 'big.txt', content: versions[i % 2] }, ctx(`call-${i}`));
      expect(result.isError).toBeUndefined();
    }
    writing = false;
    await reader;
    expect([...seen]).toEqual(['whole']);
    expect(readdirSync(ws)).toEqual(['big.txt']);
  });

  test("the old file's permission bits are kept; a new file is 0644; parent folders are created", async () => {
    writeFileSync(path.join(ws, 'run.sh'), 'echo old\n');
    chmodSync(path.join(ws, 'run.sh'), 0o755);
    await replaceWorkspaceFile(ws, 'run.sh', 'echo new\n', '.p1.partial');
    await replaceWorkspaceFile(ws, 'deep/er/new.txt', 'hello', '.p2.partial');
    expect(statSync(path.join(ws, 'run.sh')).mode & 0o777).toBe(0o755);
    expect(readFileSync(path.join(ws, 'run.sh'), 'utf8')).toBe('echo new\n');
    expect(statSync(path.join(ws, 'deep/er/new.txt')).mode & 0o777).toBe(0o644 & ~process.umask());
    expect(readdirSync(ws).sort()).toEqual(['deep', 'run.sh']);
  });

  test('a partial left by an earlier attempt of the call is emptied before it is reused, at either size (synchronous up to SYNC_WRITE_MAX_BYTES, through the thread pool above)', async () => {
    for (const size of [10, SYNC_WRITE_MAX_BYTES + 1]) {
      writeFileSync(path.join(ws, '.retry.partial'), 'x'.repeat(size * 2));
      await replaceWorkspaceFile(ws, 'retried.txt', 'y'.repeat(size), '.retry.partial');
      expect(readFileSync(path.join(ws, 'retried.txt'), 'utf8')).toBe('y'.repeat(size));
      expect(readdirSync(ws)).toEqual(['retried.txt']);
    }
  });

  test('a refused write changes nothing and leaves no partial file', async () => {
    symlinkSync(path.join(outside, 'secret.txt'), path.join(ws, 'link'));
    linkSync(path.join(outside, 'secret.txt'), path.join(ws, 'hard'));
    mkdirSync(path.join(ws, 'adir'));
    for (const [requested, refusal] of [
      ['link', /symbolic link/],
      ['hard', /hard links/],
      ['adir', /not a regular file/],
      ['../outside/secret.txt', /outside the agent's workspace/],
      ['.git/config', /inside a git directory/],
    ] as const) {
      const result = await fileWrite.run({ path: requested, content: 'overwritten' }, ctx(`call-${requested}`));
      expect([requested, result.isError, result.content]).toEqual([requested, true, expect.stringMatching(refusal)]);
    }
    expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe('outside');
    expect(readdirSync(ws).sort()).toEqual(['adir', 'hard', 'link']);
    expect(readdirSync(path.join(ws, 'adir'))).toEqual([]);
  });

  test('the partial file of a write cut off mid-run is removed when the call is reported interrupted', async () => {
    // What a worker killed before the rename leaves: the target untouched, the call's partial beside it.
    writeFileSync(path.join(ws, 'notes.txt'), 'old');
    mkdirSync(path.join(ws, 'sub'));
    const partial = partialWriteName(ctx('call-cut'));
    expect(partial).toMatch(/^\.file-write-[0-9a-f]{16}\.partial$/);
    expect(partial).not.toBe(partialWriteName(ctx('call-other')));
    writeFileSync(path.join(ws, partial), 'ha');
    writeFileSync(path.join(ws, 'sub', partial), 'lf');
    await fileWrite.interrupted!({ path: 'notes.txt', content: 'half' }, ctx('call-cut'));
    await fileWrite.interrupted!({ path: 'sub/x.txt', content: 'half' }, ctx('call-cut'));
    // Nothing to clean, or a path a write would refuse: no error, nothing touched.
    await fileWrite.interrupted!({ path: 'missing/dir/x.txt', content: '' }, ctx('call-cut'));
    await fileWrite.interrupted!({ path: '../outside/secret.txt', content: '' }, ctx('call-cut'));
    expect(readdirSync(ws).sort()).toEqual(['notes.txt', 'sub']);
    expect(readdirSync(path.join(ws, 'sub'))).toEqual([]);
    expect(readFileSync(path.join(ws, 'notes.txt'), 'utf8')).toBe('old');
    expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe('outside');
  });
});
