/**
 * Two corpora through the whole `shell_execute` governance (classifier, path confinement, repository
 * configuration) on a real git repository:
 *
 * - at least 2,000 hostile commands generated from a grammar (subcommands × options × abbreviations ×
 *   refspecs × paths × config keys), each checked against the tier it must get;
 * - at least 100 ordinary commands an agent runs without a human, whose false-approval rate must be 0.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { judgeConfig, judgeConfigKey, type ConfigTier } from '../../activities/security/git-config-policy';
import { governShellCommand, type RepositoryConfigVerdict } from '../../activities/tools/shell-tool';
import { readEffectiveGitConfig } from '../../activities/tools/shell/git-config';

const GIT_ENV = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  HOME: os.tmpdir(),
};
const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@example.com', ...args], {
    cwd,
    env: GIT_ENV,
    encoding: 'utf8',
  });

/** The whole hostile corpus must be judged within this budget (the issue asks for under a minute). */
const CORPUS_BUDGET_MS = 60_000;
const MIN_HOSTILE = 2_000;
const MIN_ORDINARY = 100;

let workspace: string;
let outside: string;
let remoteUrl: string;
let repositoryVerdict: Promise<RepositoryConfigVerdict> | undefined;

beforeAll(() => {
  outside = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'gov-corpus-outside-')));
  workspace = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'gov-corpus-ws-')));
  remoteUrl = path.join(outside, 'remote.git');
  execFileSync('git', ['init', '-q', '--bare', '-b', 'main', remoteUrl], { env: GIT_ENV });
  git(workspace, 'init', '-q', '-b', 'main');
  writeFileSync(path.join(workspace, 'a.txt'), 'x\n');
  mkdirSync(path.join(workspace, 'src'));
  writeFileSync(path.join(workspace, 'src', 'b.ts'), 'export const x = 1;\n');
  git(workspace, 'add', '-A');
  git(workspace, 'commit', '-q', '-m', 'first');
  git(workspace, 'branch', 'feature');
  git(workspace, 'remote', 'add', 'origin', remoteUrl);
  git(workspace, 'push', '-q', 'origin', 'main');
  git(workspace, 'fetch', '-q', 'origin');
  writeFileSync(path.join(outside, 'secret.txt'), 'outside\n');
  symlinkSync(path.join(outside, 'secret.txt'), path.join(workspace, 'link-out'));
  symlinkSync(path.join(outside, 'nothere'), path.join(workspace, 'dangling'));
  symlinkSync(outside, path.join(workspace, 'dirlink'));
});

afterAll(() => {
  rmSync(workspace, { recursive: true, force: true });
  rmSync(outside, { recursive: true, force: true });
});

/** The repository's real effective configuration, judged once (it does not change between commands). */
function judgeRepository(): Promise<RepositoryConfigVerdict> {
  repositoryVerdict ??= readEffectiveGitConfig(workspace).then((config) => {
    if (!config.ok) throw new Error(config.error);
    return { ...judgeConfig(config.entries, new Set([remoteUrl])), remoteNames: ['origin'] };
  });
  return repositoryVerdict;
}

async function tierOf(command: string | string[]): Promise<ConfigTier> {
  const verdict = await governShellCommand(command, {
    workspaceDir: workspace,
    existingBranches: ['main', 'feature'],
    existingRefs: [
      'refs/heads/main',
      'refs/heads/feature',
      'refs/remotes/origin/main',
      'refs/tags/release',
      'refs/tags/v1',
    ],
    judgeRepositoryConfig: judgeRepository,
  });
  return verdict.tier;
}

interface Case {
  command: string | string[];
  expected: ConfigTier;
}

/** Every non-empty prefix of a long option, as git's unique-prefix matching would accept it. */
const prefixes = (name: string, from = 1) =>
  Array.from({ length: name.length - from + 1 }, (_, i) => `--${name.slice(0, from + i)}`);

