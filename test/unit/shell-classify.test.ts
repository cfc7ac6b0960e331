import { classifyCommand, classifyInvocation, type ShellPolicyContext } from '../../activities/tools/shell/classify';
import { evaluateShellCommand } from '../../activities/tools/shell';
import { parseCommand } from '../../activities/tools/shell/parse';

const ctx: ShellPolicyContext = { existingBranches: ['main', 'dev', 'feature/old'] };

async function tierOf(command: string, context: ShellPolicyContext = ctx) {
  return (await evaluateShellCommand(command, context)).tier;
}

describe('allow: read-only commands and safe workspace git operations', () => {
  it.each([
    'ls -la',
    'ls',
    'cat README.md',
    'head -n 20 src/a.ts',
    'tail -n 5 log.txt',
    'wc -l a b',
    "grep -rn 'TODO' src",
    "find . -name '*.ts' -type f",
    'pwd',
    'echo hello',
    'date',
    "date '+%Y-%m-%d'",
    'which git',
    'stat package.json',
    'diff a.txt b.txt',
    'sort names.txt',
    'uniq names.txt',
    'tree src',
    'file image.png',
    'du -sh .',
    'df -h',
    'node --version',
    'npm --version',
    'python3 --version',
    'git --version',
    'git status',
    'git status --short',
    'git log --oneline -n 10',
    'git diff HEAD~1 -- src',
    'git diff --text',
    'git show HEAD',
    'git branch',
    'git branch -a',
    'git branch -avv',
    'git branch --show-current',
    'git branch --list "feature/*"',
    'git branch --contains HEAD',
    'git rev-parse HEAD',
    'git ls-files',
    'git blame src/a.ts',
    'git remote -v',
    'git remote',
    'git remote get-url origin',
    'git tag',
    'git tag -l "v*"',
    'git stash list',
    'git config --get user.name',
    'git config --list',
    'git --no-pager log',
    'git add -A',
    'git add src/a.ts',
    'git commit -m "fix: handle empty input"',
    'git checkout -b feature/new',
    'git checkout -b fix-1 origin/main',
    'git switch -c feature/new',
    'git switch --create feature/new',
    'git switch brand-new',
    'git push origin feature/new',
    'git push -u origin feature/new',
    'git push origin HEAD:feature/new',
    'git push origin refs/heads/x:refs/heads/feature/x',
    'git fetch',
    'git fetch origin',
    'git fetch --prune origin',
    'git ls-remote origin',
    'git merge --abort',
    'git rebase --abort',
    'git add -A && git commit -m "wip" && git push origin wip',
  ])('%s', async (command) => {
    const result = await evaluateShellCommand(command, ctx);
    expect(result).toMatchObject({ tier: 'allow' });
  });
});

