/**
 * The reference production topology on one machine (what docker-compose.yml runs, service for service):
 * the Temporal server on PostgreSQL (persistence and SQL visibility, 16 history shards) with frontend,
 * history, matching and worker as separate processes; the product's own PostgreSQL; 2 agent workers;
 * 2 HTTP API processes. Models answer through the offline demo model unless a provider is configured.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import pg from 'pg';
import { ensureEmbeddedServer, freeLoopbackPort, stopEmbeddedServer } from '../../activities/store/embedded-server';
import { temporalCliPath } from '../../test/support/temporal-cli';
import { ownLog, startProcess, waitUntil, type ClusterProcess } from './processes';
import {
  ensureTemporalServer,
  listenPorts,
  portsFrom,
  prepareTemporalDatabases,
  TEMPORAL_SERVICES,
  writeTemporalConfig,
} from './temporal-server';

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '..', '..');

/** As many as a production cluster of this size would start with; a database made with one count keeps it. */
export const CLUSTER_HISTORY_SHARDS = 16;
export const CLUSTER_WORKERS = 2;
export const CLUSTER_APIS = 2;
/** The product's search attributes (workflows/contract.ts); a cluster needs them registered once. */
const SEARCH_ATTRIBUTES = ['AgentId', 'TaskId', 'TaskState', 'ForkOf', 'OrgId'];
const START_TIMEOUT_MS = 180_000;
/** gRPC's status code for "not found" (the raw service answers with gRPC errors). */
const GRPC_NOT_FOUND = 5;
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
  /**
   * A previous release's code (a folder): its worker starts first and migrates the database to its
   * schema, then the current workers join, as in a rolling deploy. `Cluster.previousWorker` is it.
   */
  previousRelease?: { root: string; version: string };
}

export interface Cluster {
  temporalAddress: string;
  productDatabaseUrl: string;
  temporalDatabaseUrl: string;
  apiUrls: string[];
  temporalServices: ClusterProcess[];
  workers: ClusterProcess[];
  /** The previous release's worker, while it runs (see `ClusterOptions.previousRelease`). */
  previousWorker?: ClusterProcess;
  apis: ClusterProcess[];
  logDir: string;
  /** Starts agent worker `index` again (after a kill), with the same settings. */
  restartWorker(index: number): Promise<ClusterProcess>;
  /** Starts API process `index` again (after a kill), on the same port. */
  restartApi(index: number): Promise<ClusterProcess>;
  /** Stops the named Temporal services gently and starts them again; resolves once history serves again. */
  restartTemporal(services: ReadonlyArray<(typeof TEMPORAL_SERVICES)[number]>): Promise<void>;
  /** The product's PostgreSQL: stopped at once (no checkpoint), as a crash would, then started again. */
  stopProductDatabase(): Promise<void>;
  startProductDatabase(): Promise<void>;
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
    if (taken.length)
      throw new Error(
        `the Temporal server's ports ${taken.join(', ')} are in use on 127.0.0.1; stop what holds them or choose another --base-port`,
      );
    const configFile = writeTemporalConfig(dir, {
      pgUrl: temporalDb.url,
      ports,
      shards: CLUSTER_HISTORY_SHARDS,
      dynamicConfigPath: path.join(ROOT, 'deploy', 'temporal-dynamicconfig.yaml'),
    });
    await checkShardCount(temporalDb.url, CLUSTER_HISTORY_SHARDS);
    const temporalAddress = `127.0.0.1:${ports.frontend}`;
    const startService = (service: (typeof TEMPORAL_SERVICES)[number]) => {
      const child = startProcess(
        `temporal-${service}`,
        install.server,
        ['--config-file', configFile, '--allow-no-auth', 'start', '--service', service],
        { cwd: dir, env: process.env, logDir },
      );
      started.push(child);
      return child;
    };
    // Every service records the cluster's metadata at start-up when the database has none; several doing it at
    // once on a fresh database collide on its primary key and the losers exit. The frontend goes first, alone.
    const [first, ...rest] = TEMPORAL_SERVICES;
    const temporalServices = [startService(first)];
    log(`Temporal ${first} starting (${CLUSTER_HISTORY_SHARDS} history shards, PostgreSQL at ${temporalDb.url})`);
    await waitUntil(
      () => clusterMetadataSaved(temporalDb.url),
      'the Temporal cluster metadata to be recorded',
      START_TIMEOUT_MS,
      temporalServices,
    );
    temporalServices.push(...rest.map(startService));
    log(`Temporal ${rest.join(', ')} starting`);
    await waitUntil(
      () => frontendAnswers(temporalAddress),
      'the Temporal frontend to answer',
      START_TIMEOUT_MS,
      temporalServices,
    );
    await ensureNamespace(temporalAddress);
    await waitUntil(
      () => historyAnswers(temporalAddress),
      'the Temporal history service to own its shards',
      START_TIMEOUT_MS,
      temporalServices,
    );