function hostileCorpus(): { commands: Case[]; configKeys: Array<{ key: string; expected: ConfigTier }> } {
  const commands: Case[] = [];
  const add = (expected: ConfigTier, ...argvs: string[][]) =>
    argvs.forEach((command) => commands.push({ command, expected }));

  // 1. Options that write files, on every read-only subcommand, in every abbreviation and value spelling.
  const readOnlySubcommands = [
    ['log'],
    ['show'],
    ['diff'],
    ['rev-list', 'HEAD'],
    ['blame', 'a.txt'],
    ['annotate', 'a.txt'],
    ['shortlog', 'HEAD'],
    ['reflog', 'show'],
    ['grep', 'x'],
    ['ls-files'],
    ['status'],
    ['cat-file', '-p', 'HEAD'],
    ['for-each-ref'],
    ['describe', '--always'],
    ['name-rev', 'HEAD'],
    ['cherry'],
    ['ls-tree', 'HEAD'],
    ['rev-parse', 'HEAD'],
    ['show-ref'],
    ['commit', '-m', 'm'],
    ['add', 'a.txt'],
  ];
  for (const sub of readOnlySubcommands) {
    for (const option of [...prefixes('output'), ...prefixes('template', 3), ...prefixes('separate-git-dir', 3)]) {
      for (const value of ['out.txt', '/tmp/pwned', '../pwned']) {
        add('approval', ['git', ...sub, `${option}=${value}`]);
      }
      add('approval', ['git', ...sub, option, 'out.txt']);
    }
  }
  // 2. Options that name or enable a program: denied on every subcommand, in every abbreviation.
  const programOptions = [
    ...prefixes('upload-pack'),
    ...prefixes('receive-pack'),
    ...prefixes('exec'),
    ...prefixes('ext-diff'),
    ...prefixes('textconv').filter((o) => o !== '--text'),
    ...prefixes('extcmd'),
    ...prefixes('tool'),
  ];
  const programSubcommands = [
    ['log'],
    ['show'],
    ['diff'],
    ['fetch', 'origin'],
    ['ls-remote', 'origin'],
    ['blame', 'a.txt'],
    ['grep', 'x'],
    ['status'],
  ];
  for (const sub of programSubcommands) {
    for (const option of new Set(programOptions)) add('deny', ['git', ...sub, `${option}=touch /tmp/pwned`]);
  }
  // 3. `cat-file --filters` under every prefix git accepts.
  for (const option of prefixes('filters')) {
    for (const rest of [['-p', 'HEAD:a.txt'], ['--batch'], ['blob', 'HEAD:a.txt']])
      add('approval', ['git', 'cat-file', option, ...rest]);
  }
  // 4. Push destinations, resolved as git resolves them, onto protected branches.
  const protectedNames = ['main', 'master', 'release/1.0', 'production', 'MAIN', 'Main', 'Release/2.0'];
  const spellings = (name: string) => [
    name,
    `heads/${name}`,
    `refs/heads/${name}`,
    `refs/heads/./${name}`,
    `refs//heads/${name}`,
    `Heads/${name}`,
    `refs/heads//${name}`,
    `REFS/HEADS/${name}`,
  ];
  for (const name of protectedNames) {
    for (const destination of spellings(name)) {
      for (const source of ['HEAD', 'feature', 'refs/heads/feature']) {
        add(
          'approval',
          ['git', 'push', 'origin', `${source}:${destination}`],
          ['git', 'push', '-u', 'origin', `${source}:${destination}`],
        );
        add('deny', ['git', 'push', 'origin', `+${source}:${destination}`]);
      }
      add('approval', ['git', 'push', 'origin', `:${destination}`]);
    }
  }
  for (const destination of [
    'HEAD',
    'refs/heads/HEAD',
    '@',
    'refs/tags/v1',
    'tags/v1',
    'remotes/origin/main',
    'refs/remotes/origin/main',
    'refs/notes/x',
    'refs/heads/../main',
  ]) {
    add('approval', ['git', 'push', 'origin', `feature:${destination}`]);
  }
  for (const option of [
    '--force',
    '-f',
    '--forc',
    '--fo',
    '--force-with-lease',
    '--force-w',
    '--force-with-lease=main',
    '--force-if-includes',
    '--mirror',
    '--mirr',
    '-fu',
    '-uf',
    '-vf',
  ]) {
    add('deny', ['git', 'push', option, 'origin', 'HEAD:feature']);
  }
  for (const option of [
    '--all',
    '--branches',
    '--tags',
    '--prune',
    '--delete',
    '-d',
    '--repo=elsewhere',
    '--follow-tags',
  ]) {
    add('approval', ['git', 'push', option, 'origin', 'HEAD:feature']);
  }
  for (const remote of [
    '../elsewhere.git',
    '/tmp/elsewhere.git',
    `file://${outside}/remote.git`,
    'ssh://host/x',
    'https://example.com/x.git',
    'ext::sh -c touch% /tmp/pwned',
  ]) {
    add('approval', ['git', 'push', remote, 'HEAD:feature'], ['git', 'fetch', remote]);
  }
  add('approval', ['git', 'push'], ['git', 'push', 'origin'], ['git', 'push', 'origin', 'HEAD']);
  // 5. Paths outside the workspace (approval) and in the kernel's pseudo-filesystems (deny), for every command.
  const pathCommands = [
    ['cat'],
    ['head'],
    ['tail'],
    ['wc'],
    ['stat'],
    ['ls'],
    ['grep', '-r', 'x'],
    ['grep', 'x'],
    ['find'],
    ['diff', 'a.txt'],
    ['file'],
    ['du'],
    ['git', 'log', '--'],
    ['git', 'ls-files', '--'],
    ['git', 'diff', '--no-index', 'a.txt'],
    ['git', 'commit', '-F'],
    ['git', 'blame', '--contents'],
    ['git', 'add'],
    ['sort'],
    ['uniq'],
  ];
  const outsidePaths = [
    '/etc/passwd',
    '/etc',
    '../',
    '..',
    '../secret.txt',
    `${outside}/secret.txt`,
    'link-out',
    'dangling',
    'dirlink/secret.txt',
    'dirlink',
    'src/../../x',
    '/tmp',
    '/',
    '/root/.ssh/id_rsa',
    './../x',
  ];
  const pseudoPaths = [
    '/proc/self/environ',
    '/proc/1/environ',
    '/proc/self/status',
    '/sys/kernel/notes',
    '/dev/sda',
    '/dev/mem',
    '../../../../../../../proc/self/environ',
    '/proc',
    '/dev/tcp/127.0.0.1/80',
    '/dev/stdin',
    '/dev/fd/0',
  ];
  for (const command of pathCommands) {
    for (const p of outsidePaths) add('approval', [...command, p]);
    for (const p of pseudoPaths) add('deny', [...command, p]);
  }
  for (const p of outsidePaths)
    add('approval', ['git', 'commit', `-F${p}`], ['git', 'commit', `--file=${p}`], ['git', 'log', `--output=${p}`]);
  for (const p of pseudoPaths)
    add('deny', ['git', 'commit', `-F${p}`], ['git', 'commit', `--file=${p}`], ['grep', `--file=${p}`, 'a.txt']);
  // Following links out of the workspace.
  add(
    'approval',
    ['grep', '-R', 'x', '.'],
    ['grep', '--dereference-recursive', 'x'],
    ['find', '-L', '.'],
    ['find', '.', '-follow'],
    ['ls', '-L', 'dirlink'],
    ['diff', '-r', 'src', 'src'],
    ['git', 'grep', '--no-index', 'x'],
  );

  // 7. Issue 18's classes: folders and files as remotes, name lists, configuration from outside the
  //    repository, tag pruning, switch targets that git resolves to a tag or spells as a ref.
  for (const sub of ['push', 'fetch', 'ls-remote', 'pull']) {
    for (const name of ['cache', 'pointer', '.', './cache', 'sub/dir', 'origin2'])
      add('approval', ['git', sub, name, ...(sub === 'push' ? ['HEAD:x'] : [])]);
  }
  for (const option of ['--files0-from=list', '--files0', '--files-from=list'])
    for (const cmd of ['sort', 'wc', 'du']) add('approval', [cmd, option]);
  add(
    'approval',
    ['find', '-files0-from', 'list'],
    ['file', '-f', 'list'],
    ['file', '-bf', 'list'],
    ['file', '--files-from', 'list'],
  );
  for (const option of [
    '--system',
    '--global',
    '--includes',
    '--file=f',
    '--blob=HEAD:f',
    '--sys',
    '--glob',
    '--inc',
  ]) {
    add('approval', ['git', 'config', option, '--list'], ['git', 'config', '--list', option]);
  }
  add('approval', ['git', 'config', '-f', 'f', '--list']);
  add(
    'approval',
    ['git', 'fetch', '--prune-tags', 'origin'],
    ['git', 'fetch', '-P', 'origin'],
    ['git', 'fetch', '-pP', 'origin'],
    ['git', 'fetch', '--prune', '--prune-tags', 'origin'],
    ['git', 'fetch', '--prune-t', 'origin'],
  );
  for (const sub of ['switch', 'checkout']) {
    add(
      'approval',
      ['git', sub, 'release'],
      ['git', sub, 'v1'],
      ['git', sub, 'refs/heads/main'],
      ['git', sub, 'refs/heads/new'],
      ['git', sub, 'heads/main'],
      ['git', sub, 'tags/v1'],
    );
  }

  // 6. Configuration keys: judged directly (every case spelling) and written with `git config`.
  const deniedKeys = [
    'trailer.x.command',
    'trailer.x.cmd',
    'interactive.diffFilter',
    'include.path',
    'includeIf.gitdir:/x/.path',
    'core.worktree',
    'core.hooksPath',
    'core.fsmonitor',
    'core.sshCommand',
    'core.pager',
    'core.editor',
    'core.askPass',
    'core.gitProxy',
    'diff.external',
    'diff.x.textconv',
    'diff.x.command',
    'filter.x.clean',
    'filter.x.smudge',
    'filter.x.process',
    'merge.x.driver',
    'credential.helper',
    'credential.https://h.helper',
    'gpg.program',
    'gpg.ssh.program',
    'gpg.x509.program',
    'alias.st',
    'pager.log',
    'sequence.editor',
    'remote.origin.uploadpack',
    'remote.origin.receivepack',
    'remote.origin.vcs',
    'remote.origin.proxy',
    'url.x.insteadOf',
    'url.x.pushInsteadOf',
    'core.attributesFile',
    'core.excludesFile',
    'commit.template',
    'submodule.x.update',
    'http.sslCert',
    'http.proxy',
    'mailmap.file',
    'blame.ignoreRevsFile',
    'difftool.x.cmd',
    'mergetool.x.cmd',
    'sendemail.smtpServer',
    'man.viewer',
    'web.browser',
    'uploadpack.packObjectsHook',
    'core.alternateRefsCommand',
    'ssh.variant',
    'init.templateDir',
    'gpg.ssh.defaultKeyCommand',
    'core.sshcommand',
    'lfs.url',
    'protocol.allow',
  ];
  const unknownKeys = [
    'foo.bar',
    'core.bogus',
    'remote.origin.mirror',
    'remote.origin.push',
    'branch.main.unknown',
    'x.y.z',
    'receive.fsckObjects',
    'fetch.negotiationAlgorithm',
  ];
  const configKeys: Array<{ key: string; expected: ConfigTier }> = [];
  const caseSpellings = (key: string) => [
    key,
    key.toUpperCase(),
    key.toLowerCase(),
    key.replace(/\.([a-z])/g, (m) => m.toUpperCase()),
  ];
  for (const key of deniedKeys) {
    for (const spelling of new Set(caseSpellings(key))) {
      configKeys.push({ key: spelling, expected: 'deny' });
      add(
        'deny',
        ['git', 'config', spelling, 'touch /tmp/pwned'],
        ['git', 'config', '--add', spelling, 'x'],
        ['git', 'config', 'set', spelling, 'x'],
      );
    }
  }
  for (const key of unknownKeys) configKeys.push({ key, expected: 'approval' });
  return { commands, configKeys };
}

