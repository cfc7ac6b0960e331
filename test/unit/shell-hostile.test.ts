/**
 * Hostile command strings, end to end: each is first shown to be harmful when given to a real shell
 * (it creates the marker file), then goes through evaluate → (execute, when allowed) and must leave
 * no marker.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { evaluateShellCommand, executeShellCommand } from '../../activities/tools/shell';

let workspace: string;
let marker: string;

beforeEach(async () => {
  workspace = await fs.mkdtemp(path.join(os.tmpdir(), 'shell-hostile-'));
  marker = path.join(workspace, 'pwned');
  execFileSync('git', ['init', '-q', workspace], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
  });
});

afterEach(async () => {
  await fs.rm(workspace, { recursive: true, force: true });
});

/** What a naive tool would do: hand the string to bash. */
function throughRealShell(command: string): void {
  try {
    execFileSync('/bin/bash', ['-c', command], {
      cwd: workspace,
      stdio: 'ignore',
      timeout: 10_000,
      env: { PATH: '/usr/bin:/bin', HOME: workspace },
    });
  } catch {
    // Only the side effect matters.
  }
}

/** The governed path: evaluate; run only what is allowed (denied and approval-tier commands wait). */
async function throughGovernance(command: string | string[]) {
  const verdict = await evaluateShellCommand(command, { existingBranches: ['main'] });
  if (verdict.tier === 'allow' && verdict.invocations) {
    await executeShellCommand(verdict.invocations, { cwd: workspace, timeoutMs: 10_000 });
  }
  return verdict;
}

const M = 'pwned';

describe('hostile strings create the marker through a shell, never through governance', () => {
  it.each<[string, 'deny']>([
    [`ls; touch ${M}`, 'deny'],
    [`ls && $(touch ${M})`, 'deny'],
    [`ls && echo $(touch ${M})`, 'deny'],
    [`ls \`touch ${M}\``, 'deny'],
    [`echo "\`touch ${M}\`"`, 'deny'],
    [`echo "$(touch ${M})"`, 'deny'],
    [`ls\ntouch ${M}`, 'deny'],
    [`ls\n\ntouch ${M}`, 'deny'],
    [`ls > ${M}`, 'deny'],
    [`ls >> ${M}`, 'deny'],
    [`ls 2> ${M}`, 'deny'],
    [`ls | tee ${M}`, 'deny'],
    [`ls missing-file || touch ${M}`, 'deny'],
    [`false || touch ${M}`, 'deny'],
    [`ls & touch ${M}`, 'deny'],
    [`cat <(touch ${M})`, 'deny'],
    [`X=$(touch ${M}) ls`, 'deny'],
    [`echo \${X:-$(touch ${M})}`, 'deny'],
    [`echo $((\`touch ${M}\`))`, 'deny'],
    [`(touch ${M})`, 'deny'],
    [`{ touch ${M}; }`, 'deny'],
    [`cat <<EOF\n$(touch ${M})\nEOF`, 'deny'],
    [`if true; then touch ${M}; fi`, 'deny'],
    [`echo $'\\x3b'; touch ${M}`, 'deny'],
    [`git status && sh -c 'touch ${M}'`, 'deny'],
    [`bash -c 'touch ${M}'`, 'deny'],
    [`env sh -c 'touch ${M}'`, 'deny'],
  ])('%j', async (command, tier) => {
    throughRealShell(command);
    expect(existsSync(marker)).toBe(true);
    await fs.rm(marker);

    const verdict = await throughGovernance(command);
    expect(verdict.tier).toBe(tier);
    expect(existsSync(marker)).toBe(false);
  });

  it.each<[string]>([
    [`git -c core.sshCommand='touch ${M}' fetch`],
    [`git -c core.fsmonitor='touch ${M}; false' status`],
    [`git -c alias.x='!touch ${M}' x`],
    [`git --upload-pack='touch ${M}; false' ls-remote .`],
    [`git ls-remote --upload-pack='touch ${M}; false' .`],
    [`git --config-env=core.fsmonitor=EVIL status`],
  ])('%j is denied', async (command) => {
    const verdict = await throughGovernance(command);
    expect(verdict.tier).toBe('deny');
    expect(existsSync(marker)).toBe(false);
  });

  it('through a real shell these really run the program (controls for the cases above)', async () => {
    for (const command of [
      `git ls-remote --upload-pack='touch ${M}; false' .`,
      `git -c alias.x='!touch ${M}' x`,
      `git -c core.fsmonitor='touch ${M}; false' status`,
    ]) {
      throughRealShell(command);
      expect(existsSync(marker)).toBe(true);
      await fs.rm(marker);
    }
  });
});

describe('literal text stays literal', () => {
  it.each<[string | string[], string]>([
    [`echo '$(touch ${M})'`, `$(touch ${M})\n`],
    [`echo '\`touch ${M}\`; touch ${M}'`, `\`touch ${M}\`; touch ${M}\n`],
    [`echo "semi; colon && amp | pipe > gt"`, 'semi; colon && amp | pipe > gt\n'],
    [['echo', `; touch ${M}`, `$(touch ${M})`], `; touch ${M} $(touch ${M})\n`],
  ])('%j runs with its text as arguments', async (command, stdout) => {
    const verdict = await evaluateShellCommand(command);
    expect(verdict.tier).toBe('allow');
    const execution = await executeShellCommand(verdict.invocations ?? [], { cwd: workspace });
    expect(execution.steps[0]?.result.stdout).toBe(stdout);
    expect(existsSync(marker)).toBe(false);
  });

  it('an argv array with shell syntax in an argument runs it as a file name', async () => {
    const verdict = await throughGovernance(['ls', `x; touch ${M}`]);
    expect(verdict.tier).toBe('allow');
    expect(existsSync(marker)).toBe(false);
  });
});

describe('look-alikes and invisible characters', () => {
  it.each<[string | string[]]>([
    [`tоuch ${M}`], // Cyrillic о: would be an unknown command, refused before anything runs
    [`ls；touch ${M}`], // fullwidth semicolon
    [`ls ｜ touch ${M}`], // fullwidth vertical bar
    [`ls\u200b; touch ${M}`], // zero-width space
    [`ls \u202e;${M} hcuot`], // right-to-left override hides the order
    [`ls\u2028touch ${M}`], // Unicode line separator
    [`ls\u0000touch ${M}`],
    [['ls', `a\u0000b`]],
    [['gіt', 'status']],
  ])('%j is denied', async (command) => {
    const verdict = await throughGovernance(command);
    expect(verdict.tier).toBe('deny');
    expect(existsSync(marker)).toBe(false);
  });
});

describe('destructive commands are denied, never run', () => {
  it.each(['rm -rf /', 'rm -rf .', 'sudo rm -rf /', 'git push --force origin main', 'git push origin +main'])(
    '%s',
    async (command) => {
      const verdict = await throughGovernance(command);
      expect(verdict.tier).toBe('deny');
    },
  );

  it('a denied invocation hidden in an && list is caught', async () => {
    const verdict = await throughGovernance(`echo ok && git push --force origin x && touch ${M}`);
    expect(verdict.tier).toBe('deny');
    expect(existsSync(marker)).toBe(false);
  });
});
