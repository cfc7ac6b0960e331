/**
 * The production Temporal server, built from the Go module proxy and cached under `.tools`, run on
 * PostgreSQL (persistence and SQL visibility) with its services as separate processes, as a cluster
 * runs them. Used by `npm run cluster` (scripts/cluster/index.ts) and its test.
 */
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '..', '..');

/**
 * v1.32.1 builds with the Go on these machines (1.26.8); v1.32.2 asks for Go 1.26.10. The schema and
 * config templates come from the same module version, so they always match the binary.
 */
export const TEMPORAL_SERVER_VERSION = 'v1.32.1';
const MODULE = 'go.temporal.io/server';
/** What a build may take on 2 cores (about 4 minutes when the machine is quiet). */
const BUILD_TIMEOUT_MS = 30 * 60_000;

export interface TemporalServerInstall {
  server: string;
  sqlTool: string;
  /** `schema/postgresql/v12` of the same module version. */
  schemaDir: string;
}

/** Builds the server and `temporal-sql-tool` once (`go install`), then reuses them: seconds, not minutes. */
export async function ensureTemporalServer(log: (line: string) => void): Promise<TemporalServerInstall> {
  const dir = path.join(ROOT, '.tools', 'temporal-server', TEMPORAL_SERVER_VERSION);
  const install = {
    server: path.join(dir, 'bin', 'server'),
    sqlTool: path.join(dir, 'bin', 'sql'),
    schemaDir: path.join(dir, 'schema', 'postgresql', 'v12'),
  };
  if (existsSync(install.server) && existsSync(install.sqlTool) && existsSync(install.schemaDir)) return install;
  try {
    await run('go', ['version']);
  } catch {
    throw new Error(
      `building the Temporal server needs Go (go install ${MODULE}/cmd/server@${TEMPORAL_SERVER_VERSION}); install Go, or point TEMPORAL_ADDRESS at a cluster you run`,
    );
  }
  log(
    `building the Temporal server ${TEMPORAL_SERVER_VERSION} and temporal-sql-tool with go install (minutes, once; cached in ${dir})`,
  );
  const env = { ...process.env, GOBIN: path.join(dir, 'bin'), GOFLAGS: '-mod=mod' };
  for (const cmd of ['cmd/server', 'cmd/tools/sql']) {
    await run('go', ['install', `${MODULE}/${cmd}@${TEMPORAL_SERVER_VERSION}`], {
      env,
      timeout: BUILD_TIMEOUT_MS,
      maxBuffer: 64 * 1024 * 1024,
    });
  }
  const { stdout } = await run('go', ['env', 'GOMODCACHE']);
  const moduleDir = path.join(stdout.trim(), `${MODULE}@${TEMPORAL_SERVER_VERSION}`);
  mkdirSync(path.dirname(install.schemaDir), { recursive: true });
  cpSync(path.join(moduleDir, 'schema', 'postgresql', 'v12'), install.schemaDir, { recursive: true });
  return install;
}

export interface ClusterPorts {
  frontend: number;
  frontendHttp: number;
  history: number;
  matching: number;
  worker: number;
  /** Membership (ringpop) ports are the gRPC ports + 100. */
  membershipOffset: number;
}

export const portsFrom = (base: number): ClusterPorts => ({
  frontend: base,
  frontendHttp: base + 10,
  history: base + 1,
  matching: base + 2,
  worker: base + 6,
  membershipOffset: 100,
});

/** Every port the server's processes listen on. */
export const listenPorts = (ports: ClusterPorts): number[] => {
  const grpc = [ports.frontend, ports.history, ports.matching, ports.worker];
  return [...grpc, ports.frontendHttp, ...grpc.map((port) => port + ports.membershipOffset)];
};

/** Temporal's services, each its own process (as in production, where each scales on its own). */
export const TEMPORAL_SERVICES = ['frontend', 'history', 'matching', 'worker'] as const;

/** Creates the two databases and brings their schemas to the newest version of this release. */
export async function prepareTemporalDatabases(
  install: TemporalServerInstall,
  pgUrl: string,
  log: (line: string) => void,
): Promise<void> {
  const url = new URL(pgUrl);
  const admin = new pg.Client({ connectionString: pgUrl });
  await admin.connect();
  try {
    for (const [db, schema] of [
      ['temporal', 'temporal'],
      ['temporal_visibility', 'visibility'],
    ] as const) {
      const exists = (await admin.query('select 1 from pg_database where datname = $1', [db])).rowCount === 1;
      const tool = async (...args: string[]) => {
        try {
          await run(
            install.sqlTool,
            [
              '--plugin',
              'postgres12',
              '--endpoint',
              url.hostname,
              '--port',
              url.port,
              '--user',
              url.username,
              '--password',
              decodeURIComponent(url.password),
              '--database',
              db,
              ...args,
            ],
            { timeout: 120_000 },
          );
        } catch (error) {
          const e = error as { stderr?: string; stdout?: string; message: string };
          throw new Error(
            `temporal-sql-tool ${args.join(' ')} on ${db} failed: ${(e.stderr || e.stdout || e.message).trim()}`,
          );
        }
      };
      const shipped = shippedSchemaVersion(install, schema);
      if (!exists) {
        log(`creating database ${db} and its schema`);
        await tool('create-database');
        await tool('setup-schema', '-v', '0.0');
      } else if ((await schemaVersionOf(pgUrl, db)) === undefined) {
        // An empty database is one whose set-up was cut off after its creation: set it up. Any other is not ours.
        if ((await tableCount(pgUrl, db)) > 0) throw new Error(noSchemaError(db));
        log(`setting up the schema of the empty database ${db}`);
        await tool('setup-schema', '-v', '0.0');
      }
      // Idempotent: applies only the versions the database does not have yet.
      await tool('update-schema', '-d', path.join(install.schemaDir, schema, 'versioned'));
      await checkTemporalSchema(pgUrl, db, shipped);
    }
  } finally {
    await admin.end();
  }
}

