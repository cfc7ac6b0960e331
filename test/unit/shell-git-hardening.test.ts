/**
 * Real repositories with hostile configuration. Each case first proves the attack works with plain git
 * (the control), then runs the allowed command through `runInvocation` and asserts the marker file was
 * not created.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { classifyInvocation } from '../../activities/tools/shell/classify';
import { explicitPushRefspecs, GitHardeningError } from '../../activities/tools/shell/git-hardening';
import { runInvocation, ShellCommandDeniedError, type RunResult } from '../../activities/tools/shell/run';

/** Plain git for set-up and controls: no user or system config, and no prompting. */
const PLAIN_GIT_ENV = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  HOME: os.tmpdir(),
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_TERMINAL_PROMPT: '0',
  GIT_AUTHOR_NAME: 'Test',
  GIT_AUTHOR_EMAIL: 'test@example.com',
  GIT_COMMITTER_NAME: 'Test',
  GIT_COMMITTER_EMAIL: 'test@example.com',
};

let root: string;
let repo: string;
let marker: string;

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, env: PLAIN_GIT_ENV, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/**
 * Plain git that may fail (the controls): only its side effects matter. Asynchronous, so that a test
 * server in this process can answer it.
 */
function plainGit(cwd: string, ...args: string[]): Promise<void> {
  return new Promise((resolve) => {
    const child = spawn('git', args, { cwd, env: PLAIN_GIT_ENV, stdio: 'ignore', timeout: 20_000 });
    child.on('close', () => resolve());
    child.on('error', () => resolve());
  });
}

/** Unstages everything with the evil filter switched off, so set-up itself does not fire it. */
function resetWithoutFilter(cwd: string): void {
  git(cwd, '-c', 'filter.evil.clean=', '-c', 'filter.evil.smudge=', '-c', 'filter.evil.process=', 'reset', '-q');
}

async function initRepo(dir: string): Promise<void> {
  await fs.mkdir(dir, { recursive: true });
  git(dir, 'init', '-q', '-b', 'main');
  git(dir, 'config', 'user.name', 'Test');
  git(dir, 'config', 'user.email', 'test@example.com');
  await fs.writeFile(path.join(dir, 'f.txt'), 'hello\n');
  git(dir, 'add', 'f.txt');
  git(dir, 'commit', '-q', '-m', 'init');
}

/** Changes a tracked file's content but not its size, and makes its stat data stale, so git must hash it. */
async function makeRacy(dir: string, content = 'HELLO\n'): Promise<void> {
  const file = path.join(dir, 'f.txt');
  await fs.writeFile(file, content);
  const when = new Date(Date.now() - 60_000 - Math.floor(Math.random() * 1_000_000));
  await fs.utimes(file, when, when);
}

/** Runs a plain-git control and asserts the attack really fires, then removes the marker. */
async function expectControlFires(cwd: string, ...args: string[]): Promise<void> {
  await plainGit(cwd, ...args);
  expect(existsSync(marker)).toBe(true);
  await fs.rm(marker, { force: true });
}

async function hardened(cwd: string, ...args: string[]): Promise<RunResult> {
  expect(classifyInvocation(['git', ...args]).tier).not.toBe('deny');
  return runInvocation(['git', ...args], { cwd, timeoutMs: 20_000 });
}

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), 'shell-git-'));
  repo = path.join(root, 'repo');
  marker = path.join(root, 'pwned');
  await initRepo(repo);
});

afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