const ORDINARY: Array<string | string[]> = [
  'git status',
  'git status -s',
  'git status --short --branch',
  'git diff',
  'git diff --stat',
  'git diff HEAD',
  'git diff --cached',
  'git diff main..feature',
  'git diff HEAD~0 -- a.txt',
  'git diff --name-only',
  'git log',
  'git log --oneline',
  'git log -n 5',
  'git log --oneline -5 --graph',
  'git log -p -1',
  'git log --stat',
  'git log --format=%H%x09%s -3',
  'git log origin/main..HEAD',
  'git log --all --oneline',
  'git log -- src',
  'git show',
  'git show HEAD --stat',
  'git show HEAD:a.txt',
  'git show --name-only HEAD',
  'git blame a.txt',
  'git blame -L 1,1 a.txt',
  'git branch',
  'git branch -a',
  'git branch -v',
  'git branch --show-current',
  'git branch -r',
  'git tag',
  'git tag -l',
  'git remote -v',
  'git remote',
  'git remote get-url origin',
  'git rev-parse HEAD',
  'git rev-parse --abbrev-ref HEAD',
  'git rev-parse --show-toplevel',
  'git ls-files',
  'git ls-files src',
  'git grep x',
  'git grep -n x -- src',
  'git grep -i export',
  'git add a.txt',
  'git add -A',
  'git add .',
  'git add src/b.ts',
  'git add src',
  'git commit -m "add feature"',
  'git commit -am "msg"',
  "git commit -m 'fix: handle paths like src/b.ts'",
  'git commit -m "Refactor the output writer"',
  'git commit --allow-empty -m wip',
  'git switch -c new-x',
  'git checkout -b new-y',
  'git switch -c feat/z main',
  'git checkout -b fix/1 HEAD',
  'git fetch',
  'git fetch origin',
  'git fetch origin main',
  'git fetch --prune origin',
  'git fetch -q origin',
  'git push origin HEAD:feature-x',
  'git push -u origin feature-x',
  'git push origin feature',
  'git push origin HEAD:refs/heads/topic',
  'git push origin HEAD:heads/topic',
  'git push -u origin HEAD:feat/z',
  'git push origin new-x:new-x',
  'git stash list',
  'git reflog',
  'git ls-remote origin',
  'git describe --always',
  'git shortlog -sn HEAD',
  'git cat-file -p HEAD',
  'git show-ref',
  'ls',
  'ls -la',
  'ls src',
  'ls -R src',
  'cat a.txt',
  'cat src/b.ts',
  'head -n 5 a.txt',
  'tail a.txt',
  'tail -n 3 src/b.ts',
  'wc -l a.txt',
  'grep -n x a.txt',
  'grep -rn export src',
  'grep -r x .',
  'grep -c x a.txt',
  "find . -name '*.ts'",
  'find src -type f',
  'stat a.txt',
  'pwd',
  'echo hello',
  'diff a.txt src/b.ts',
  'du -sh .',
  'sort a.txt',
  'uniq a.txt',
  'which git',
  'date',
  'node --version',
  'git --version',
  'file a.txt',
  'git status && git diff',
  'git add -A && git commit -m wip',
  'git switch -c work && git add . && git commit -m start',
  'ls && cat a.txt',
  'git fetch origin && git log --oneline origin/main',
  'git add a.txt && git commit -m "one file" && git push origin HEAD:feature-y',
  ['git', 'commit', '-m', 'a message with spaces and a/slash'],
  ['cat', 'a.txt'],
  ['git', 'log', '--oneline', '-3'],
  'cat /dev/null',
  'grep x /dev/null',
];

