import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { openDatabase } from '../../activities/store/db';
import { migrations } from '../../schema/migrations';


test('two processes migrating a fresh database at once apply each migration exactly once', async () => {
  const admin = await openDatabase({ url: process.env.DATABASE_URL!, migrate: false, poolSize: 1 });
  const name = `da_migrate_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  await sql.raw(`create database ${name}`).execute(admin.db);
  const url = new URL(process.env.DATABASE_URL!);
  url.pathname = `/${name}`;
  try {
    const [a, b] = await Promise.all([openDatabase({ url: url.toString(), poolSize: 2 }), openDatabase({ url: url.toString(), poolSize: 2 })]);
    const applied = await a.db.selectFrom('kysely_migration' as never).select(sql<string>`name`.as('name')).execute();
    expect(applied.map((r) => r.name).sort()).toEqual(Object.keys(migrations).sort());
    const tables = await sql<{ n: string }>`select count(*)::text as n from information_schema.tables where table_name in ('agents', 'tasks', 'messages', 'tool_calls', 'approvals', 'llm_calls')`.execute(b.db);
    expect(tables.rows[0]!.n).toBe('6');
    await a.close();
    await b.close();
  } finally {
    await sql.raw(`drop database if exists ${name} with (force)`).execute(admin.db);
    await admin.close();
  }
});
