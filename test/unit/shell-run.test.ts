import { existsSync, promises as fs, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { executeShellCommand } from '../../activities/tools/shell';
import { RUNNER_PATH, runInvocation, ShellCommandDeniedError } from '../../activities/tools/shell/run';
import { SANDBOX_HOME } from '../../activities/tools/shell/sandbox';
import { eventually } from '../support/eventually';

/** The workflow contract: cancellation lands within seconds. */
const CANCELLATION_BUDGET_MS = 5_000;

let workspace: string;

beforeEach(async () => {
  workspace = await fs.mkdtemp(path.join(os.tmpdir(), 'shell-run-'));
});

afterEach(async () => {
  await fs.rm(workspace, { recursive: true, force: true });
});

async function script(name: string, body: string): Promise<string> {
  const file = path.join(workspace, name);
  await fs.writeFile(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return file;
}

/** Running (not a zombie: an orphan killed here may wait a while for a PID 1 that reaps it). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const state = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0];
    return state !== 'Z';
  } catch {
    return false;
  }
}

/** A `sleep` duration no other process on the machine uses, so its processes can be found from outside the sandbox. */
function uniqueSleep(): string {
  return `30.${process.pid}${Math.floor(Math.random() * 1e6)}`;
}

/** Host PIDs of running processes whose command line is `sleep <duration>` (sandboxed processes have other PIDs inside). */
function sleepers(duration: string): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8') === `sleep\0${duration}\0` && isAlive(Number(pid));
      } catch {
        return false;
      }
    })
    .map(Number);
}

async function waitUntilNone(duration: string, withinMs: number): Promise<boolean> {
  return eventually(() => sleepers(duration).length === 0, `no \`sleep ${duration}\` left`, withinMs, 50).then(
    () => true,
    () => false,
  );
}

