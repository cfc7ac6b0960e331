import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { openDatabase, type DatabaseHandle } from '../../activities/store/db';
import { PREPARED_STATEMENTS_MAX, StatementNames } from '../../activities/store/prepared-statements';

/** A scratch table per test, so the statements below are this test's own. */
async function scratchTable(db: DatabaseHandle['db']): Promise<string> {
  const table = `ps_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  await sql.raw(`create table ${table} (id int primary key, v text)`).execute(db);
  await sql.raw(`insert into ${table} values (1, 'one'), (2, 'two')`).execute(db);
  return table;
}

/** The statements the connection serving the next query has prepared (one connection: the pool's only). */
async function preparedOn(db: DatabaseHandle['db'], table: string): Promise<string[]> {
  const { rows } = await sql<{ statement: string }>`select statement from pg_prepared_statements`.execute(db);
  return rows.map((r) => r.statement).filter((s) => s.includes(table));
}

describe('hot statements run as named prepared statements', () => {
  let handle: DatabaseHandle;
  beforeEach(async () => {
    handle = await openDatabase({ url: process.env.DATABASE_URL!, migrate: false, poolSize: 1 });
  });
  afterEach(async () => handle.close());

  test('a statement is prepared on its second use and then served by that statement, with the same rows', async () => {
    const { db } = handle;
    const table = await scratchTable(db);
    const read = (id: number) => sql<{ v: string }>`select v from ${sql.table(table)} where id = ${id}`.execute(db);
    expect((await read(1)).rows).toEqual([{ v: 'one' }]);
    expect(await preparedOn(db, table)).toEqual([]);
    expect((await read(2)).rows).toEqual([{ v: 'two' }]);
    expect(await preparedOn(db, table)).toHaveLength(1);
    for (let i = 0; i < 8; i++) expect((await read(1 + (i % 2))).rows).toHaveLength(1);
    expect(await preparedOn(db, table)).toHaveLength(1);
  });

  test('DATABASE_PREPARED_STATEMENTS=off (or the option) runs every statement unprepared', async () => {
    const plain = await openDatabase({
      url: process.env.DATABASE_URL!,
      migrate: false,
      poolSize: 1,
      preparedStatements: false,
    });
    try {
      const table = await scratchTable(plain.db);
      for (let i = 0; i < 4; i++) await sql`select v from ${sql.table(table)} where id = ${1}`.execute(plain.db);
      expect(await preparedOn(plain.db, table)).toEqual([]);
    } finally {
      await plain.close();
    }
  });

  test('a table changed under a prepared "select *" (a newer release migrated it) is read again, not failed', async () => {
    const { db } = handle;
    const table = await scratchTable(db);
    const read = () => sql<Record<string, unknown>>`select * from ${sql.table(table)} where id = ${1}`.execute(db);
    await read();
    await read();
    expect(await preparedOn(db, table)).toHaveLength(1);
    await sql.raw(`alter table ${table} add column added text default 'new'`).execute(db);
    // PostgreSQL refuses the cached plan ("cached plan must not change result type"); outside a
    // transaction the statement is retired and run again at once.
    expect((await read()).rows).toEqual([{ id: 1, v: 'one', added: 'new' }]);
    expect((await read()).rows).toEqual([{ id: 1, v: 'one', added: 'new' }]);
  });

  test('inside a transaction the refusal stands (the transaction is aborted), and the retry succeeds', async () => {
    const { db } = handle;
    const table = await scratchTable(db);
    const read = (t: typeof db) =>
      sql<Record<string, unknown>>`select * from ${sql.table(table)} where id = ${2}`.execute(t);
    await read(db);
    await read(db);
    await sql.raw(`alter table ${table} add column added int default 7`).execute(db);
    await expect(db.transaction().execute((tx) => read(tx))).rejects.toThrow(/cached plan must not change result type/);
    const rows = await db.transaction().execute(async (tx) => (await read(tx)).rows);
    expect(rows).toEqual([{ id: 2, v: 'two', added: 7 }]);
  });
});

test('the names are bounded: past the limit a statement runs unprepared', () => {
  const names = new StatementNames();
  for (let i = 0; i < PREPARED_STATEMENTS_MAX + 10; i++) {
    names.nameFor(`select ${i} where $1`);
    names.nameFor(`select ${i} where $1`);
  }
  expect(names.size).toBe(PREPARED_STATEMENTS_MAX);
  expect(names.nameFor('select -1 where $1')).toBeUndefined();
  expect(names.nameFor('select -1 where $1')).toBeUndefined();
  // A statement already named keeps its name.
  expect(names.nameFor('select 0 where $1')).toMatch(/^da_[0-9a-f]{20}$/);
});
