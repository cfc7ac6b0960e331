/**
 * The reference production topology on one machine (what docker-compose.yml runs, service for service):
 * the Temporal server on PostgreSQL (persistence and SQL visibility, 16 history shards) with frontend,
 * history, matching and worker as separate processes; the product's own PostgreSQL; 2 agent workers;
 * 2 HTTP API processes. Models answer through the offline demo model unless a provider is configured.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import pg from 'pg';
import { ensureEmbeddedServer, freeLoopbackPort, stopEmbeddedServer } from '../../activities/store/embedded-server';
import { temporalCliPath } from '../../test/support/temporal-cli';
import { startProcess, waitUntil, type ClusterProcess } from './processes';
import { ensureTemporalServer, listenPorts, portsFrom, prepareTemporalDatabases, TEMPORAL_SERVICES, writeTemporalConfig } from './temporal-server';

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '..', '..');

/** As many as a production cluster of this size would start with; a database made with one count keeps it. */
export const CLUSTER_HISTORY_SHARDS = 16;
export const CLUSTER_WORKERS = 2;
export const CLUSTER_APIS = 2;
/** The product's search attributes (workflows/contract.ts); a cluster needs them registered once. */
const SEARCH_ATTRIBUTES = ['AgentId', 'TaskId', 'TaskState', 'ForkOf'];
const START_TIMEOUT_MS = 180_000;
export const DEFAULT_BASE_PORT = 17233;
/** Below Linux's ephemeral range (32768 and up), so no outgoing connection holds a port the cluster needs. */
const FREE_BASE_RANGE = { from: 20_000, to: 32_000 };

/** A base port whose whole block is free now (for tests, which must not collide with each other). */
export async function freeBasePort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = FREE_BASE_RANGE.from + Math.floor(Math.random() * (FREE_BASE_RANGE.to - FREE_BASE_RANGE.from - 200));
    const free = await Promise.all(listenPorts(portsFrom(base)).map((port) => portFree(port)));
    if (free.every(Boolean)) return base;
  }
  throw new Error('no free block of ports for the Temporal server between 20000 and 32000');
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}

export interface ClusterOptions {
  /** Where the cluster keeps its databases, config and logs (default `.data/cluster`). */
  dir?: string;
  /** The first of the Temporal server's ports (default 17233). */
  basePort?: number;
  log?: (line: string) => void;
  /** Extra environment for the agent workers and APIs (a provider, test settings). */
  productEnv?: Record<string, string>;
}

export interface Cluster {
  temporalAddress: string;
  productDatabaseUrl: string;
  temporalDatabaseUrl: string;
  apiUrls: string[];
  temporalServices: ClusterProcess[];
  workers: ClusterProcess[];
  apis: ClusterProcess[];
  logDir: string;
  /** Starts agent worker `index` again (after a kill), with the same settings. */
  restartWorker(index: number): Promise<ClusterProcess>;
  stop(): Promise<void>;
}

