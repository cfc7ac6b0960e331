import { Client, Connection } from '@temporalio/client';
import { openDatabase, type DatabaseHandle } from '../activities/store/db';
import { loadConfig } from '../worker/config';
import { AgentsClient } from './index';
import { tracingClientInterceptors } from './tracing';

/**
 * Connects a client process (the CLI, a script) to Temporal and PostgreSQL from the environment.
 * Without DATABASE_URL it uses the embedded PostgreSQL under DATA_DIR, starting it if it is not running
 * when one runs, else by this process for as long as it runs (see `openDatabase`).
 */
export async function connectFromEnv(): Promise<{
  client: AgentsClient;
  temporal: Client;
  database: DatabaseHandle;
  close(): Promise<void>;
}> {
  const config = loadConfig();
  // Embedded, this process may be the first to open the database: bring its schema up to date.
  const database = await openDatabase({
    url: config.databaseUrl,
    dataDir: config.embeddedDbDir,
    poolSize: 2,
    migrate: !config.databaseUrl,
  });
  const connection = await Connection.connect({ address: config.temporalAddress });
  const temporal = new Client({ connection, namespace: config.namespace, interceptors: tracingClientInterceptors() });
  const client = new AgentsClient(temporal, database.db, {
    taskQueue: config.taskQueue,
    workspaceRoot: config.workspaceRoot,
    workspaceRoots: config.workspaceRoots,
  });
  return {
    client,
    temporal,
    database,
    close: async () => {
      await connection.close();
      await database.close();
    },
  };
}
