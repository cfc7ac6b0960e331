/**
 * The building blocks of issue 8's governance, each with hostile input: secret redaction (tool text
 * and logs), binary detection, safe workspace opens on a real filesystem, and push destinations
 * resolved as git resolves them.
 */
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { binaryReason, escapeNul, escapeNulDeep, summariseBinary } from '../../activities/security/binary';
import { redactSecrets, REDACTION_MARKER, secretValues } from '../../activities/security/secrets';
import { safeArgumentsJson, safeToolText } from '../../activities/security/tool-text';
import { resolvePushDestination } from '../../activities/tools/shell/classify-git-branches';
import { HeadTailBuffer } from '../../activities/tools/shell/output-buffer';
import { openInWorkspace, WorkspacePathError } from '../../activities/tools/workspace';
import { createLogger } from '../../worker/logger';

const KEY = 'canary-provider-key-0123456789';
const PASSWORD = 'db-pass-word-42';
const ENV = {
  ANTHROPIC_API_KEY: KEY,
  DATABASE_URL: `postgres://app:${PASSWORD}@db:5432/app`,
  SHORT_TOKEN: 'abc',
  HOME: '/root',
  PATH: '/usr/bin',
};

describe('secrets never leave', () => {
  test('secret values come from key-like names and URL passwords; short and ordinary values are left alone', () => {
    expect(secretValues(ENV).sort()).toEqual([KEY, PASSWORD].sort());
  });

  test('every occurrence is redacted and counted, scanner matches too; the note is in front of the result', () => {
    const values = secretValues(ENV);
    const text = `a ${KEY} b ${KEY} postgres://app:${PASSWORD}@db and sk-abcdefghijklmnopqrstuv`;
    const redacted = redactSecrets(text, values);
    expect(redacted.count).toBe(4);
    expect(redacted.text).not.toContain(KEY);
    expect(redacted.text).not.toContain(PASSWORD);
    expect(redacted.text).not.toContain('sk-abcdefghijklmnopqrstuv');
    expect(redacted.text).toContain(REDACTION_MARKER);
    const safe = safeToolText(`x\0y ${KEY}`, values);
    expect(safe.redactions).toBe(1);
    expect(safe.text).toBe(`[1 secret value(s) were redacted from this result.]\nx\\0y ${REDACTION_MARKER}`);
    expect(safeToolText('plain', values)).toEqual({ text: 'plain', redactions: 0 });
    expect(safeArgumentsJson({ path: `a\0b`, content: KEY }, values)).toBe(
      `{"path":"a\\\\0b","content":"${REDACTION_MARKER}"}`,
    );
  });

  test("the worker's logger redacts strings, objects and errors", () => {
    const previous = process.env.ANTHROPIC_API_KEY;
    process.env.ANTHROPIC_API_KEY = KEY;
    try {
      const lines: string[] = [];
      const sink = new Writable({
        write(chunk: Buffer, _encoding, done) {
          lines.push(chunk.toString());
          done();
        },
      });
      const logger = createLogger('info', sink);
      logger.info(`key is ${KEY}`);
      logger.info({ result: `tool said ${KEY}` }, 'tool finished');
      logger.error({ err: new Error(`failed with ${KEY}`) }, 'failure');
      logger.warn(new Error(`boom ${KEY}`));
      expect(lines).toHaveLength(4);
      expect(lines.join('').includes(KEY)).toBe(false);
      expect(lines.every((line) => line.includes(REDACTION_MARKER))).toBe(true);
    } finally {
      if (previous === undefined) delete process.env.ANTHROPIC_API_KEY;
      else process.env.ANTHROPIC_API_KEY = previous;
    }
  });
});

describe('binary output', () => {
  test('NUL bytes or mostly invalid UTF-8 make data binary; text with accents does not', () => {
    expect(binaryReason(Buffer.from([0x7f, 0x45, 0, 1]))).toBe('it contains NUL bytes');
    expect(binaryReason(Buffer.alloc(100, 0xff))).toBe('it is not valid UTF-8 text');
    expect(binaryReason(Buffer.from('héllo wörld — ok'))).toBeUndefined();
    expect(summariseBinary('x.bin', Buffer.from([1, 2, 0]), 3, 'it contains NUL bytes')).toBe(
      '[x.bin is binary (it contains NUL bytes): 3 bytes, not shown as text. First 3 bytes in hex: 01 02 00]',
    );
    expect(escapeNul('a\0b')).toBe('a\\0b');
    expect(escapeNulDeep({ 'k\0': ['v\0'] })).toEqual({ 'k\\0': ['v\\0'] });
  });

  test('a binary stream is summarised with its real size; NUL after the sniff window stays for escaping', () => {
    const buffer = new HeadTailBuffer(1_000);
    buffer.push(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0]));
    buffer.push(Buffer.alloc(5_000, 7));
    const result = buffer.finish();
    expect(result.binary).toBe(true);
    expect(result.text).toMatch(
      /^\[the output is binary \(it contains NUL bytes\): 5005 bytes, not shown as text\. First 32 bytes in hex: 89 50 4e 47 00 07/,
    );
  });
});

