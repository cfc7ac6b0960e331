/**
 * The production Temporal server, built from the Go module proxy and cached under `.tools`, run on
 * PostgreSQL (persistence and SQL visibility) with its services as separate processes, as a cluster
 * runs them. Used by `npm run cluster` (scripts/cluster/index.ts) and its test.
 */
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
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
      if (!exists) {
        log(`creating database ${db} and its schema`);
        await tool('create-database');
        await tool('setup-schema', '-v', '0.0');
      }
      // Idempotent: applies only the versions the database does not have yet.
      await tool('update-schema', '-d', path.join(install.schemaDir, schema, 'versioned'));
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