    const productEnv: NodeJS.ProcessEnv = {
      ...process.env,
      // Versioned workers (the production setting): a previous release's worker never gets a history this one wrote.
      TEMPORAL_DEPLOYMENT_NAME: CLUSTER_DEPLOYMENT_NAME,
      TEMPORAL_WORKER_BUILD_ID: buildId(),
      TEMPORAL_ADDRESS: temporalAddress,
      DATABASE_URL: productDatabaseUrl,
      DATA_DIR: path.join(dir, 'product-data'),
      AGENTS_WORKSPACE_ROOT: path.join(dir, 'workspaces'),
      LOG_LEVEL: 'info',
      ...options.productEnv,
    };
    const startWorker = (index: number, name = `worker-${index + 1}`, root = ROOT): ClusterProcess => {
      const worker = startProcess(name, process.execPath, ['--import', 'tsx', 'worker/main.ts'], {
        cwd: root,
        env: productEnv,
        logDir,
      });
      started.push(worker);
      return worker;
    };
    // Polling, not merely started: the worker bundles its workflow code after its start-up line.
    const workerPolls = (worker: ClusterProcess) => () =>
      Promise.resolve(
        /"msg":"Worker state changed".*"state":"RUNNING"|"state":"RUNNING".*"msg":"Worker state changed"/.test(
          ownLog(worker),
        ),
      );
    let previousWorker: ClusterProcess | undefined;
    if (options.previousRelease) {
      previousWorker = startWorker(
        0,
        `worker-previous-${options.previousRelease.version}`,
        options.previousRelease.root,
      );
      await waitUntil(workerPolls(previousWorker), `${previousWorker.name} to start`, START_TIMEOUT_MS, previousWorker);
    }
    const workers = Array.from({ length: CLUSTER_WORKERS }, (_, i) => startWorker(i));
    const apiPorts = await Promise.all(Array.from({ length: CLUSTER_APIS }, () => freeLoopbackPort()));
    const startApi = (i: number): ClusterProcess => {
      const api = startProcess(`api-${i + 1}`, process.execPath, ['--import', 'tsx', 'api/main.ts'], {
        cwd: ROOT,
        env: { ...productEnv, API_PORT: String(apiPorts[i]) },
        logDir,
      });
      started.push(api);
      return api;
    };
    const apis = apiPorts.map((_, i) => startApi(i));
    const apiAnswers = (i: number) => async () => (await fetch(`${apiUrls[i]}/healthz`)).ok;
    const apiUrls = apiPorts.map((port) => `http://127.0.0.1:${port}`);
    for (const worker of workers)
      await waitUntil(workerPolls(worker), `${worker.name} to start`, START_TIMEOUT_MS, worker);
    await setCurrentVersion(temporalAddress, buildId());
    for (const [i, api] of apis.entries())
      await waitUntil(apiAnswers(i), `${api.name} to answer /healthz`, START_TIMEOUT_MS, api);
    return {
      temporalAddress,
      productDatabaseUrl,
      temporalDatabaseUrl: temporalDb.url,
      apiUrls,
      temporalServices,
      workers,
      previousWorker,
      apis,
      logDir,
      async restartWorker(index) {
        const worker = startWorker(index);
        workers[index] = worker;
        await waitUntil(workerPolls(worker), `${worker.name} to start again`, START_TIMEOUT_MS, worker);
        return worker;
      },
      async restartApi(index) {
        const api = startApi(index);
        apis[index] = api;
        await waitUntil(apiAnswers(index), `${api.name} to answer /healthz again`, START_TIMEOUT_MS, api);
        return api;
      },
      async restartTemporal(services) {
        for (const service of services) {
          const index = TEMPORAL_SERVICES.indexOf(service);
          await temporalServices[index]!.stop();
          temporalServices[index] = startService(service);
        }
        await waitUntil(
          () => historyAnswers(temporalAddress),
          'the Temporal history service to serve again',
          START_TIMEOUT_MS,
          temporalServices,
        );
      },
      async stopProductDatabase() {
        await stopEmbeddedServer(databases[1]!, { mode: 'immediate' });
      },
      async startProductDatabase() {
        await ensureEmbeddedServer(databases[1]!);
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
    if ((await admin.query('select 1 from pg_database where datname = $1', [name])).rowCount === 0)
      await admin.query(`create database ${name}`);
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
      throw new Error(
        `the cluster's Temporal database has ${existing} history shards and this configuration asks for ${shards}: the count is fixed when the database is first used; start from empty databases (npm run cluster -- --fresh) or keep ${existing}`,
      );
    }
  } finally {
    await client.end();
  }
}

