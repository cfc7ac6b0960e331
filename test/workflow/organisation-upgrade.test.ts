import { randomUUID } from 'node:crypto';
import { Migrator, sql } from 'kysely';
import { openDatabase } from '../../activities/store/db';
import { migrations } from '../../schema/migrations';
import { createToken, verifyToken } from '../../api/tokens';

/** The migration before organisations became walls: the state an upgrade in place starts from. */
const BEFORE_WALLS = '2026-12-01-042-agent-activity-index';

/**
 * A deployment upgraded in place to organisations: its agents, tasks and tokens keep working. Agents
 * without an organisation and their tasks land in 'default', an agent's configured organisation is
 * taken over with its tasks, operator tokens become platform tokens, and every other token acts for
 * 'default'; a later move of an agent to another organisation takes its tasks along.
 */
test('an existing deployment migrated in place keeps its agents, tasks and tokens working', async () => {
  const admin = await openDatabase({ url: process.env.DATABASE_URL!, migrate: false, poolSize: 1 });
  const name = `da_orgs_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  await sql.raw(`create database ${name}`).execute(admin.db);
  const url = new URL(process.env.DATABASE_URL!);
  url.pathname = `/${name}`;
  try {
    const old = await openDatabase({ url: url.toString(), migrate: false, poolSize: 1 });
    const migrator = new Migrator({ db: old.db, provider: { getMigrations: async () => migrations } });
    const { error } = await migrator.migrateTo(BEFORE_WALLS);
    expect(error).toBeUndefined();
    const agent = (id: string, config: Record<string, unknown>) =>
      sql`insert into agents (id, name, description, soul_md, agents_md, heartbeat_md, tools_md, content_hash, config, workspace_dir)
          values (${id}, ${id}, '', '', '', '', '', 'h', ${JSON.stringify(config)}::jsonb, '/tmp/ws')`.execute(old.db);
    await agent('plain', {});
    await agent('acme-agent', { org: 'acme' });
    for (const [id, agentId] of [
      ['t-plain', 'plain'],
      ['t-acme', 'acme-agent'],
    ])
      await sql`insert into tasks (id, agent_id, title, description, state) values (${id}, ${agentId}, 't', 'd', 'completed')`.execute(
        old.db,
      );
    // Tokens made by the previous release: the same hash scheme, no organisation column yet.
    const tokens: Record<string, string> = {};
    for (const scope of ['operator', 'service', 'read'] as const) {
      const made = await createTokenBefore(old.db, `old-${scope}`, scope);
      tokens[scope] = made;
    }
    await old.close();

    const upgraded = await openDatabase({ url: url.toString(), poolSize: 1 });
    const db = upgraded.db;
    expect(await db.selectFrom('agents').select(['id', 'org']).orderBy('id').execute()).toEqual([
      { id: 'acme-agent', org: 'acme' },
      { id: 'plain', org: 'default' },
    ]);
    expect(await db.selectFrom('tasks').select(['id', 'org']).orderBy('id').execute()).toEqual([
      { id: 't-acme', org: 'acme' },
      { id: 't-plain', org: 'default' },
    ]);
    expect((await verifyToken(db, tokens.operator!))?.org).toBeNull();
    expect((await verifyToken(db, tokens.service!))?.org).toBe('default');
    expect((await verifyToken(db, tokens.read!))?.org).toBe('default');

    // New rows: a task is stamped with its agent's organisation, and moves with the agent.
    await db
      .insertInto('tasks')
      .values({ id: 't-new', agent_id: 'acme-agent', title: 't', description: 'd', state: 'pending' })
      .execute();
    await db
      .updateTable('agents')
      .set({ config: JSON.stringify({ org: 'globex' }) })
      .where('id', '=', 'acme-agent')
      .execute();
    expect(
      await db.selectFrom('tasks').select(['id', 'org']).where('agent_id', '=', 'acme-agent').orderBy('id').execute(),
    ).toEqual([
      { id: 't-acme', org: 'globex' },
      { id: 't-new', org: 'globex' },
    ]);
    const created = await createToken(db, 'new-acme', 'service', { org: 'acme' });
    expect((await verifyToken(db, created.token))?.org).toBe('acme');
    await expect(createToken(db, 'wide', 'service', { org: null })).rejects.toThrow(/must have scope "operator"/);
    await upgraded.close();
  } finally {
    await sql.raw(`drop database if exists ${name} with (force)`).execute(admin.db);
    await admin.close();
  }
});

/** A token row as the release before organisations wrote it (no `org` column). */
async function createTokenBefore(
  db: Awaited<ReturnType<typeof openDatabase>>['db'],
  name: string,
  scope: string,
): Promise<string> {
  const { createHash, randomBytes } = await import('node:crypto');
  const id = randomBytes(6).toString('hex');
  const token = `da_${id}_${randomBytes(32).toString('base64url')}`;
  const hash = createHash('sha256').update(token).digest('hex');
  await sql`insert into api_tokens (id, name, scope, token_hash) values (${id}, ${name}, ${scope}, ${hash})`.execute(
    db,
  );
  return token;
}
