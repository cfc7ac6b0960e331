/**
 * What the tool sandbox costs per command (not a test): the same invocations through the runner,
 * inside bubblewrap (the default) and with `AGENTS_SANDBOX=off`, in a small real git repository.
 * A git command is several processes (the hardening probes read the repository's configuration
 * first), each sandboxed, so its overhead is a multiple of one sandbox start.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runInvocation } from '../activities/tools/shell/run';
import { checkSandbox, SANDBOX_SETTING } from '../activities/tools/shell/sandbox';

/** Runs per command and mode: enough for a stable median on two shared cores, quick enough for `npm run bench`. */
const RUNS = 25;
const COMMANDS: string[][] = [
  ['echo', 'hello'],
  ['ls', '-la'],
  ['git', 'status'],
  ['git', 'log', '--oneline', '-5'],
];

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

async function timeRuns(argv: string[], cwd: string): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < RUNS; i += 1) {
    const started = performance.now();
    const result = await runInvocation(argv, { cwd, timeoutMs: 30_000 });
    if (result.exitCode !== 0) throw new Error(`${argv.join(' ')} failed: ${result.stderr}`);
    times.push(performance.now() - started);
  }
  return median(times);
}

export async function runSandboxBench(): Promise<string[]> {
  const available = await checkSandbox();
  if ('error' in available) return ['## Tool sandbox cost per command', '', `Skipped: ${available.error}.`, ''];
  const repo = mkdtempSync(path.join(os.tmpdir(), 'bench-sandbox-'));
  const env = { PATH: '/usr/bin:/bin', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', HOME: repo };
  execFileSync('git', ['init', '-q', '-b', 'main', repo], { env });
  for (let i = 0; i < 20; i += 1) writeFileSync(path.join(repo, `f${i}.txt`), `${i}\n`);
  execFileSync('git', ['-c', 'user.name=b', '-c', 'user.email=b@example.com', 'add', '-A'], { cwd: repo, env });
  execFileSync('git', ['-c', 'user.name=b', '-c', 'user.email=b@example.com', 'commit', '-q', '-m', 'bench'], {
    cwd: repo,
    env,
  });
  const previous = process.env[SANDBOX_SETTING];
  const rows: string[] = [];
  try {
    for (const argv of COMMANDS) {
      process.env[SANDBOX_SETTING] = 'off';
      const plain = await timeRuns(argv, repo);
      process.env[SANDBOX_SETTING] = 'bwrap';
      const sandboxed = await timeRuns(argv, repo);
      rows.push(
        `| \`${argv.join(' ')}\` | ${plain.toFixed(1)} | ${sandboxed.toFixed(1)} | +${(sandboxed - plain).toFixed(1)} |`,
      );
    }
  } finally {
    if (previous === undefined) delete process.env[SANDBOX_SETTING];
    else process.env[SANDBOX_SETTING] = previous;
    rmSync(repo, { recursive: true, force: true });
  }
  return [
    '## Tool sandbox cost per command',
    '',
    `Median of ${RUNS} runs through the shell runner (spawn to collected output), unsandboxed (\`${SANDBOX_SETTING}=off\`) against bubblewrap with prlimit.`,
    '',
    '| command | unsandboxed ms | sandboxed ms | cost ms |',
    '| --- | ---: | ---: | ---: |',
    ...rows,
    '',
  ];
}
