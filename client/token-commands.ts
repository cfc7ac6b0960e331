import type { Command } from 'commander';
import { openDatabase } from '../activities/store/db';
import { createToken, listTokens, revokeToken, TOKEN_SCOPES, type TokenScope } from '../api/tokens';
import { loadConfig } from '../worker/config';
import { DEFAULT_ORG, PLATFORM } from '../activities/store/tenancy';

/**
 * `agents token create|revoke|list`: HTTP API bearer tokens. Needs only the database (DATABASE_URL, else the embedded one);
 * the secret is printed once at creation and only its hash is stored.
 */
export function addTokenCommands(program: Command): void {
  const withDb = async <T>(fn: (db: Awaited<ReturnType<typeof openDatabase>>['db']) => Promise<T>): Promise<T> => {
    const config = loadConfig();
    const database = await openDatabase({ url: config.databaseUrl, dataDir: config.embeddedDbDir, poolSize: 1 });
    try {
      return await fn(database.db);
    } finally {
      await database.close();
    }
  };
  const token = program.command('token').description('HTTP API bearer tokens (scopes: operator, service, read)');
  token
    .command('create <name>')
    .description('create a token; its name is recorded as "decided by" on approvals and reviews')
    .option('--scope <scope>', `one of ${TOKEN_SCOPES.join(', ')}`, 'read')
    .option('--org <org>', `the organisation the token acts for (its agents, tasks and approvals only)`, DEFAULT_ORG)
    .option('--platform', 'a platform token: spans every organisation (scope operator only)')
    .action(async (name: string, opts: { scope: string; org: string; platform?: boolean }) => {
      const org = opts.platform ? PLATFORM : opts.org;
      const created = await withDb((db) => createToken(db, name, opts.scope as TokenScope, { org }));
      const reach = org === PLATFORM ? 'every organisation' : `organisation ${org}`;
      console.log(
        `token ${created.id} (${name}, ${opts.scope}, ${reach}); shown once, store it now:\n${created.token}`,
      );
    });
  token.command('revoke <idOrName>').action(async (idOrName: string) => {
    if (!(await withDb((db) => revokeToken(db, idOrName))))
      throw new Error(`no live token with id or name ${JSON.stringify(idOrName)}`);
    console.log(`revoked ${idOrName}`);
  });
  token.command('list').action(async () => {
    for (const t of await withDb(listTokens)) {
      const state = t.revokedAt
        ? `revoked ${t.revokedAt.toISOString()}`
        : `last used ${t.lastUsedAt?.toISOString() ?? 'never'}`;
      console.log(
        `${t.id}  ${t.scope.padEnd(8)}  ${(t.org ?? '*platform*').padEnd(12)}  ${t.name}  (created ${t.createdAt.toISOString()}, ${state})`,
      );
    }
  });
}
