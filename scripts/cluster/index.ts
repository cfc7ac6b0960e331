/**
 * `npm run cluster`: the reference production topology on this machine (scripts/cluster/topology.ts),
 * in the foreground until Ctrl-C or SIGTERM, which stop every process it started. `--fresh` starts from
 * empty databases; `--dir DIR` keeps its state elsewhere than `.data/cluster`.
 */
import { rmSync } from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';
import { stopEmbeddedServer } from '../../activities/store/embedded-server';
import { CLUSTER_HISTORY_SHARDS, DEFAULT_BASE_PORT, startCluster } from './topology';

async function main(): Promise<void> {
  const options = new Command()
    .option('--dir <dir>', 'where the cluster keeps its databases, config and logs', path.resolve('.data', 'cluster'))
    .option('--base-port <port>', "the first of the Temporal server's ports", String(DEFAULT_BASE_PORT))
    .option('--fresh', 'start from empty databases')
    .parse()
    .opts<{ dir: string; basePort: string; fresh?: boolean }>();
  if (options.fresh) {
    for (const db of ['temporal-postgres', 'product-postgres'])
      await stopEmbeddedServer(path.join(options.dir, db)).catch(() => undefined);
    rmSync(options.dir, { recursive: true, force: true });
  }
  const startedAt = Date.now();
  const cluster = await startCluster({
    dir: options.dir,
    basePort: Number(options.basePort),
    log: (line) => console.log(`[cluster] ${line}`),
  });
  const rows = [
    [
      'Temporal frontend',
      cluster.temporalAddress,
      `${CLUSTER_HISTORY_SHARDS} history shards; history, matching, worker as their own processes`,
    ],
    ["Temporal's PostgreSQL", cluster.temporalDatabaseUrl, 'persistence + SQL visibility'],
    ["the product's PostgreSQL", cluster.productDatabaseUrl, ''],
    ...cluster.workers.map((w) => [w.name, `pid ${w.child.pid}`, 'task queue agents']),
    ...cluster.apis.map((a, i) => [a.name, cluster.apiUrls[i]!, '']),
  ];
  console.log(`\nCluster up in ${((Date.now() - startedAt) / 1000).toFixed(1)} s; logs in ${cluster.logDir}\n`);
  for (const [what, where, note] of rows) console.log(`  ${what!.padEnd(24)} ${where!.padEnd(52)} ${note}`);
  console.log(
    `\nUse it: TEMPORAL_ADDRESS=${cluster.temporalAddress} DATABASE_URL=${cluster.productDatabaseUrl} npm run agents -- …   (Ctrl-C stops everything)`,
  );
  // `on`, not `once`: a Ctrl-C reaches both tsx and this process, and tsx relays it once more; a
  // second signal must not kill this process halfway through stopping the others.
  await new Promise<void>((resolve) => {
    process.on('SIGINT', resolve);
    process.on('SIGTERM', resolve);
  });
  console.log('stopping the cluster…');
  await cluster.stop();
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
