import { chmodSync, cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import pg from 'pg';
import { openDatabase, type DatabaseHandle } from '../../activities/store/db';
import { createToken } from '../../api/tokens';
import { AgentsClient } from '../../client';
import {
  checkShardCount,
  CLUSTER_HISTORY_SHARDS,
  freeBasePort,
  startCluster,
  type Cluster,
} from '../../scripts/cluster/topology';
import { checkTemporalSchema } from '../../scripts/cluster/temporal-server';
import { eventually } from '../support/eventually';

/** The first run builds the Temporal server with go install (minutes on 2 cores); later runs reuse it. */
const FIRST_BUILD_MS = 40 * 60_000;

/**
 * The reference production topology, as `npm run cluster` starts it: the production Temporal server on
 * PostgreSQL with 16 history shards and its services as separate processes, 2 agent workers, 2 API
 * processes. Work started through one API process is followed through the other, and a killed worker's
 * task finishes on the one left.
 */
describe('the cluster topology', () => {
  let dir: string;
  let cluster: Cluster;
  let db: DatabaseHandle;
  let agents: AgentsClient;
  let connection: Connection;
  let token: string;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'da-cluster-'));
    // As root, the embedded PostgreSQL runs as another user, who must be able to enter the folder.
    chmodSync(dir, 0o755);
    // Its own block of ports, free now and below the ephemeral range.
    const basePort = await freeBasePort();
    cluster = await startCluster({
      dir,
      basePort,
      log: () => undefined,
      productEnv: { ANTHROPIC_API_KEY: '', OPENAI_API_KEY: '', OPENAI_COMPATIBLE_BASE_URL: '' },
    });
    db = await openDatabase({ url: cluster.productDatabaseUrl, poolSize: 2 });
    connection = await Connection.connect({ address: cluster.temporalAddress });
    agents = new AgentsClient(new Client({ connection }), db.db, { workspaceRoot: path.join(dir, 'workspaces') });
    await agents.upsertAgentFromFolder(path.resolve('examples/agents/scribe'), { id: 'scribe' });
    token = (await createToken(db.db, 'cluster-test', 'operator')).token;
  }, FIRST_BUILD_MS);
  afterAll(async () => {
    await connection?.close();
    await db?.close();
    await cluster?.stop();
    // The processes' logs outlive the run (the newest run's in .data/cluster-test-logs), for a failure's post-mortem.
    const kept = path.resolve('.data', 'cluster-test-logs');
    rmSync(kept, { recursive: true, force: true });
    if (existsSync(path.join(dir, 'logs'))) cpSync(path.join(dir, 'logs'), kept, { recursive: true });
    rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  const api = async <T>(
    index: number,
    method: string,
    url: string,
    body?: unknown,
  ): Promise<{ status: number; json: T }> => {
    const response = await fetch(`${cluster.apiUrls[index]}${url}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: response.status, json: (await response.json()) as T };
  };
  const stateOf = async (index: number, taskId: string) =>
    (await api<{ state: string }>(index, 'GET', `/v1/tasks/${taskId}`)).json.state;

  test('a task started through one API process is followed through the other to review, on the 16-shard server', async () => {
    const started = await api<{ taskId: string }>(0, 'POST', '/v1/tasks', {
      agentId: 'scribe',
      title: 'Plan a guide',
      description: 'write plan.md',
    });
    expect(started.status).toBe(201);
    await eventually(
      async () => ((await stateOf(1, started.json.taskId)) === 'review' ? true : undefined),
      'the task to reach review',
      180_000,
    );
    // The database really has the shard count the topology asks for.
    await expect(checkShardCount(cluster.temporalDatabaseUrl, CLUSTER_HISTORY_SHARDS)).resolves.toBeUndefined();
  }, 240_000);

  test("a killed worker's tasks finish on the other worker", async () => {
    await cluster.workers[0]!.kill();
    const taskIds: string[] = [];
    for (let i = 0; i < 3; i++)
      taskIds.push(
        (
          await api<{ taskId: string }>(1, 'POST', '/v1/tasks', {
            agentId: 'scribe',
            title: `After the kill ${i}`,
            description: 'write plan.md',
          })
        ).json.taskId,
      );
    for (const taskId of taskIds)
      await eventually(
        async () => ((await stateOf(0, taskId)) === 'review' ? true : undefined),
        `task ${taskId} to reach review on the remaining worker`,
        180_000,
      );
    await cluster.restartWorker(0);
  }, 300_000);

  test('a database without a Temporal schema, or with an older one, is refused with the reason', async () => {
    const admin = new pg.Client({ connectionString: cluster.temporalDatabaseUrl });
    await admin.connect();
    const name = `not_temporal_${process.pid}`;
    try {
      await admin.query(`create database ${name}`);
      const other = new pg.Client({ connectionString: new URL(`/${name}`, cluster.temporalDatabaseUrl).toString() });
      await other.connect();
      await other.query('create table orders (id int)');
      await expect(checkTemporalSchema(cluster.temporalDatabaseUrl, name, '1.17')).rejects.toThrow(
        `the database ${name} exists but holds no Temporal schema`,
      );
      await other.query(
        'create table schema_version (version_partition int, db_name text, creation_time timestamp, curr_version text, min_compatible_version text)',
      );
      await other.query("insert into schema_version values (0, $1, now(), '1.9', '1.0')", [name]);
      await other.end();
      await expect(checkTemporalSchema(cluster.temporalDatabaseUrl, name, '1.17')).rejects.toThrow(
        `the database ${name} is at Temporal schema version 1.9 and this server release needs 1.17`,
      );
      // The cluster's own databases, as the running server uses them, pass (1.17 is not older than 1.9).
      await checkTemporalSchema(cluster.temporalDatabaseUrl, 'temporal', '1.9');
    } finally {
      await admin.query(`drop database if exists ${name}`);
      await admin.end();
    }
  });

  test('a database made with another shard count is refused with the reason', async () => {
    await expect(checkShardCount(cluster.temporalDatabaseUrl, 4)).rejects.toThrow(
      `the cluster's Temporal database has ${CLUSTER_HISTORY_SHARDS} history shards and this configuration asks for 4`,
    );
  });
});