describe('runInvocation', () => {
  it('runs argv without a shell and captures output and exit code', async () => {
    const result = await runInvocation(['echo', 'a; touch pwned', '$(touch pwned)'], { cwd: workspace });
    expect(result).toMatchObject({
      exitCode: 0,
      signal: null,
      stdout: 'a; touch pwned $(touch pwned)\n',
      timedOut: false,
      cancelled: false,
    });
    expect(existsSync(path.join(workspace, 'pwned'))).toBe(false);
  });

  it('reports a non-zero exit and stderr', async () => {
    const result = await runInvocation(['ls', 'no-such-file'], { cwd: workspace });
    expect(result.exitCode).not.toBe(0);
    expect(result.stderr).toMatch(/no-such-file/);
  });

  it('reports 127 for a program that does not exist', async () => {
    const result = await runInvocation(['no-such-program-xyz'], { cwd: workspace });
    expect(result).toMatchObject({ exitCode: 127, stderr: expect.stringMatching(/command not found/) });
  });

  it('looks commands up on the fixed system PATH, never in the workspace', async () => {
    await script('ls', `touch "${workspace}/pwned"`);
    const result = await runInvocation(['ls'], { cwd: workspace });
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toContain('ls');
    expect(existsSync(path.join(workspace, 'pwned'))).toBe(false);
  });

  it('passes a minimal environment: no secrets from the parent, HOME is a private directory in the sandbox', async () => {
    process.env.SHELL_TEST_API_KEY = 'sk-secret';
    process.env.DATABASE_URL = 'postgres://user:secret@db/x';
    try {
      const result = await runInvocation(['env'], { cwd: workspace, env: { EXTRA: 'from-caller' } });
      expect(result.stdout).not.toMatch(/secret/);
      expect(result.stdout).toContain(`PATH=${RUNNER_PATH}\n`);
      expect(result.stdout).toContain('EXTRA=from-caller');
      const home = /^HOME=(.*)$/m.exec(result.stdout)?.[1];
      expect(home).toBe(SANDBOX_HOME);
      expect(home).not.toBe(workspace);
      expect(result.stdout).not.toMatch(/^GIT_/m);
    } finally {
      delete process.env.SHELL_TEST_API_KEY;
      delete process.env.DATABASE_URL;
    }
  });

  it('closes stdin', async () => {
    const result = await runInvocation(['cat'], { cwd: workspace, timeoutMs: 5_000 });
    expect(result).toMatchObject({ exitCode: 0, stdout: '', timedOut: false });
  });

  it('refuses a denied invocation whatever the caller decided', async () => {
    await expect(runInvocation(['git', 'push', '--force', 'origin', 'x'], { cwd: workspace })).rejects.toBeInstanceOf(
      ShellCommandDeniedError,
    );
    await expect(runInvocation(['sh', '-c', `touch ${workspace}/pwned`], { cwd: workspace })).rejects.toThrow(
      /inline shell script/,
    );
    expect(existsSync(path.join(workspace, 'pwned'))).toBe(false);
  });

  it('cancels `sleep 30` within the budget', async () => {
    const controller = new AbortController();
    const started = Date.now();
    setTimeout(() => controller.abort(), 200);
    const result = await runInvocation(['sleep', '30'], { cwd: workspace, signal: controller.signal });
    expect(Date.now() - started).toBeLessThan(CANCELLATION_BUDGET_MS);
    expect(result).toMatchObject({ cancelled: true, timedOut: false, exitCode: null, signal: 'SIGTERM' });
  });

  it('cancels a command that ignores SIGTERM (SIGKILL after the grace period)', async () => {
    // An ignored signal stays ignored across exec, so neither the shell nor its sleep reacts to SIGTERM.
    const duration = uniqueSleep();
    const stubborn = await script('stubborn.sh', `trap '' TERM\necho ready\nsleep ${duration}\necho survived`);
    const controller = new AbortController();
    const started = Date.now();
    setTimeout(() => controller.abort(), 300);
    const result = await runInvocation([stubborn], { cwd: workspace, signal: controller.signal });
    expect(Date.now() - started).toBeLessThan(CANCELLATION_BUDGET_MS);
    // The sandbox's bubblewrap dies of SIGTERM and the kernel kills everything in its PID namespace.
    expect(result).toMatchObject({ cancelled: true, stdout: 'ready\n' });
    expect(['SIGTERM', 'SIGKILL']).toContain(result.signal);
    expect(await waitUntilNone(duration, 2_000)).toBe(true);
  });

  it('kills the whole process group on cancel, children included', async () => {
    const duration = uniqueSleep();
    const parent = await script('parent.sh', `sleep ${duration} &\necho $!\nwait`);
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 300);
    const result = await runInvocation([parent], { cwd: workspace, signal: controller.signal });
    expect(Number(result.stdout.trim())).toBeGreaterThan(0);
    expect(await waitUntilNone(duration, 2_000)).toBe(true);
  });

  it('returns without waiting for a background process, and kills what is left in its group', async () => {
    const duration = uniqueSleep();
    const leaver = await script('leaver.sh', `sleep ${duration} &\necho $!`);
    const started = Date.now();
    const result = await runInvocation([leaver], { cwd: workspace });
    expect(Date.now() - started).toBeLessThan(CANCELLATION_BUDGET_MS);
    expect(result.exitCode).toBe(0);
    expect(await waitUntilNone(duration, 2_000)).toBe(true);
  });

  it('settles even when a process that left the group keeps the pipes open', async () => {
    const duration = uniqueSleep();
    const escaper = await script('escaper.sh', `setsid sleep ${duration} &\necho $!`);
    const started = Date.now();
    const result = await runInvocation([escaper], { cwd: workspace });
    expect(Date.now() - started).toBeLessThan(CANCELLATION_BUDGET_MS);
    expect(result.exitCode).toBe(0);
    // Leaving the process group is not leaving the sandbox's PID namespace: it dies with the sandbox.
    expect(await waitUntilNone(duration, 2_000)).toBe(true);
  });

  it('returns at once when the signal is already aborted, without running anything', async () => {
    const controller = new AbortController();
    controller.abort();
    const result = await runInvocation(['touch', path.join(workspace, 'pwned')], {
      cwd: workspace,
      signal: controller.signal,
    });
    expect(result.cancelled).toBe(true);
    expect(existsSync(path.join(workspace, 'pwned'))).toBe(false);
  });

  it('times out', async () => {
    const started = Date.now();
    const result = await runInvocation(['sleep', '30'], { cwd: workspace, timeoutMs: 300 });
    expect(Date.now() - started).toBeLessThan(CANCELLATION_BUDGET_MS);
    expect(result).toMatchObject({ timedOut: true, cancelled: false, exitCode: null });
  });

  it('truncates long output, keeping the head and the tail around a marker', async () => {
    const result = await runInvocation(['seq', '1', '100000'], { cwd: workspace, maxOutputChars: 1_000 });
    expect(result.exitCode).toBe(0);
    expect(result.truncated).toBe(true);
    expect(result.stdout.startsWith('1\n2\n3\n')).toBe(true);
    expect(result.stdout.endsWith('99999\n100000\n')).toBe(true);
    expect(result.stdout).toMatch(/\[… \d+ characters truncated …\]/);
    expect(result.stdout.length).toBeLessThan(1_100);
  });

  it('does not truncate output within the cap', async () => {
    const result = await runInvocation(['seq', '1', '10'], { cwd: workspace, maxOutputChars: 1_000 });
    expect(result).toMatchObject({ truncated: false, stdout: '1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n' });
  });
});

describe('executeShellCommand', () => {
  it('runs invocations in order and stops at the first failure, like &&', async () => {
    const marker = path.join(workspace, 'after-failure');
    const execution = await executeShellCommand(
      [
        ['echo', 'one'],
        ['ls', 'missing-file'],
        ['touch', marker],
      ],
      { cwd: workspace },
    );
    expect(execution.succeeded).toBe(false);
    expect(execution.steps.map((step) => step.argv[0])).toEqual(['echo', 'ls']);
    expect(existsSync(marker)).toBe(false);
  });

  it('succeeds when every invocation exits 0', async () => {
    const execution = await executeShellCommand(
      [
        ['echo', 'one'],
        ['echo', 'two'],
      ],
      { cwd: workspace },
    );
    expect(execution.succeeded).toBe(true);
    expect(execution.steps.map((step) => step.result.stdout)).toEqual(['one\n', 'two\n']);
  });

  it('applies one deadline to the whole sequence', async () => {
    const started = Date.now();
    const execution = await executeShellCommand(
      [
        ['sleep', '0.2'],
        ['sleep', '30'],
        ['echo', 'never'],
      ],
      {
        cwd: workspace,
        timeoutMs: 600,
      },
    );
    expect(Date.now() - started).toBeLessThan(CANCELLATION_BUDGET_MS);
    expect(execution.succeeded).toBe(false);
    expect(execution.steps).toHaveLength(2);
    expect(execution.steps[1]?.result.timedOut).toBe(true);
  });
});