describe('repository config cannot make allowed git commands run programs', () => {
  it('core.fsmonitor on `git status`', async () => {
    git(repo, 'config', 'core.fsmonitor', `touch ${marker}; false`);
    await expectControlFires(repo, 'status');
    const result = await hardened(repo, 'status');
    expect(result.exitCode).toBe(0);
    expect(existsSync(marker)).toBe(false);
  });

  it('git run by path is hardened too', async () => {
    git(repo, 'config', 'core.fsmonitor', `touch ${marker}; false`);
    const gitPath = execFileSync('which', ['git'], { encoding: 'utf8' }).trim();
    expect(classifyInvocation([gitPath, 'status']).tier).toBe('approval');
    expect((await runInvocation([gitPath, 'status'], { cwd: repo })).exitCode).toBe(0);
    expect(existsSync(marker)).toBe(false);
  });

  it('diff.external on `git diff`, `git log -p` and `git show`', async () => {
    git(repo, 'config', 'diff.external', `touch ${marker}; false`);
    await fs.writeFile(path.join(repo, 'f.txt'), 'changed\n');
    await expectControlFires(repo, 'diff');
    for (const args of [['diff'], ['log', '-p'], ['show', 'HEAD']]) {
      const result = await hardened(repo, ...args);
      expect(result.exitCode).toBe(0);
      expect(existsSync(marker)).toBe(false);
    }
    expect((await hardened(repo, 'diff')).stdout).toContain('+changed');
  });

  it('a textconv driver on `git diff`, `git show` and `git blame`', async () => {
    await fs.writeFile(path.join(repo, '.gitattributes'), '*.txt diff=evil\n');
    git(repo, 'config', 'diff.evil.textconv', `touch ${marker}; cat`);
    await fs.writeFile(path.join(repo, 'f.txt'), 'changed\n');
    await expectControlFires(repo, 'diff');
    for (const args of [['diff'], ['show', 'HEAD'], ['blame', 'f.txt'], ['log', '-p']]) {
      const result = await hardened(repo, ...args);
      expect(result.exitCode).toBe(0);
      expect(existsSync(marker)).toBe(false);
    }
  });

  it('a diff driver command on `git diff`', async () => {
    await fs.writeFile(path.join(repo, '.gitattributes'), '*.txt diff=evil\n');
    git(repo, 'config', 'diff.evil.command', `touch ${marker}; false`);
    await fs.writeFile(path.join(repo, 'f.txt'), 'changed\n');
    await expectControlFires(repo, 'diff');
    expect((await hardened(repo, 'diff')).exitCode).toBe(0);
    expect(existsSync(marker)).toBe(false);
  });

  it('a clean/smudge/process filter on `git add`, `git status` and `git commit`', async () => {
    await fs.writeFile(path.join(repo, '.gitattributes'), '*.txt filter=evil\n');
    git(repo, 'config', 'filter.evil.clean', `touch ${marker}; cat`);
    git(repo, 'config', 'filter.evil.smudge', `touch ${marker}; cat`);
    git(repo, 'config', 'filter.evil.process', `touch ${marker}`);
    await makeRacy(repo);
    await expectControlFires(repo, 'add', 'f.txt');
    resetWithoutFilter(repo);
    await makeRacy(repo, 'HeLLO\n');
    for (const args of [['status'], ['add', '-A'], ['commit', '-q', '-m', 'second'], ['checkout', '-b', 'topic']]) {
      const result = await hardened(repo, ...args);
      expect(result.exitCode).toBe(0);
      expect(existsSync(marker)).toBe(false);
    }
  });

  it('a filter defined in an included config file', async () => {
    await fs.writeFile(path.join(root, 'included.cfg'), `[filter "evil"]\n\tclean = touch ${marker}; cat\n`);
    git(repo, 'config', 'include.path', path.join(root, 'included.cfg'));
    await fs.writeFile(path.join(repo, '.gitattributes'), '*.txt filter=evil\n');
    await makeRacy(repo);
    await expectControlFires(repo, 'add', 'f.txt');
    resetWithoutFilter(repo);
    await makeRacy(repo, 'HeLLO\n');
    expect((await hardened(repo, 'add', 'f.txt')).exitCode).toBe(0);
    expect(existsSync(marker)).toBe(false);
  });

  it('hooks on `git commit` and `git checkout -b` (pre-commit, commit-msg, post-commit, reference-transaction, post-checkout)', async () => {
    for (const hook of ['pre-commit', 'commit-msg', 'post-commit', 'reference-transaction', 'post-checkout']) {
      await fs.writeFile(path.join(repo, '.git', 'hooks', hook), `#!/bin/sh\ntouch ${marker}\n`, { mode: 0o755 });
    }
    await fs.writeFile(path.join(repo, 'g.txt'), 'x\n');
    git(repo, 'add', 'g.txt');
    await expectControlFires(repo, 'commit', '-q', '-m', 'control');
    await fs.writeFile(path.join(repo, 'g.txt'), 'y\n');
    for (const args of [
      ['add', 'g.txt'],
      ['commit', '-q', '-m', 'hooked'],
      ['checkout', '-q', '-b', 'topic'],
    ]) {
      const result = await hardened(repo, ...args);
      expect(result.exitCode).toBe(0);
      expect(existsSync(marker)).toBe(false);
    }
    expect(git(repo, 'log', '-1', '--format=%s')).toBe('hooked\n');
  });

  it('core.hooksPath pointing at a hooks directory in the workspace', async () => {
    await fs.mkdir(path.join(repo, 'hooks'));
    await fs.writeFile(path.join(repo, 'hooks', 'pre-commit'), `#!/bin/sh\ntouch ${marker}\n`, { mode: 0o755 });
    git(repo, 'config', 'core.hooksPath', 'hooks');
    await expectControlFires(repo, 'commit', '-q', '--allow-empty', '-m', 'control');
    expect((await hardened(repo, 'commit', '-q', '--allow-empty', '-m', 'x')).exitCode).toBe(0);
    expect(existsSync(marker)).toBe(false);
  });

  it('an alias shadowing a builtin is ignored; a non-builtin alias is denied before it runs', async () => {
    git(repo, 'config', 'alias.st', `!touch ${marker}`);
    git(repo, 'config', 'alias.status', `!touch ${marker}`);
    await expectControlFires(repo, 'st');
    await expect(runInvocation(['git', 'st'], { cwd: repo })).rejects.toBeInstanceOf(ShellCommandDeniedError);
    expect((await hardened(repo, 'status')).exitCode).toBe(0);
    expect(existsSync(marker)).toBe(false);
  });

  it('gpg.program with commit.gpgSign / log.showSignature', async () => {
    git(repo, 'config', 'commit.gpgSign', 'true');
    git(repo, 'config', 'log.showSignature', 'true');
    git(repo, 'config', 'gpg.program', `${path.join(root, 'fake-gpg')}`);
    await fs.writeFile(path.join(root, 'fake-gpg'), `#!/bin/sh\ntouch ${marker}\nexit 1\n`, { mode: 0o755 });
    await expectControlFires(repo, 'commit', '--allow-empty', '-m', 'control');
    expect((await hardened(repo, 'commit', '-q', '--allow-empty', '-m', 'unsigned')).exitCode).toBe(0);
    expect((await hardened(repo, 'log', '-1')).exitCode).toBe(0);
    expect((await hardened(repo, 'commit', '-q', '-S', '--allow-empty', '-m', 'signed')).exitCode).not.toBe(0);
    expect(existsSync(marker)).toBe(false);
  });

  it('core.editor and core.pager', async () => {
    git(repo, 'config', 'core.editor', `touch ${marker}; true`);
    git(repo, 'config', 'core.pager', `touch ${marker}; cat`);
    git(repo, 'config', 'pager.log', `touch ${marker}; cat`);
    await expectControlFires(repo, 'commit', '--allow-empty');
    const commit = await hardened(repo, 'commit', '--allow-empty');
    expect(commit.exitCode).not.toBe(0); // the editor is `false`: no message, no commit
    expect((await hardened(repo, 'log')).exitCode).toBe(0);
    expect(existsSync(marker)).toBe(false);
  });

  it('remote.<name>.uploadpack / receivepack (which -c cannot override): commands that contact a remote are refused', async () => {
    const upstream = path.join(root, 'upstream');
    await initRepo(upstream);
    git(repo, 'remote', 'add', 'origin', upstream);
    git(repo, 'config', 'remote.origin.uploadpack', `touch ${marker}; git-upload-pack`);
    git(repo, 'config', 'remote.origin.receivepack', `touch ${marker}; git-receive-pack`);
    await expectControlFires(repo, 'fetch', 'origin');
    for (const args of [
      ['fetch', 'origin'],
      ['ls-remote', 'origin'],
      ['push', 'origin', 'main:topic'],
      ['remote', 'show', 'origin'],
    ]) {
      await expect(runInvocation(['git', ...args], { cwd: repo })).rejects.toBeInstanceOf(GitHardeningError);
    }
    expect((await hardened(repo, 'status')).exitCode).toBe(0);
    expect(existsSync(marker)).toBe(false);
  });

  it('the ext:: transport, even when the repository allows it', async () => {
    git(repo, 'config', 'protocol.ext.allow', 'always');
    git(repo, 'remote', 'add', 'evil', `ext::sh -c touch% ${marker}`);
    await expectControlFires(repo, 'fetch', 'evil');
    const result = await hardened(repo, 'fetch', 'evil');
    expect(result.exitCode).not.toBe(0);
    expect(existsSync(marker)).toBe(false);
  });

  it('core.sshCommand and core.gitProxy', async () => {
    git(repo, 'config', 'core.sshCommand', `touch ${marker}; false`);
    git(repo, 'remote', 'add', 'viassh', 'ssh://example.invalid/x.git');
    await expectControlFires(repo, 'fetch', 'viassh');
    expect((await hardened(repo, 'fetch', 'viassh')).exitCode).not.toBe(0);
    expect(existsSync(marker)).toBe(false);

    git(repo, 'config', 'core.gitProxy', `${path.join(root, 'proxy')}`);
    await fs.writeFile(path.join(root, 'proxy'), `#!/bin/sh\ntouch ${marker}\n`, { mode: 0o755 });
    git(repo, 'remote', 'add', 'viagit', 'git://127.0.0.1:9/x.git');
    await expectControlFires(repo, 'fetch', 'viagit');
    expect((await hardened(repo, 'fetch', 'viagit')).exitCode).not.toBe(0);
    expect(existsSync(marker)).toBe(false);
  });

  describe('credential prompts against a server that asks for a password', () => {
    let server: http.Server;
    let url: string;

    beforeEach(async () => {
      server = http.createServer((_request, response) => {
        response.writeHead(401, { 'WWW-Authenticate': 'Basic realm="x"' });
        response.end();
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/x.git`;
    });

    afterEach(async () => {
      await new Promise((resolve) => server.close(resolve));
    });

    it('credential.helper', async () => {
      git(repo, 'remote', 'add', 'origin', url);
      git(repo, 'config', 'credential.helper', `!touch ${marker}; false`);
      await expectControlFires(repo, 'fetch', 'origin');
      expect((await hardened(repo, 'fetch', 'origin')).exitCode).not.toBe(0);
      expect(existsSync(marker)).toBe(false);
    });

    it('core.askPass', async () => {
      git(repo, 'remote', 'add', 'origin', url);
      await fs.writeFile(path.join(root, 'askpass'), `#!/bin/sh\ntouch ${marker}\n`, { mode: 0o755 });
      git(repo, 'config', 'core.askPass', path.join(root, 'askpass'));
      await expectControlFires(repo, 'fetch', 'origin');
      expect((await hardened(repo, 'fetch', 'origin')).exitCode).not.toBe(0);
      expect(existsSync(marker)).toBe(false);
    });
  });

  describe('submodules', () => {
    async function addSubmodule(): Promise<string> {
      const source = path.join(root, 'sub-source');
      await initRepo(source);
      git(repo, '-c', 'protocol.file.allow=always', 'submodule', 'add', '-q', source, 'sub');
      git(repo, 'commit', '-q', '-m', 'add submodule');
      const sub = path.join(repo, 'sub');
      await fs.writeFile(path.join(sub, '.gitattributes'), '*.txt filter=evil\n');
      git(sub, 'config', 'filter.evil.clean', `touch ${marker}; cat`);
      git(sub, 'config', 'core.fsmonitor', `touch ${marker}; false`);
      // Ask the super-project to descend into the submodule even with diff.ignoreSubmodules=all.
      git(repo, 'config', 'submodule.sub.ignore', 'none');
      return sub;
    }

    it("a submodule's own filter and fsmonitor on `git status`, `git diff`, `git add -A`", async () => {
      const sub = await addSubmodule();
      await makeRacy(sub);
      await expectControlFires(repo, 'status');
      for (const args of [['status'], ['diff'], ['add', '-A'], ['commit', '-q', '-am', 'x']]) {
        await makeRacy(sub, 'HeLLo\n');
        await hardened(repo, ...args);
        expect(existsSync(marker)).toBe(false);
      }
    });

    it('a nested repository staged as a gitlink without .gitmodules', async () => {
      const inner = path.join(repo, 'inner');
      await initRepo(inner);
      await fs.writeFile(path.join(inner, '.gitattributes'), '*.txt filter=evil\n');
      git(inner, 'add', '.gitattributes');
      git(inner, 'commit', '-q', '-m', 'attrs');
      git(inner, 'config', 'filter.evil.clean', `touch ${marker}; cat`);
      await plainGit(repo, 'add', 'inner');
      git(repo, 'commit', '-q', '-m', 'gitlink');
      await makeRacy(inner);
      await expectControlFires(repo, 'add', '-A');
      await makeRacy(inner, 'HeLLo\n');
      await hardened(repo, 'add', '-A');
      await hardened(repo, 'status');
      expect(existsSync(marker)).toBe(false);
    });
  });
});

describe('push refspecs are made explicit', () => {
  it('repository config cannot redirect `git push origin feature` to main', async () => {
    const remote = path.join(root, 'remote.git');
    git(root, 'init', '-q', '--bare', remote);
    git(repo, 'remote', 'add', 'origin', remote);
    git(repo, 'checkout', '-q', '-b', 'feature');
    git(repo, 'config', 'remote.origin.push', 'refs/heads/feature:refs/heads/main');
    expect(classifyInvocation(['git', 'push', 'origin', 'feature']).tier).toBe('allow');

    await plainGit(repo, 'push', 'origin', 'feature');
    expect(git(remote, 'branch', '--format=%(refname:short)')).toBe('main\n'); // control: redirected
    git(remote, 'update-ref', '-d', 'refs/heads/main');

    // The sandbox shows git only the remotes it is given (the workspace's recorded ones).
    const result = await runInvocation(['git', 'push', 'origin', 'feature'], {
      cwd: repo,
      timeoutMs: 20_000,
      remotes: [{ kind: 'path', path: remote, writable: true }],
    });
    expect(result.exitCode).toBe(0);
    expect(git(remote, 'branch', '--format=%(refname:short)')).toBe('feature\n');
  });

  it('rewrites plain branch names only', () => {
    expect(explicitPushRefspecs(['-u', 'origin', 'feature', 'HEAD:x', 'refs/heads/y', '-o', 'ci.skip'])).toEqual([
      '-u',
      'origin',
      'refs/heads/feature:refs/heads/feature',
      'HEAD:x',
      'refs/heads/y:refs/heads/y',
      '-o',
      'ci.skip',
    ]);
    expect(explicitPushRefspecs(['origin', 'HEAD'])).toEqual(['origin', 'HEAD']);
  });
});

describe('git options from the command line', () => {
  it.each([
    [['-c', 'core.fsmonitor=touch PWNED', 'status']],
    [['-c', 'alias.x=!touch PWNED', 'x']],
    [['--upload-pack=touch PWNED', 'ls-remote', '.']],
    [['ls-remote', '--upload-pack=touch PWNED', '.']],
    [['-C', '..', 'status']],
    [['diff', '--ext-diff']],
  ])('%j is refused by the runner', async (args) => {
    const argv = ['git', ...args.map((arg) => arg.replace('PWNED', marker))];
    await expect(runInvocation(argv, { cwd: repo })).rejects.toBeInstanceOf(ShellCommandDeniedError);
    expect(existsSync(marker)).toBe(false);
  });

  it('still works for ordinary use', async () => {
    await fs.writeFile(path.join(repo, 'new.txt'), 'new\n');
    expect((await hardened(repo, 'add', 'new.txt')).exitCode).toBe(0);
    expect((await hardened(repo, 'commit', '-q', '-m', 'add new')).exitCode).toBe(0);
    const log = await hardened(repo, 'log', '--oneline');
    expect(log.stdout).toMatch(/add new/);
    expect((await hardened(repo, 'status', '--short')).stdout).toBe('');
    expect((await hardened(repo, 'branch', '--show-current')).stdout).toBe('main\n');
  });

  it('works outside a repository (no config to scan)', async () => {
    const result = await runInvocation(['git', '--version'], { cwd: root });
    expect(result.stdout).toMatch(/^git version/);
    const status = await runInvocation(['git', 'status'], { cwd: root });
    expect(status.exitCode).not.toBe(0);
  });
});
