/**
 * The load that showed the former embedded engine (PGlite's socket layer) interleaving connections: several plain `pg` clients on one
 * served URL at once, one of them inside `BEGIN … COMMIT`, each checking that every answer carries its
 * own parameters; concurrent writers in transactions counted afterwards; LISTEN/NOTIFY across
 * connections. A correct server gives 0 wrong answers, 0 errors and every row. Used by the embedded
 * database's test and by `npm run bench` (bench/embedded-db-bench.ts).
 */
import pg from 'pg';

export interface ConcurrentLoadResult {
  /** Answers checked (clients × queries per client). */
  answers: number;
  /** Answers that carried another connection's parameters or were otherwise not what was asked. */
  wrong: number;
  /** Queries that failed (a protocol error such as `portal "" does not exist`). */
  errors: string[];
  /** Rows the writers committed against the rows counted afterwards. */
  rowsWritten: number;
  rowsFound: number;
  /** Notifications sent on one connection against those heard on another. */
  notifySent: number;
  notifyHeard: number;
}

export const LOAD_CLIENTS = 4;
export const LOAD_QUERIES_PER_CLIENT = 25;
export const LOAD_WRITERS = 4;
export const LOAD_ROWS_PER_WRITER = 25;
const NOTIFICATIONS = 20;

/** Runs the load against `url` (any PostgreSQL), in a table of its own that it drops afterwards. */
export async function runConcurrentLoad(url: string): Promise<ConcurrentLoadResult> {
  const table = `load_${process.pid}_${Date.now()}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`create table ${table} (writer int not null, n int not null, note text not null)`);
    const errors: string[] = [];
    let wrong = 0;
    const reader = async (clientNo: number): Promise<void> => {
      const client = new pg.Client({ connectionString: url });
      client.on('error', (error) => errors.push(`client ${clientNo}: ${error.message}`));
      await client.connect();
      const inTransaction = clientNo === 0;
      try {
        if (inTransaction) await client.query('begin');
        for (let i = 0; i < LOAD_QUERIES_PER_CLIENT; i++) {
          try {
            // Eight parameters, like the group-post insert that failed with "supplies 1 parameters".
            const params = [clientNo, i, `c${clientNo}-q${i}`, clientNo * 1000 + i, 'a', 'b', 'c', 'd'];
            const { rows } = await client.query<{ c: number; i: number; tag: string; sum: number }>(
              'select $1::int as c, $2::int as i, $3::text as tag, ($4::int + length($5 || $6 || $7 || $8)) as sum',
              params,
            );
            const row = rows[0];
            if (
              !row ||
              row.c !== clientNo ||
              row.i !== i ||
              row.tag !== `c${clientNo}-q${i}` ||
              row.sum !== clientNo * 1000 + i + 4
            )
              wrong++;
          } catch (error) {
            errors.push(`client ${clientNo} query ${i}: ${(error as Error).message}`);
          }
        }
        if (inTransaction) await client.query('commit');
      } finally {
        await client.end().catch(() => undefined);
      }
    };
    const writer = async (writerNo: number): Promise<void> => {
      const client = new pg.Client({ connectionString: url });
      client.on('error', (error) => errors.push(`writer ${writerNo}: ${error.message}`));
      await client.connect();
      try {
        for (let n = 0; n < LOAD_ROWS_PER_WRITER; n++) {
          try {
            await client.query('begin');
            await client.query(`insert into ${table} (writer, n, note) values ($1, $2, $3)`, [
              writerNo,
              n,
              `w${writerNo}`,
            ]);
            await client.query('commit');
          } catch (error) {
            errors.push(`writer ${writerNo} row ${n}: ${(error as Error).message}`);
            await client.query('rollback').catch(() => undefined);
          }
        }
      } finally {
        await client.end().catch(() => undefined);
      }
    };
    const listener = new pg.Client({ connectionString: url });
    await listener.connect();
    let notifyHeard = 0;
    listener.on('notification', (n) => {
      if (n.channel === table) notifyHeard++;
    });
    await listener.query(`listen ${table}`);
    const notifier = async (): Promise<void> => {
      for (let k = 0; k < NOTIFICATIONS; k++) {
        try {
          await admin.query('select pg_notify($1, $2)', [table, String(k)]);
        } catch (error) {
          errors.push(`notify ${k}: ${(error as Error).message}`);
        }
      }
    };

    await Promise.all([
      ...Array.from({ length: LOAD_CLIENTS }, (_, c) => reader(c)),
      ...Array.from({ length: LOAD_WRITERS }, (_, w) => writer(w)),
      notifier(),
    ]);
    // Notifications are delivered asynchronously; a round trip on the listener flushes what was sent.
    const deadline = Date.now() + 5_000;
    while (notifyHeard < NOTIFICATIONS && Date.now() < deadline) await listener.query('select 1');
    await listener.end();
    const { rows } = await admin.query<{ count: string }>(`select count(*) from ${table}`);
    return {
      answers: LOAD_CLIENTS * LOAD_QUERIES_PER_CLIENT,
      wrong,
      errors,
      rowsWritten: LOAD_WRITERS * LOAD_ROWS_PER_WRITER,
      rowsFound: Number(rows[0]!.count),
      notifySent: NOTIFICATIONS,
      notifyHeard,
    };
  } finally {
    await admin.query(`drop table if exists ${table}`).catch(() => undefined);
    await admin.end();
  }
}
