/**
 * `npx tsx bench/approval-cache.ts`: the prompt-cache figures across a long approval wait
 * (docs/approvals.md), printed as a Markdown table and written to bench/results/approval-cache-latest.md.
 * The measurement is the test `test/workflow/approval-prompt-cache.test.ts`: a real worker, the real
 * Anthropic SDK and a real approval wait against the fake provider's cache with lifetimes. This runs it
 * through `npm test` (so it needs what the tests need: DATABASE_URL or the embedded PostgreSQL; a
 * Temporal dev server is started on TEST_TEMPORAL_PORT unless TEMPORAL_ADDRESS names one). Token
 * counts are deterministic; nothing here is timed.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.join(__dirname, '..');
const RESULTS_FILE = path.join(__dirname, 'results', 'approval-cache-latest.md');

mkdirSync(path.dirname(RESULTS_FILE), { recursive: true });
rmSync(RESULTS_FILE, { force: true });
const run = spawnSync('bash', ['scripts/test.sh', 'test/workflow/approval-prompt-cache.test.ts'], {
  cwd: ROOT,
  env: { ...process.env, APPROVAL_CACHE_TABLE: RESULTS_FILE },
  stdio: ['ignore', 'inherit', 'inherit'],
});
if (run.status !== 0 || !existsSync(RESULTS_FILE)) {
  console.error(`the measurement failed (exit ${run.status ?? run.signal}); see the test output above`);
  process.exit(1);
}
const table = readFileSync(RESULTS_FILE, 'utf8');
process.stdout.write(
  `\n# Prompt cache across a long approval wait\n\n${table}\nwritten to ${path.relative(ROOT, RESULTS_FILE)}\n`,
);
