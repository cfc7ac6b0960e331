/**
 * The API inside another process (`npm start`'s demo): shares its database handle and Temporal client,
 * creates a fresh operator token for the person at the terminal, and listens on API_PORT.
 */
import { PLATFORM } from '../activities/store/tenancy';
import type { Registry } from 'prom-client';
import type { DatabaseHandle } from '../activities/store/db';
import type { AgentsClient } from '../client';
import { loadApiConfig } from './config';
import { buildApi } from './server';
import { createToken, revokeToken } from './tokens';

/** The demo's operator token: replaced on every start so only the newest printed one works. */
const DEMO_TOKEN_NAME = 'demo-operator';

export async function startEmbeddedApi(options: {
  client: AgentsClient;
  database: DatabaseHandle;
  workspaceRoot: string;
  namespace: string;
  registries?: Registry[];
}): Promise<{ url: string; token: string; close(): Promise<void> }> {
  const config = loadApiConfig();
  const app = await buildApi({
    client: options.client,
    db: options.database.db,
    databaseUrl: options.database.url,
    workspaceRoot: options.workspaceRoot,
    namespace: options.namespace,
    registries: options.registries,
    ...config,
  });
  await app.listen({ host: config.host, port: config.port });
  await revokeToken(options.database.db, DEMO_TOKEN_NAME);
  const { token } = await createToken(options.database.db, DEMO_TOKEN_NAME, 'operator', { org: PLATFORM });
  return {
    url: `http://${config.host}:${config.port}`,
    token,
    async close() {
      await app.closeStreams();
      await app.close();
    },
  };
}
