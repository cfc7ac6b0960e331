/** The chaos run's report as Markdown: the load, the invariants, the provider's stalls and every fault. */
import { invariantTable } from './invariants';
import type { ChaosReport } from './run';

export function renderReport(r: ChaosReport): string {
  const faultRows = r.faults.map(
    (f) => `| ${(f.atMs / 1000).toFixed(0)} s | ${f.kind} | ${f.detail} | ${(f.recoveryMs / 1000).toFixed(1)} s |`,
  );
  return [
    `# Chaos run: ${r.options.minutes} min, ${r.options.agents} agents, seed ${r.options.seed}`,
    '',
    `Load: ${r.tasks} tasks (a file write, a git commit, a review), ${r.chats} chats followed over SSE, ${r.options.agents} heartbeat schedules; ` +
      `${r.approvals.decided} approvals decided after a delay; ${r.llmRequests} provider requests (${Object.entries(
        r.providerFaults,
      )
        .map(([k, n]) => `${n} ${k}`)
        .join(', ')}); ` +
      `${r.apiRetries} client requests retried on another API process; ${(r.wallMs / 60_000).toFixed(1)} min wall.`,
    '',
    invariantTable(r.invariants),
    '',
    stallTable(r.stalls),
    '',
    '| at | fault | what | recovered in |',
    '|---|---|---|---|',
    ...faultRows,
  ].join('\n');
}

/** The provider's stalled streams and how long each stayed open before the adapter's idle cut ended it. */
function stallTable(stalls: ChaosReport['stalls']): string {
  const cut = stalls.cutAfterMs;
  const seconds = (ms: number | undefined) => (ms === undefined ? 'n/a' : `${(ms / 1000).toFixed(1)} s`);
  return [
    '| provider stalls | cut after (median) | cut after (max) | never cut | idle cut |',
    '|---|---|---|---|---|',
    `| ${cut.length + stalls.neverCut} | ${seconds(cut[Math.floor(cut.length / 2)])} | ${seconds(cut.at(-1))} | ${stalls.neverCut} | ${seconds(stalls.idleCutMs)} |`,
  ].join('\n');
}
