import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { Database } from '../../schema/database';
import { migrateToLatest } from '../../schema/migrate';

export interface DatabaseHandle {
  db: Kysely<Database>;
  /** `postgres`: a real server by DATABASE_URL; `pglite`: the embedded WASM PostgreSQL. */
  kind: 'postgres' | 'pglite';
  /** A URL other processes (the CLI, a second worker) can connect to. */
  url: string;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** A PostgreSQL URL. Absent: start the embedded PGlite persisted under `dataDir`. */
  url?: string;
  /** Where PGlite keeps its files (default `.data/pglite`). */
  dataDir?: string;
  /** Run migrations before returning (default true). */
  migrate?: boolean;
  /** Pool size for a real server (default 10). */
  poolSize?: number;
}

// pg returns BIGINT (int8) as a string to avoid precision loss; our bigserial ids stay strings.

/**
 * Opens the database: a real PostgreSQL server when a URL is given, else PGlite (PostgreSQL compiled
 * to WASM) served over the PostgreSQL wire protocol on a loopback port, so every code path uses `pg`.
 * PGlite runs one session: the pool is capped at 1 connection, which serialises transactions.
 */
export async function openDatabase(options: OpenDatabaseOptions = {}): Promise<DatabaseHandle> {
  const handle = options.url ? openServerDatabase(options.url, options.poolSize ?? 10) : await openEmbeddedDatabase(options.dataDir);
  if (options.migrate ?? true) {
    try {
      await migrateToLatest(handle.db);
    } catch (error) {
      await handle.close();
      throw error;
    }
  }
  return handle;
}

function openServerDatabase(url: string, poolSize: number): DatabaseHandle {
  const pool = new pg.Pool({ connectionString: url, max: poolSize });
  // An idle client losing its connection (server restart) must not crash the worker.
  pool.on('error', () => undefined);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return { db, kind: 'postgres', url, close: () => db.destroy() };
}

async function openEmbeddedDatabase(dataDir = path.resolve('.data', 'pglite')): Promise<DatabaseHandle> {
  mkdirSync(dataDir, { recursive: true });
  const { PGlite } = await import('@electric-sql/pglite');
  const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket');
  const pglite = await PGlite.create(dataDir);
  const port = await freeLoopbackPort();
  const server = new PGLiteSocketServer({ db: pglite, host: '127.0.0.1', port, maxConnections: 16 });
  await server.start();
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  pool.on('error', () => undefined);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    kind: 'pglite',
    url,
    close: async () => {
      await db.destroy();
      await server.stop();
      await pglite.close();
    },
  };
}

/** A port on 127.0.0.1 that was free a moment ago (the OS picks it). */
export async function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}
