/**
 * `npm run chaos -- --minutes N [--agents 200] [--seed S] [--dir D]`: a bounded chaos run on the reference
 * cluster. Prints the invariants as a table, writes it to bench/results/chaos-<time>.md, and exits 1 when
 * one is broken.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { renderReport } from './report';
import { runChaos } from './run';

const positive = (name: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a positive number`);
  return n;
};

async function main(): Promise<void> {
  const program = new Command('chaos')
    .option('--minutes <n>', 'how long the load and the faults last', positive('--minutes'), 5)
    .option('--agents <n>', 'agents, each with a heartbeat schedule', positive('--agents'), 200)
    .option('--seed <n>', 'the fault sequence seed (a run can be replayed)', positive('--seed'), Date.now() % 1_000_000)
    .option(
      '--dir <dir>',
      'where the cluster keeps its databases and logs (default: a new temporary folder, removed after)',
    )
    .parse();
  const opts = program.opts<{ minutes: number; agents: number; seed: number; dir?: string }>();
  const dir = opts.dir ? path.resolve(opts.dir) : mkdtempSync(path.join(os.tmpdir(), 'da-chaos-'));
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o755); // as root, the embedded PostgreSQL runs as another user, who must enter it
  const log = (line: string) => console.log(`[chaos ${new Date().toISOString().slice(11, 19)}] ${line}`);
  const report = await runChaos({
    minutes: opts.minutes,
    agents: Math.round(opts.agents),
    seed: Math.round(opts.seed),
    dir,
    log,
  });
  const text = renderReport(report);
  console.log(`\n${text}`);
  const results = path.resolve(__dirname, '..', '..', 'bench', 'results');
  mkdirSync(results, { recursive: true });
  const file = path.join(results, `chaos-${new Date().toISOString().slice(0, 16).replace(/[:T]/g, '-')}.md`);
  writeFileSync(file, `${text}\n`);
  console.log(`\nwritten to ${path.relative(process.cwd(), file)}`);
  if (!opts.dir) rmSync(dir, { recursive: true, force: true });
  else console.log(`the cluster's logs: ${path.join(dir, 'logs')}`);
  process.exit(report.invariants.every((i) => i.held) ? 0 : 1);
}

if (require.main === module) {
  main().catch((error) => {
    console.error(error);
    process.exit(1);
  });
}
