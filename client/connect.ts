import { Client, Connection } from '@temporalio/client';
import { openDatabase, type DatabaseHandle } from '../activities/store/db';
import { loadConfig } from '../worker/config';
import { AgentsClient } from './index';

/**
 * Connects a client process (the CLI, a script) to Temporal and PostgreSQL from the environment.
 * DATABASE_URL must name a server: the embedded PGlite belongs to the process that started it
 * (`npm start` prints a URL other processes can use while it runs).
 */
export async function connectFromEnv(): Promise<{ client: AgentsClient; temporal: Client; database: DatabaseHandle; close(): Promise<void> }> {
  const config = loadConfig();
  if (!config.databaseUrl) {
    throw new Error('DATABASE_URL is not set. Point it at PostgreSQL (or at the URL `npm start` prints for its embedded database).');
  }
  const database = await openDatabase({ url: config.databaseUrl, poolSize: 2, migrate: false });
  const connection = await Connection.connect({ address: config.temporalAddress });
  const temporal = new Client({ connection, namespace: config.namespace });
  const client = new AgentsClient(temporal, database.db, { taskQueue: config.taskQueue });
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