describe('governance corpora', () => {
  test(`a generated corpus of at least ${MIN_HOSTILE} hostile commands gets the expected tier, within a minute`, async () => {
    const started = Date.now();
    const { commands, configKeys } = hostileCorpus();
    const mismatches: string[] = [];
    for (const { command, expected } of commands) {
      const tier = await tierOf(command);
      if (tier !== expected) mismatches.push(`${JSON.stringify(command)}: ${tier}, expected ${expected}`);
    }
    for (const { key, expected } of configKeys) {
      const tier = judgeConfigKey(key).tier;
      if (tier !== expected) mismatches.push(`config key ${key}: ${tier}, expected ${expected}`);
    }
    const elapsed = Date.now() - started;
    expect(mismatches).toEqual([]);
    expect(commands.length + configKeys.length).toBeGreaterThanOrEqual(MIN_HOSTILE);
    expect(elapsed).toBeLessThan(CORPUS_BUDGET_MS);
  });

  test(`at least ${MIN_ORDINARY} ordinary commands run without a human: false-approval rate 0`, async () => {
    const asked: string[] = [];
    for (const command of ORDINARY) {
      const tier = await tierOf(command);
      if (tier !== 'allow') asked.push(`${JSON.stringify(command)}: ${tier}`);
    }
    const falseApprovalRate = asked.length / ORDINARY.length;
    expect(ORDINARY.length).toBeGreaterThanOrEqual(MIN_ORDINARY);
    expect(asked).toEqual([]);
    expect(falseApprovalRate).toBe(0);
  });

  test('the effective configuration (includes resolved) is judged: a hostile key in an included file, or an unknown remote URL, is caught', async () => {
    const repo = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'gov-corpus-config-')));
    try {
      git(repo, 'init', '-q', '-b', 'main');
      const judged = async (known: string[] = []) => {
        const config = await readEffectiveGitConfig(repo);
        if (!config.ok) throw new Error(config.error);
        return judgeConfig(config.entries, new Set(known));
      };
      expect((await judged()).tier).toBe('allow');
      writeFileSync(path.join(repo, 'inc.cfg'), '[trailer "x"]\n\tcmd = touch /tmp/pwned\n');
      git(repo, 'config', 'include.path', '../inc.cfg');
      const withInclude = await judged();
      expect(withInclude.tier).toBe('deny');
      expect(withInclude.reason).toMatch(/trailer\.x\.cmd/);
      git(repo, 'config', '--unset', 'include.path');
      git(repo, 'remote', 'add', 'origin', remoteUrl);
      expect((await judged([remoteUrl])).tier).toBe('allow');
      git(repo, 'remote', 'set-url', 'origin', '/tmp/elsewhere.git');
      const moved = await judged([remoteUrl]);
      expect(moved.tier).toBe('approval');
      expect(moved.unknownRemoteUrls).toEqual(['/tmp/elsewhere.git']);
      git(repo, 'config', 'remote.origin.fetch', '+refs/heads/*:refs/heads/*');
      expect((await judged(['/tmp/elsewhere.git'])).reason).toMatch(/remote\.origin\.fetch/);
    } finally {
      rmSync(repo, { recursive: true, force: true });
    }
  });
});
