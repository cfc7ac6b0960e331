import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { openDatabase } from '../../activities/store/db';
import { migrations } from '../../schema/migrations';
import { DatabaseSchemaError } from '../../schema/migrate';

test('two processes migrating a fresh database at once apply each migration exactly once', async () => {
  const admin = await openDatabase({ url: process.env.DATABASE_URL!, migrate: false, poolSize: 1 });
  const name = `da_migrate_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  await sql.raw(`create database ${name}`).execute(admin.db);
  const url = new URL(process.env.DATABASE_URL!);
  url.pathname = `/${name}`;
  try {
    const [a, b] = await Promise.all([
      openDatabase({ url: url.toString(), poolSize: 2 }),
      openDatabase({ url: url.toString(), poolSize: 2 }),
    ]);
    const applied = await a.db
      .selectFrom('kysely_migration' as never)
      .select(sql<string>`name`.as('name'))
      .execute();
    expect(applied.map((r) => r.name).sort()).toEqual(Object.keys(migrations).sort());
    const tables = await sql<{
      n: string;
    }>`select count(*)::text as n from information_schema.tables where table_name in ('agents', 'tasks', 'messages', 'tool_calls', 'approvals', 'llm_calls')`.execute(
      b.db,
    );
    expect(tables.rows[0]!.n).toBe('6');
    await a.close();
    await b.close();
  } finally {
    await sql.raw(`drop database if exists ${name} with (force)`).execute(admin.db);
    await admin.close();
  }
});

describe('a database migrated by another release', () => {
  let admin: Awaited<ReturnType<typeof openDatabase>>;
  let url: string;
  let name: string;
  beforeEach(async () => {
    admin = await openDatabase({ url: process.env.DATABASE_URL!, migrate: false, poolSize: 1 });
    name = `da_release_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
    await sql.raw(`create database ${name}`).execute(admin.db);
    const u = new URL(process.env.DATABASE_URL!);
    u.pathname = `/${name}`;
    url = u.toString();
    await (await openDatabase({ url, poolSize: 1 })).close();
  });
  afterEach(async () => {
    await sql.raw(`drop database if exists ${name} with (force)`).execute(admin.db);
    await admin.close();
  });
  const recordMigration = async (migration: string) => {
    const db = await openDatabase({ url, migrate: false, poolSize: 1 });
    await sql`insert into kysely_migration (name, timestamp) values (${migration}, now()::text)`.execute(db.db);
    await db.close();
  };

  test('a newer one (rolling deploy): the previous release opens it as it is', async () => {
    await recordMigration('2099-01-01-999-from-a-newer-release');
    const db = await openDatabase({ url, poolSize: 1 });
    const applied = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db.db);
    expect(applied.rows.at(-1)!.name).toBe('2099-01-01-999-from-a-newer-release');
    await db.close();
  });

  test('one that lacks this release’s migrations while holding unknown ones is refused, saying why', async () => {
    await recordMigration('2099-01-01-999-from-another-branch');
    const last = Object.keys(migrations).at(-1)!;
    const db = await openDatabase({ url, migrate: false, poolSize: 1 });
    await sql`delete from kysely_migration where name = ${last}`.execute(db.db);
    await db.close();
    await expect(openDatabase({ url, poolSize: 1 })).rejects.toThrow(
      `lacks 1 this release needs (${last}); run the release that migrated it, or a newer one`,
    );
    await expect(openDatabase({ url, poolSize: 1 })).rejects.toBeInstanceOf(DatabaseSchemaError);
  });
});