describe('approval: risky, or not provably safe', () => {
  it.each([
    // the risky git operations
    'git checkout main',
    'git checkout dev',
    'git switch dev',
    'git checkout -- src/a.ts',
    'git checkout src/a.ts',
    'git merge dev',
    'git merge --no-ff dev',
    'git rebase main',
    'git rebase -i HEAD~3',
    'git pull',
    'git push origin main',
    'git push origin master',
    'git push origin production',
    'git push origin release/2.0',
    'git push origin HEAD:main',
    'git push origin feature:Main',
    'git push origin HEAD',
    'git push',
    'git push origin',
    'git push /other/agent/repo feature',
    'git push https://example.com/r.git feature',
    'git push origin --delete feature',
    'git push origin :feature',
    'git push --all origin',
    'git push --tags origin',
    'git push origin refs/tags/v1',
    'git reset --hard',
    'git reset HEAD~1',
    'git clean -fdx',
    'git restore src/a.ts',
    'git stash',
    'git stash pop',
    'git commit --amend -m x',
    'git branch new-branch',
    'git branch -D old',
    'git branch -m a b',
    'git branch --abbrev new-branch',
    'git branch --color new-branch',
    'git tag v1.0',
    'git tag -d v1.0',
    'git remote add evil https://example.com/x.git',
    'git config user.name agent',
    'git worktree add ../wt -b x',
    'git checkout -B main',
    'git switch -C main',
    'git switch -f other',
    'git cherry-pick abc123',
    'git clone https://example.com/r.git',
    'git fetch https://example.com/r.git',
    'git fetch origin main:main',
    'git fetch -f origin',
    'git log --output=out.txt',
    'git grep -O hello',
    'git help status',
    'git --paginate log',
    // file changes, network, packages, code
    'rm file.txt',
    'rm -rf build',
    'rmdir empty',
    'mv a b',
    'cp a b',
    'chmod +x run.sh',
    'chmod -R 755 build',
    'touch new.txt',
    'mkdir -p x/y',
    'curl https://example.com',
    'wget https://example.com',
    'npm install',
    'npm test',
    'pip install requests',
    'node script.js',
    'python3 -c "print(1)"',
    'make',
    'bash script.sh',
    'sed -i s/a/b/ f',
    "find . -name '*.tmp' -delete",
    "find . -exec cat '{}' ';'",
    'sort -o out.txt in.txt',
    'sort --output=out.txt in.txt',
    'sort --compress-program=gzip big.txt',
    'uniq in.txt out.txt',
    'tree -o out.txt',
    'date -s "2020-01-01"',
    'file -C -m magic',
    'sudo ls',
    'env ls',
    'timeout 10 ls',
    '/bin/ls',
    './ls',
    'some-unknown-tool --flag',
    'kill 1',
  ])('%s', async (command) => {
    expect(await tierOf(command)).toBe('approval');
  });

  it('without a branch list, `git switch <name>` cannot be proved to create a branch', () => {
    expect(classifyInvocation(['git', 'switch', 'brand-new'], {}).tier).toBe('approval');
  });

  it('a branch created earlier in the same && list counts as existing', async () => {
    expect(await tierOf('git switch -c topic && git switch topic')).toBe('approval');
  });

  it('honours custom protected branches (patterns, case-insensitive)', () => {
    const custom = { protectedBranches: ['trunk', 'hotfix/*'] };
    expect(classifyInvocation(['git', 'push', 'origin', 'trunk'], custom).tier).toBe('approval');
    expect(classifyInvocation(['git', 'push', 'origin', 'HOTFIX/1'], custom).tier).toBe('approval');
    expect(classifyInvocation(['git', 'push', 'origin', 'main'], custom).tier).toBe('allow');
  });
});

