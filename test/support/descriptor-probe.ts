/**
 * Run by test/unit/sandbox-descriptors.test.ts as a child process that inherited open canary files
 * without close-on-exec (at descriptor 3 and at the number in argv[3]), the way a worker started from
 * a shell that ran `exec 40>/tmp/x` does. Prints, as JSON: what this process holds at those numbers,
 * what a plain `child_process.spawn` passes on (the leak the sandbox must not repeat), and what a
 * command run through the product's sandboxed runner sees and can write.
 */
import { spawnSync } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import { runProgram } from '../../activities/tools/shell/run';

const [workspace, highFd] = [process.argv[2]!, Number(process.argv[3])];
const LIST_SHELL_DESCRIPTORS = 'ls /proc/$$/fd | sort -n | tr "\\n" " "';

async function main(): Promise<void> {
  const held = [3, highFd].map((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      return null;
    }
  });
  const plainSpawn = spawnSync('/bin/sh', ['-c', LIST_SHELL_DESCRIPTORS], {
    stdio: ['ignore', 'pipe', 'pipe'],
    encoding: 'utf8',
  }).stdout;
  const options = { cwd: workspace, timeoutMs: 30_000 };
  const listed = await runProgram(['sh', '-c', LIST_SHELL_DESCRIPTORS], options);
  const writeLow = await runProgram(['sh', '-c', 'echo leaked-through-3 >&3'], options);
  const writeHigh = await runProgram(
    ['python3', '-c', 'import os, sys; os.write(int(sys.argv[1]), b"leaked-through-high")', String(highFd)],
    options,
  );
  const afterwards = [3, highFd].map((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      return null;
    }
  });
  console.log(JSON.stringify({ held, plainSpawn, listed, writeLow, writeHigh, afterwards }));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
