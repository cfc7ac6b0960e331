import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');

/**
 * scripts/lib.sh's ensure_node_modules, run in a copy of the checkout with an `npm` that only records
 * its arguments: most of a first `npm start` on a fresh machine (about two minutes) is `npm ci`, so the
 * line printed where that wait begins says so.
 */
describe('ensure_node_modules', () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(path.join(os.tmpdir(), 'da-ensure-'));
    mkdirSync(path.join(root, 'scripts'));
    copyFileSync(path.join(ROOT, 'scripts', 'lib.sh'), path.join(root, 'scripts', 'lib.sh'));
    writeFileSync(path.join(root, 'package-lock.json'), '{}\n');
    const bin = path.join(root, 'fake-bin');
    mkdirSync(bin);
    // `npm ci` leaves a Node 24 in node_modules/.bin, as the `node` devDependency does.
    writeFileSync(
      path.join(bin, 'npm'),
      '#!/bin/sh\necho "$*" >> "$PWD/npm-calls"\nmkdir -p node_modules/.bin\n' +
        "printf '#!/bin/sh\\necho 24\\n' > node_modules/.bin/node\nchmod +x node_modules/.bin/node\n",
    );
    chmodSync(path.join(bin, 'npm'), 0o755);
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  const ensure = (): { said: string; npmCalls: string[] } => {
    const said = execFileSync(
      'bash',
      ['-c', 'source scripts/lib.sh && ensure_node_modules 2>&1 >/dev/null', 'ensure-node-modules'],
      { cwd: root, env: { ...process.env, PATH: `${path.join(root, 'fake-bin')}:${process.env.PATH ?? ''}` } },
    ).toString();
    let npmCalls: string[] = [];
    try {
      npmCalls = readFileSync(path.join(root, 'npm-calls'), 'utf8').trim().split('\n');
    } catch {
      // npm was not run
    }
    rmSync(path.join(root, 'npm-calls'), { force: true });
    return { said, npmCalls };
  };

  test('a fresh install says it takes about 2 minutes; a changed lockfile says why; an installed tree says nothing', () => {
    const fresh = ensure();
    expect(fresh.npmCalls).toEqual(['ci --no-audit --no-fund --loglevel=error']);
    expect(fresh.said).toContain('installing npm dependencies (npm ci): about 2 minutes on a fresh machine');

    expect(ensure()).toEqual({ said: '', npmCalls: [] });

    const later = new Date(Date.now() + 60_000);
    utimesSync(path.join(root, 'package-lock.json'), later, later);
    const changed = ensure();
    expect(changed.npmCalls).toEqual(['ci --no-audit --no-fund --loglevel=error']);
    expect(changed.said).toContain('installing npm dependencies (npm ci): the lockfile changed');
    expect(changed.said).not.toContain('about 2 minutes');
  });
});