describe('safe workspace opens', () => {
  let root: string;
  let ws: string;
  let outside: string;

  beforeEach(() => {
    root = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'gov-open-')));
    ws = path.join(root, 'ws');
    outside = path.join(root, 'outside');
    mkdirSync(ws);
    mkdirSync(outside);
    writeFileSync(path.join(outside, 'secret.txt'), 'outside');
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  const refusal = async (requested: string, mode: 'read' | 'write') => {
    try {
      const file = await openInWorkspace(ws, requested, mode);
      await file.handle.close();
      return 'opened';
    } catch (error) {
      return error instanceof WorkspacePathError ? error.message : `other: ${(error as Error).message}`;
    }
  };

  test('links, .git, gitdir targets, .. and hard links are refused for reads and writes; nothing outside changes', async () => {
    symlinkSync(path.join(outside, 'secret.txt'), path.join(ws, 'link'));
    symlinkSync(path.join(outside, 'new.txt'), path.join(ws, 'dangling'));
    symlinkSync(outside, path.join(ws, 'dirlink'));
    linkSync(path.join(outside, 'secret.txt'), path.join(ws, 'hard'));
    mkdirSync(path.join(ws, '.git'));
    mkdirSync(path.join(ws, 'wt'));
    execFileSync('git', ['init', '-q', '--bare', path.join(ws, 'hidden-gitdir')], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
    });
    writeFileSync(path.join(ws, 'wt', '.git'), 'gitdir: ../hidden-gitdir\n');
    const cases: Array<[string, RegExp]> = [
      ['link', /symbolic link/],
      ['dangling', /symbolic link/],
      ['dirlink/secret.txt', /symbolic link/],
      ['dirlink/new.txt', /symbolic link/],
      ['hard', /hard links/],
      ['.git/config', /inside a git directory/],
      ['.GIT/HEAD', /inside a git directory/],
      ['sub/.Git/refs/heads/main', /inside a git directory/],
      ['wt/../hidden-gitdir/config', /inside a git directory/],
      ['hidden-gitdir/refs/heads/main', /inside a git directory/],
      ['../outside/secret.txt', /outside the agent's workspace/],
      [path.join(outside, 'secret.txt'), /outside the agent's workspace/],
      ['.', /workspace directory itself/],
    ];
    for (const [requested, expected] of cases) {
      for (const mode of ['read', 'write'] as const) {
        expect([requested, mode, await refusal(requested, mode)]).toEqual([
          requested,
          mode,
          expect.stringMatching(expected),
        ]);
      }
    }
    expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe('outside');
    expect(existsSync(path.join(outside, 'new.txt'))).toBe(false);
    expect(existsSync(path.join(ws, 'sub'))).toBe(false);
  });

  test('ordinary files open; writes create parent folders; a FIFO is refused without hanging', async () => {
    const file = await openInWorkspace(ws, 'deep/er/file.txt', 'write');
    await file.handle.write('hello');
    await file.handle.close();
    expect(file.created).toBe(true);
    expect(readFileSync(path.join(ws, 'deep', 'er', 'file.txt'), 'utf8')).toBe('hello');
    const read = await openInWorkspace(ws, path.join(ws, 'deep/er/file.txt'), 'read');
    expect(read.realPath).toBe(path.join(ws, 'deep', 'er', 'file.txt'));
    await read.handle.close();
    execFileSync('mkfifo', [path.join(ws, 'fifo')]);
    expect(await refusal('fifo', 'read')).toMatch(/not a regular file/);
  });
});

describe('push destinations as git resolves them', () => {
  test.each([
    ['main', ['main']],
    ['heads/main', ['heads/main', 'main']],
    ['refs/heads/main', ['main']],
    ['refs/heads/./main', ['main']],
    ['refs//heads/main', ['main']],
    ['REFS/HEADS/main', ['main']],
    ['Heads/release/1.0', ['Heads/release/1.0', 'release/1.0']],
  ])('%s → %j', (destination, branches) => {
    expect(resolvePushDestination(destination)).toEqual({ kind: 'branches', branches });
  });

  test.each([
    'HEAD',
    'refs/heads/HEAD',
    '@',
    'refs/tags/v1',
    'tags/v1',
    'remotes/origin/main',
    'refs/heads/../main',
    'a..b',
  ])('%s needs a human', (destination) => {
    expect(resolvePushDestination(destination).kind).toBe('ask');
  });
});