describe('deny: destructive, code-execution or governance-evading', () => {
  it.each([
    // force push is always denied (the design document wins over its reference code)
    'git push -f origin feature',
    'git push --force origin feature',
    'git push --force-with-lease origin feature',
    'git push --force-with-lease=feature:abc origin feature',
    'git push --force-if-includes origin feature',
    'git push --forc origin feature',
    'git push -uf origin feature',
    'git push origin +feature',
    'git push origin +HEAD:feature',
    'git push origin feature +other',
    'git push --mirror origin',
    'git push --force origin main',
    // git options that run programs or escape the repository
    "git -c core.sshCommand='touch pwned' fetch",
    'git -c alias.x=!sh x',
    'git --config-env=core.pager=EVIL log',
    'git --exec-path=/tmp status',
    'git --git-dir=/other/.git status',
    'git --work-tree=/ status',
    'git -C /other status',
    "git --upload-pack='touch pwned' ls-remote .",
    "git ls-remote --upload-pack='touch pwned' .",
    "git fetch --upload-pack='touch pwned' origin",
    "git fetch --upl='touch pwned' origin",
    "git push --receive-pack='touch pwned' origin x",
    "git push --exec='touch pwned' origin x",
    "git clone -u 'touch pwned' src dst",
    "git ls-remote -u 'touch pwned' .",
    "git archive --exec='touch pwned' --remote=x HEAD",
    'git diff --ext-diff',
    'git log -p --textconv',
    'git show --textc',
    // config writes that make git run programs
    "git config core.fsmonitor 'touch pwned'",
    "git config core.hooksPath '.hooks'",
    "git config core.sshCommand 'touch pwned'",
    "git config alias.st '!touch pwned'",
    "git config --add alias.st '!touch pwned'",
    "git config diff.external 'touch pwned'",
    "git config diff.x.textconv 'touch pwned'",
    "git config filter.x.clean 'touch pwned'",
    "git config --file .git/config core.pager 'touch pwned'",
    "git config set core.fsmonitor 'touch pwned'",
    'git config include.path evil.cfg',
    'git config --rename-section foo alias',
    // unknown subcommands (repository aliases can be !sh) and tool runners
    'git st',
    'git stauts',
    'git lfs pull',
    'git difftool',
    'git mergetool',
    'git hook run pre-commit',
    // wipes
    'rm -rf /',
    'rm -rf /*',
    'rm -fr /',
    'rm -r -f /',
    'rm --recursive --force /',
    'rm -rf -- /',
    'rm -rf /etc',
    'rm -rf /home',
    'rm -rf /home/someone',
    'rm -rf /root',
    'rm -rf /Users/someone/',
    'rm -rf .',
    'rm -rf ./',
    'rm -rf ..',
    'rm -rf ../..',
    'rm --no-preserve-root -rf /',
    'chmod -R 777 /',
    'chown -R nobody /home/x',
    'mkfs.ext4 /dev/sda1',
    'dd if=/dev/zero of=/dev/sda',
    // governance evasion
    'sudo rm -rf /',
    'env git push --force origin x',
    'env FOO=1 git push -f origin x',
    'timeout 10 git push --force origin x',
    'nice -n 5 rm -rf /',
    'xargs rm -rf /',
    '/usr/bin/git push --force origin x',
    '/bin/rm -rf /',
    "find . -exec git push --force origin x ';'",
    "bash -c 'ls'",
    "sh -c 'git push --force'",
    "bash -lc 'ls'",
    "zsh -c 'ls'",
    "env sh -c 'ls'",
    "su -c 'ls'",
    "watch 'ls'",
    "env -S 'git push --force origin x'",
    "env --split-string='ls'",
    // builtins: no shell to run them
    'cd /tmp',
    'export FOO=1',
    'source ./env.sh',
    'eval ls',
    'exec ls',
    // unparseable or shell syntax
    'ls; rm -rf x',
    'ls | wc',
    'ls && $(touch pwned)',
    'ls > out.txt',
    'echo $HOME',
  ])('%s', async (command) => {
    expect(await tierOf(command)).toBe('deny');
  });

  it('a list takes its strictest tier and says which command decided it', async () => {
    const result = await evaluateShellCommand('git status && git push --force origin x && rm -rf build', ctx);
    expect(result.tier).toBe('deny');
    expect(result.reason).toMatch(/^git push --force origin x: force push/);
  });

  it('a parse failure is deny and carries the parse reason', async () => {
    const result = classifyCommand(await parseCommand('ls | wc'));
    expect(result).toEqual({ tier: 'deny', reason: expect.stringMatching(/cannot be reduced.*pipe/) });
  });

  it('argv arrays are judged the same way', () => {
    expect(classifyInvocation(['git', 'push', '--force', 'origin', 'x']).tier).toBe('deny');
    expect(classifyInvocation(['ls', '; rm -rf /']).tier).toBe('allow');
    expect(classifyInvocation(['rm', '-rf', '~']).tier).toBe('deny');
    expect(classifyInvocation(['rm', '-rf', '$HOME']).tier).toBe('deny');
  });

  it('names of Object.prototype members are not mistaken for table entries', async () => {
    expect(await tierOf('git constructor -b x')).toBe('deny');
    expect(await tierOf('git checkout constructor')).toBe('approval');
    expect(await tierOf('git toString')).toBe('deny');
    expect(await tierOf('constructor')).toBe('approval');
    expect(await tierOf('hasOwnProperty --version')).toBe('approval');
  });

  it('deeply nested wrappers are denied rather than judged partially', () => {
    expect(classifyInvocation(['env', 'env', 'env', 'env', 'env', 'env', 'ls']).tier).toBe('deny');
  });
});

describe('reasons', () => {
  it.each<[string, RegExp]>([
    ['git push origin main', /protected branch main/],
    ['git checkout dev', /existing branch/],
    ['git push -f origin x', /force push .* always denied/],
    ['git st', /not a builtin git subcommand/],
    ['npm install', /installs packages/],
    ['curl https://x', /network/],
    ['cd src', /shell builtin/],
  ])('%s → %s', async (command, reason) => {
    expect((await evaluateShellCommand(command, ctx)).reason).toMatch(reason);
  });
});