/** The Worker Deployment the cluster's agent workers poll as. */
export const CLUSTER_DEPLOYMENT_NAME = 'durable-agents';

/** This tree's build: the release and the commit (a deploy of the same commit is the same build). */
export function buildId(): string {
  const version = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  let commit = 'worktree';
  try {
    commit = execFileSync('git', ['-C', ROOT, 'rev-parse', '--short=10', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    // not a git checkout: the release alone
  }
  return `${version}-${commit}`;
}

/**
 * Makes `build` the deployment's current version: new workflows, and running ones at their next workflow
 * task, go to its workers. The deploy step an operator runs once the new workers poll.
 */
export async function setCurrentVersion(address: string, build: string): Promise<void> {
  await run(
    temporalCliPath(),
    [
      'worker',
      'deployment',
      'set-current-version',
      '--deployment-name',
      CLUSTER_DEPLOYMENT_NAME,
      '--build-id',
      build,
      '--yes',
      '--address',
      address,
    ],
    { timeout: 60_000 },
  );
}

async function clusterMetadataSaved(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: new URL('/temporal', url).toString() });
  await client.connect();
  try {
    return ((await client.query('select 1 from cluster_metadata_info limit 1')).rowCount ?? 0) > 0;
  } finally {
    await client.end();
  }
}

async function frontendAnswers(address: string): Promise<boolean> {
  const connection = await Connection.connect({ address, connectTimeout: '1 second' });
  try {
    await connection.workflowService.getSystemInfo({});
    return true;
  } finally {
    await connection.close();
  }
}

/**
 * The frontend answers before any history host owns the shards; a describe of a workflow that does not exist
 * reaches a history host, which answers "not found" once it serves (and "not enough hosts" before).
 */
async function historyAnswers(address: string): Promise<boolean> {
  const connection = await Connection.connect({ address, connectTimeout: '1 second' });
  try {
    await connection.workflowService.describeWorkflowExecution({
      namespace: 'default',
      execution: { workflowId: 'cluster-probe-none' },
    });
    return true;
  } catch (error) {
    return (error as { code?: number }).code === GRPC_NOT_FOUND;
  } finally {
    await connection.close();
  }
}

async function ensureNamespace(address: string): Promise<void> {
  const cli = async (...args: string[]) =>
    (await run(temporalCliPath(), [...args, '--address', address], { timeout: 60_000 })).stdout;
  await cli('operator', 'namespace', 'describe', '--namespace', 'default').catch(() =>
    cli('operator', 'namespace', 'create', '--namespace', 'default', '--retention', '72h'),
  );
  // A new namespace reaches each service's namespace cache within seconds: until then it is "not found".
  let listed = '';
  await waitUntil(
    async () => ((listed = await cli('operator', 'search-attribute', 'list', '--namespace', 'default')), true),
    'the default namespace to be served',
    60_000,
  );
  for (const name of SEARCH_ATTRIBUTES) {
    if (!new RegExp(`\\b${name}\\b`).test(listed))
      await cli(
        'operator',
        'search-attribute',
        'create',
        '--namespace',
        'default',
        '--name',
        name,
        '--type',
        'Keyword',
      );
  }
}