export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const dir = path.resolve(options.dir ?? path.join(ROOT, '.data', 'cluster'));
  const log = options.log ?? ((line: string) => console.log(line));
  const logDir = path.join(dir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const started: ClusterProcess[] = [];
  const databases = [path.join(dir, 'temporal-postgres'), path.join(dir, 'product-postgres')];
  const stopAll = async () => {
    // The product's processes drain first (they need Temporal and their database to finish), then Temporal.
    await Promise.all(started.filter((p) => !p.name.startsWith('temporal-')).map((p) => p.stop()));
    await Promise.all(started.filter((p) => p.name.startsWith('temporal-')).map((p) => p.stop()));
    for (const db of databases) await stopEmbeddedServer(db).catch(() => undefined);
  };
  try {
    const install = await ensureTemporalServer(log);
    // Two database servers, as in production: stopping the product's leaves Temporal's running.
    const temporalDb = await ensureEmbeddedServer(databases[0]!);
    const productDb = await ensureEmbeddedServer(databases[1]!);
    await prepareTemporalDatabases(install, temporalDb.url, log);
    const productDatabaseUrl = await ensureDatabase(productDb.url, 'durable_agents');

    const ports = portsFrom(options.basePort ?? DEFAULT_BASE_PORT);
    const taken = [];
    for (const port of listenPorts(ports)) if (!(await portFree(port))) taken.push(port);
    if (taken.length) throw new Error(`the Temporal server's ports ${taken.join(', ')} are in use on 127.0.0.1; stop what holds them or choose another --base-port`);
    const configFile = writeTemporalConfig(dir, { pgUrl: temporalDb.url, ports, shards: CLUSTER_HISTORY_SHARDS, dynamicConfigPath: path.join(ROOT, 'deploy', 'temporal-dynamicconfig.yaml') });
    await checkShardCount(temporalDb.url, CLUSTER_HISTORY_SHARDS);
    const temporalAddress = `127.0.0.1:${ports.frontend}`;
    const temporalServices = TEMPORAL_SERVICES.map((service) =>
      startProcess(`temporal-${service}`, install.server, ['--config-file', configFile, '--allow-no-auth', 'start', '--service', service], {
        cwd: dir,
        env: process.env,
        logDir,
      }),
    );
    started.push(...temporalServices);
    log(`Temporal ${TEMPORAL_SERVICES.join(', ')} starting (${CLUSTER_HISTORY_SHARDS} history shards, PostgreSQL at ${temporalDb.url})`);
    await waitUntil(async () => {
      const connection = await Connection.connect({ address: temporalAddress, connectTimeout: '1 second' });
      try {
        await connection.workflowService.getSystemInfo({});
        return true;
      } finally {
        await connection.close();
      }
    }, 'the Temporal frontend to answer', START_TIMEOUT_MS, temporalServices[0]);
    await ensureNamespace(temporalAddress);

    const productEnv: NodeJS.ProcessEnv = {
      ...process.env,
      TEMPORAL_ADDRESS: temporalAddress,
      DATABASE_URL: productDatabaseUrl,
      DATA_DIR: path.join(dir, 'product-data'),
      AGENTS_WORKSPACE_ROOT: path.join(dir, 'workspaces'),
      LOG_LEVEL: 'info',
      ...options.productEnv,
    };
    const startWorker = (index: number): ClusterProcess => {
      const worker = startProcess(`worker-${index + 1}`, process.execPath, ['--import', 'tsx', 'worker/main.ts'], { cwd: ROOT, env: productEnv, logDir });
      started.push(worker);
      return worker;
    };
    const workers = Array.from({ length: CLUSTER_WORKERS }, (_, i) => startWorker(i));
    const apiPorts = await Promise.all(Array.from({ length: CLUSTER_APIS }, () => freeLoopbackPort()));
    const apis = apiPorts.map((port, i) => {
      const api = startProcess(`api-${i + 1}`, process.execPath, ['--import', 'tsx', 'api/main.ts'], { cwd: ROOT, env: { ...productEnv, API_PORT: String(port) }, logDir });
      started.push(api);
      return api;
    });
    const apiUrls = apiPorts.map((port) => `http://127.0.0.1:${port}`);
    // Polling, not merely started: the worker bundles its workflow code after its start-up line.
    const workerPolls = (worker: ClusterProcess) => () => Promise.resolve(existsSync(worker.logFile) && /"msg":"Worker state changed".*"state":"RUNNING"|"state":"RUNNING".*"msg":"Worker state changed"/.test(readFileSync(worker.logFile, 'utf8')));
    for (const worker of workers) await waitUntil(workerPolls(worker), `${worker.name} to start`, START_TIMEOUT_MS, worker);
    for (const [i, api] of apis.entries()) {
      await waitUntil(async () => (await fetch(`${apiUrls[i]}/healthz`)).ok, `${api.name} to answer /healthz`, START_TIMEOUT_MS, api);
    }
    return {
      temporalAddress,
      productDatabaseUrl,
      temporalDatabaseUrl: temporalDb.url,
      apiUrls,
      temporalServices,
      workers,
      apis,
      logDir,
      async restartWorker(index) {
        const worker = startWorker(index);
        workers[index] = worker;
        await waitUntil(workerPolls(worker), `${worker.name} to start again`, START_TIMEOUT_MS, worker);
        return worker;
      },
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

/** Creates `name` on the server at `url` when missing; returns its URL. */
async function ensureDatabase(url: string, name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    if ((await admin.query('select 1 from pg_database where datname = $1', [name])).rowCount === 0) await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const withDb = new URL(url);
  withDb.pathname = `/${name}`;
  return withDb.toString();
}

/**
 * A database created with another shard count cannot be served with this one (the server refuses to
 * start, after a while, with a message far from the cause): say so up front.
 */
export async function checkShardCount(url: string, shards: number): Promise<void> {
  const client = new pg.Client({ connectionString: new URL('/temporal', url).toString() });
  await client.connect();
  try {
    const { rows } = await client.query<{ count: string }>('select count(*) from shards');
    const existing = Number(rows[0]?.count ?? 0);
    if (existing > 0 && existing !== shards) {
      throw new Error(`the cluster's Temporal database has ${existing} history shards and this configuration asks for ${shards}: the count is fixed when the database is first used; start from empty databases (npm run cluster -- --fresh) or keep ${existing}`);
    }
  } finally {
    await client.end();
  }
}

async function ensureNamespace(address: string): Promise<void> {
  const cli = async (...args: string[]) => (await run(temporalCliPath(), [...args, '--address', address], { timeout: 60_000 })).stdout;
  await cli('operator', 'namespace', 'describe', '--namespace', 'default').catch(() => cli('operator', 'namespace', 'create', '--namespace', 'default', '--retention', '72h'));
  // A new namespace reaches each service's namespace cache within seconds: until then it is "not found".
  let listed = '';
  await waitUntil(async () => ((listed = await cli('operator', 'search-attribute', 'list', '--namespace', 'default')), true), 'the default namespace to be served', 60_000);
  for (const name of SEARCH_ATTRIBUTES) {
    if (!new RegExp(`\\b${name}\\b`).test(listed)) await cli('operator', 'search-attribute', 'create', '--namespace', 'default', '--name', name, '--type', 'Keyword');
  }
}
