/**
 * Canaries for escape tests: secrets that must never come back, in any encoding, and snapshots of the
 * folders outside a workspace that must stay byte-identical. Shared by the sandbox's unit test (the
 * kernel alone) and its end-to-end test (a real worker).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** Length of the pieces looked for: a secret split across outputs still leaves pieces this long. */
const PIECE = 10;

/** git with no user or system configuration and a fixed identity, for building test repositories. */
export const GIT_ENV = {
  PATH: '/usr/bin:/bin',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  HOME: os.tmpdir(),
};
export const git = (cwd: string, ...args: string[]): string =>
  execFileSync('git', ['-c', 'user.name=Test', '-c', 'user.email=test@example.com', ...args], {
    cwd,
    env: GIT_ENV,
    encoding: 'utf8',
  }).trim();

/** Every file under `dir` with its content hash (or link target), leaving out what `skip` names. */
export function snapshot(dir: string, skip: (full: string) => boolean = () => false): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (current: string) => {
    for (const name of readdirSync(current)) {
      const full = path.join(current, name);
      if (skip(full)) continue;
      const info = lstatSync(full);
      if (info.isSymbolicLink()) out[full] = `link:${readlinkSync(full)}`;
      else if (info.isDirectory()) walk(full);
      else out[full] = createHash('sha256').update(readFileSync(full)).digest('hex');
    }
  };
  walk(dir);
  return out;
}

/** The text plus everything in it that decodes as base64 or hex, so an encoded secret is seen too. */
function withDecodings(text: string): string {
  const decoded = [text];
  for (const token of text.match(/[A-Za-z0-9+/=_-]{12,}/g) ?? []) {
    for (const offset of [0, 1, 2, 3]) decoded.push(Buffer.from(token.slice(offset), 'base64').toString('latin1'));
  }
  for (const token of text.match(/[0-9a-fA-F]{12,}/g) ?? []) {
    for (const offset of [0, 1]) decoded.push(Buffer.from(token.slice(offset), 'hex').toString('latin1'));
  }
  return decoded.join('\n');
}

/** The pieces of `secrets` found in `text`, plain or in any of the encodings above. */
export function findLeakedPieces(text: string, secrets: readonly string[]): string[] {
  const haystack = withDecodings(text);
  const found: string[] = [];
  for (const secret of secrets) {
    for (let i = 0; i + PIECE <= secret.length; i += 1) {
      const piece = secret.slice(i, i + PIECE);
      if (haystack.includes(piece)) found.push(piece);
    }
  }
  return found;
}
