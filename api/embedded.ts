/**
 * The API inside another process (`npm start`'s demo): shares its database handle and Temporal client,
 * gives the person at the terminal a platform operator token, and listens on API_PORT. The token is
 * kept in `tokenFile` (mode 600) and used again by every later start until it is revoked.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { PLATFORM } from '../activities/store/tenancy';
import type { Registry } from 'prom-client';
import type { DatabaseHandle } from '../activities/store/db';
import type { AgentsClient } from '../client';
import { loadApiConfig } from './config';
import { buildApi } from './server';
import { createToken, revokeToken, verifyToken } from './tokens';

/** The demo's operator token: kept across starts; a revoked or lost one is replaced by a new one. */
export const DEMO_TOKEN_NAME = 'demo-operator';

/**
 * Where the printed token came from: `kept` (the one in the token file, still live), `replaced` (the
 * file's was revoked or unknown to this database, so a new one took its place) or `new` (no file).
 */
export type DemoTokenOrigin = 'kept' | 'replaced' | 'new';

export async function startEmbeddedApi(options: {
  client: AgentsClient;
  database: DatabaseHandle;
  workspaceRoot: string;
  namespace: string;
  registries?: Registry[];
  /** Where the token is kept between starts; absent: a new one each start. */
  tokenFile?: string;
}): Promise<{ url: string; token: string; tokenOrigin: DemoTokenOrigin; close(): Promise<void> }> {
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
  const kept = options.tokenFile ? await keptToken(options.database, options.tokenFile) : undefined;
  let token = kept?.valid ? kept.token : undefined;
  if (!token) {
    await revokeToken(options.database.db, DEMO_TOKEN_NAME);
    ({ token } = await createToken(options.database.db, DEMO_TOKEN_NAME, 'operator', { org: PLATFORM }));
    if (options.tokenFile) {
      // A new file, so the secret never sits in one an earlier hand left readable by others.
      rmSync(options.tokenFile, { force: true });
      writeFileSync(options.tokenFile, `${token}\n`, { mode: 0o600, flag: 'wx' });
    }
  }
  return {
    url: `http://${config.host}:${config.port}`,
    token,
    tokenOrigin: kept === undefined ? 'new' : kept.valid ? 'kept' : 'replaced',
    async close() {
      await app.closeStreams();
      await app.close();
    },
  };
}

/** The token an earlier start kept, and whether it is still the demo's live platform operator token. */
async function keptToken(
  database: DatabaseHandle,
  file: string,
): Promise<{ token: string; valid: boolean } | undefined> {
  let token: string;
  try {
    token = readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
  const principal = await verifyToken(database.db, token);
  const valid = principal?.name === DEMO_TOKEN_NAME && principal.scope === 'operator' && principal.org === PLATFORM;
  return { token, valid };
}
