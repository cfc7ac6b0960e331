/**
 * A descriptor the worker inherited without close-on-exec must not reach a sandboxed command. A child
 * Node process is started holding a canary file open at descriptor 3 and at descriptor 40 (as a worker
 * started from a shell that ran `exec 40>/tmp/x` holds it); it runs commands through the product's
 * runner, which must list only 0–2 inside the sandbox, fail to write to 3 and 40, and leave the canary
 * empty. The control shows the leak is real: a plain `spawn` in the same process passes 40 on (Node
 * itself marks 0–15 close-on-exec at start, which is why 3 alone would prove nothing).
 */
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RunResult } from '../../activities/tools/shell/run';

/** Above the 0–15 that Node marks close-on-exec at start, like a descriptor a parent shell left open. */
const HIGH_FD = 40;

interface ProbeReport {
  held: Array<string | null>;
  plainSpawn: string;
  listed: RunResult;
  writeLow: RunResult;
  writeHigh: RunResult;
  afterwards: Array<string | null>;
}

let dir: string;
let canary: string;
let report: ProbeReport;

beforeAll(async () => {
  dir = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'sbx-fds-')));
  const workspace = path.join(dir, 'workspace');
  mkdirSync(workspace);
  canary = path.join(dir, 'canary.txt');
  const fd = openSync(canary, 'w');
  const stdio: Array<'ignore' | 'pipe' | number> = ['ignore', 'pipe', 'pipe', fd];
  while (stdio.length < HIGH_FD) stdio.push('ignore');
  stdio.push(fd);
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'test/support/descriptor-probe.ts', workspace, String(HIGH_FD)],
    { stdio },
  );
  closeSync(fd);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0) throw new Error(`the probe process failed (${code}): ${stderr}`);
  report = JSON.parse(stdout.trim().split('\n').at(-1)!) as ProbeReport;
}, 60_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('the probe process really holds the canary at 3 and 40, and a plain spawn passes 40 on', () => {
  expect(report.held).toEqual([canary, canary]);
  expect(report.plainSpawn.trim().split(' ')).toContain(String(HIGH_FD));
});

test('inside the sandbox the command holds descriptors 0, 1 and 2 only', () => {
  expect(report.listed.exitCode).toBe(0);
  expect(report.listed.stdout.trim().split(' ')).toEqual(['0', '1', '2']);
});

test('writing to descriptor 3 or 40 inside the sandbox fails, and the canary stays empty', () => {
  expect(report.writeLow.exitCode).not.toBe(0);
  expect(report.writeLow.stderr).toMatch(/Bad file descriptor/);
  expect(report.writeHigh.exitCode).not.toBe(0);
  expect(report.writeHigh.stderr).toMatch(/Bad file descriptor/);
  expect(readFileSync(canary, 'utf8')).toBe('');
});

test('the worker no longer holds the inherited descriptor at 40 after launching (3 was close-on-exec and stays)', () => {
  expect(report.afterwards[1]).toBeNull();
});