/** The server's static configuration for one machine: 16 history shards, loopback ports, no metrics port clash. */
export function writeTemporalConfig(
  dir: string,
  options: { pgUrl: string; ports: ClusterPorts; shards: number; dynamicConfigPath: string },
): string {
  const url = new URL(options.pgUrl);
  const { ports } = options;
  const store = (database: string, maxConns: number) => `      sql:
        pluginName: "postgres12"
        databaseName: "${database}"
        connectAddr: "${url.hostname}:${url.port}"
        connectProtocol: "tcp"
        user: "${url.username}"
        password: "${decodeURIComponent(url.password)}"
        maxConns: ${maxConns}
        maxIdleConns: ${maxConns}
        maxConnLifetime: "1h"`;
  const service = (name: string, grpc: number, http?: number) => `  ${name}:
    rpc:
      grpcPort: ${grpc}
      membershipPort: ${grpc + ports.membershipOffset}
      bindOnLocalHost: true${http ? `\n      httpPort: ${http}` : ''}`;
  const yaml = `# Written by npm run cluster (scripts/cluster/temporal-server.ts); edits are overwritten.
log:
  stdout: true
  level: warn

persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: ${options.shards}
  datastores:
    postgres-default:
${store('temporal', 20)}
    postgres-visibility:
${store('temporal_visibility', 4)}

global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: "127.0.0.1"

services:
${service('frontend', ports.frontend, ports.frontendHttp)}
${service('matching', ports.matching)}
${service('history', ports.history)}
${service('worker', ports.worker)}

clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: "active"
  currentClusterName: "active"
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: "frontend"
      rpcAddress: "127.0.0.1:${ports.frontend}"

dcRedirectionPolicy:
  policy: "noop"

dynamicConfigClient:
  filepath: "${options.dynamicConfigPath}"
  pollInterval: "10s"
`;
  const file = path.join(dir, 'temporal-server.yaml');
  mkdirSync(dir, { recursive: true });
  writeFileSync(file, yaml);
  return file;
}

/** The newest schema version this release ships: its highest `versioned/vX.Y` folder. */
export function shippedSchemaVersion(install: TemporalServerInstall, schema: 'temporal' | 'visibility'): string {
  const versions = readdirSync(path.join(install.schemaDir, schema, 'versioned'))
    .filter((name) => /^v\d+\.\d+$/.test(name))
    .map((name) => name.slice(1));
  const newest = versions.sort(compareVersions).at(-1);
  if (!newest)
    throw new Error(`no versioned schema under ${install.schemaDir}/${schema}: the server install is incomplete`);
  return newest;
}

/** `a` before `b` as the server compares them (major, then minor). */
export function compareVersions(a: string, b: string): number {
  const [am = 0, an = 0] = a.split('.').map(Number);
  const [bm = 0, bn = 0] = b.split('.').map(Number);
  return am - bm || an - bn;
}

/** The schema version temporal-sql-tool recorded in a database, or undefined when it holds no Temporal schema. */
export async function schemaVersionOf(pgUrl: string, db: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: new URL(`/${db}`, pgUrl).toString() });
  await client.connect();
  try {
    const table = await client.query("select to_regclass('schema_version') is not null as present");
    if (!table.rows[0]?.present) return undefined;
    const { rows } = await client.query<{ curr_version: string }>(
      'select curr_version from schema_version where version_partition = 0 and db_name = $1',
      [db],
    );
    return rows[0]?.curr_version;
  } finally {
    await client.end();
  }
}

async function tableCount(pgUrl: string, db: string): Promise<number> {
  const client = new pg.Client({ connectionString: new URL(`/${db}`, pgUrl).toString() });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>(
      "select count(*) as n from information_schema.tables where table_schema not in ('pg_catalog', 'information_schema')",
    );
    return Number(rows[0]?.n ?? 0);
  } finally {
    await client.end();
  }
}

function noSchemaError(db: string): string {
  return (
    `the database ${db} exists but holds no Temporal schema (no schema_version row written by temporal-sql-tool), ` +
    'so the Temporal server would refuse it: drop it, point the cluster at another PostgreSQL, or start from empty databases (npm run cluster -- --fresh)'
  );
}

/**
 * Refuses, with the reason, a database the Temporal server would refuse at start-up (its own check
 * only logs "version mismatch" from each service and exits): no Temporal schema at all, or a version
 * older than the one this server release needs. A newer one is accepted, as the server accepts it
 * (schema changes are backward compatible, so a rolled-back server still runs).
 */
export async function checkTemporalSchema(pgUrl: string, db: string, needed: string): Promise<void> {
  const version = await schemaVersionOf(pgUrl, db);
  if (version === undefined) throw new Error(noSchemaError(db));
  if (compareVersions(version, needed) < 0) {
    throw new Error(
      `the database ${db} is at Temporal schema version ${version} and this server release needs ${needed}: ` +
        `bring it up with temporal-sql-tool update-schema (npm run cluster does it), or start from empty databases (npm run cluster -- --fresh)`,
    );
  }
}
