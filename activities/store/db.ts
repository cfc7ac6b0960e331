import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { Kysely, PostgresDialect, type PostgresPool, type PostgresPoolClient } from 'kysely';
import pg from 'pg';
import type { Database } from '../../schema/database';
import { migrateToLatest } from '../../schema/migrate';
import { ensureEmbeddedServer } from './embedded-server';
import { preparingPool } from './prepared-statements';
import { switchFromEnv } from '../env-values';

export interface DatabaseHandle {
  db: Kysely<Database>;
  /** `postgres`: a server named by DATABASE_URL; `embedded`: the embedded PostgreSQL under DATA_DIR. */
  kind: 'postgres' | 'embedded';
  /** A URL other processes (the CLI, the API, a second worker) can connect to. */
  url: string;
  /** Embedded: whether opening it started the server (it was not running). */
  startedServer: boolean;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** A PostgreSQL URL. Absent: the embedded PostgreSQL kept under `dataDir`. */
  url?: string;
  /** Where the embedded PostgreSQL keeps its files (default `.data/postgres`). */
  dataDir?: string;
  /** Run migrations before returning (default true). */
  migrate?: boolean;
  /** Pool size (default 10). */
  poolSize?: number;
  /**
   * Told about every lost connection (a server restart, the serving process exiting). Never thrown:
   * the query that was running fails, and the next one opens a new connection.
   */
  onConnectionError?: (error: Error) => void;
  /**
   * Run hot statements as named prepared statements (default: on unless DATABASE_PREPARED_STATEMENTS is
   * `off`, for a PgBouncer older than 1.21 in transaction mode, which cannot keep them).
   */
  preparedStatements?: boolean;
}

// pg returns BIGINT (int8) as a string to avoid precision loss; our bigserial ids stay strings.

/**
 * `DATABASE_PREPARED_STATEMENTS`: `on` (the default) or `off`, for a PgBouncer that cannot keep
 * prepared statements. Another word is refused: `false` or `no` must not leave them on.
 */
export function preparedStatementsFromEnv(env: NodeJS.ProcessEnv = process.env): boolean {
  return switchFromEnv('DATABASE_PREPARED_STATEMENTS', ['on', 'off'], env) ?? true;
}

/**
 * Opens the database: a PostgreSQL server when a URL is given, else the embedded PostgreSQL under
 * `dataDir` (see `ensureEmbeddedServer`), started if it is not running. Both are real servers reached
 * through `pg`, so every code path is the same.
 *
 * Connections lost to a server restart never crash the process: pg emits them as `'error'` events on
 * the pool and on each client, which are handled here (and reported to `onConnectionError`). Embedded,
 * a connection refused because the server stopped (`agents db stop`, a crash) starts it again.
 */
export async function openDatabase(options: OpenDatabaseOptions = {}): Promise<DatabaseHandle> {
  const onError = options.onConnectionError ?? (() => undefined);
  const poolSize = options.poolSize ?? 10;
  const prepared = options.preparedStatements ?? preparedStatementsFromEnv();
  const handle = options.url
    ? openServerDatabase(options.url, poolSize, onError, prepared)
    : await openEmbeddedDatabase(options.dataDir ?? path.resolve('.data', 'postgres'), poolSize, onError, prepared);
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

/** A pg pool whose idle and checked-out clients both have an `'error'` listener. */
function resilientPool(url: string, max: number, onError: (error: Error) => void): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  // An idle client losing its connection is reported on the pool…
  pool.on('error', onError);
  // …a checked-out one on the client itself: without a listener that is an uncaught 'error' event.
  pool.on('connect', (client) => client.on('error', onError));
  return pool;
}

function openServerDatabase(
  url: string,
  poolSize: number,
  onError: (error: Error) => void,
  prepared: boolean,
): DatabaseHandle {
  const pool = resilientPool(url, poolSize, onError);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: prepared ? preparingPool(pool) : pool }) });
  return { db, kind: 'postgres', url, startedServer: false, close: () => db.destroy() };
}

async function openEmbeddedDatabase(
  dataDir: string,
  poolSize: number,
  onError: (error: Error) => void,
  prepared: boolean,
): Promise<DatabaseHandle> {
  mkdirSync(path.dirname(dataDir), { recursive: true });
  const server = await ensureEmbeddedServer(dataDir);
  const pool = new RestartingPool(dataDir, server.url, poolSize, onError);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: prepared ? preparingPool(pool) : pool }) });
  return {
    db,
    kind: 'embedded',
    get url() {
      return pool.url;
    },
    startedServer: server.started,
    close: () => db.destroy(),
  };
}

/**
 * The pool behind the embedded database. When a connection is refused (the server was stopped or
 * crashed), the server is started again (at the same port when it is free) and the connection tried
 * once more.
 */
class RestartingPool implements PostgresPool {
  private pool: pg.Pool;
  private restarting?: Promise<void>;

  constructor(
    private readonly dataDir: string,
    public url: string,
    private readonly max: number,
    private readonly onError: (error: Error) => void,
  ) {
    this.pool = resilientPool(url, max, onError);
  }

  async connect(): Promise<PostgresPoolClient> {
    const pool = this.pool;
    try {
      return await pool.connect();
    } catch (error) {
      if (!isServerGone(error)) throw error;
      this.onError(error as Error);
      await this.restart(pool);
      return this.pool.connect();
    }
  }

  async end(): Promise<void> {
    await this.pool.end();
  }

  private restart(stale: pg.Pool): Promise<void> {
    this.restarting ??= (async () => {
      const server = await ensureEmbeddedServer(this.dataDir);
      if (this.pool === stale && server.url !== this.url) {
        this.url = server.url;
        this.pool = resilientPool(server.url, this.max, this.onError);
        await stale.end().catch(() => undefined);
      }
    })().finally(() => (this.restarting = undefined));
    return this.restarting;
  }
}

function isServerGone(error: unknown): boolean {
  const code = (error as { code?: string } | undefined)?.code;
  return (
    code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === '57P01' || /Connection terminated/.test(String(error))
  );
}

export { freeLoopbackPort } from './embedded-server';

/** Pause between attempts to re-open a lost LISTEN connection. */
export const LISTEN_RECONNECT_DELAY_MS = 1_000;

export interface PgListener {
  /** Resolves once the first connection listens. */
  ready: Promise<void>;
  close(): Promise<void>;
}

/**
 * LISTENs on `channels` over a dedicated connection that is re-opened whenever it is lost (a server
 * restart), every LISTEN_RECONNECT_DELAY_MS until it succeeds. A lost connection is reported to
 * `onError`, never thrown. Notifications sent while it was down are lost: `onConnect` runs after every
 * (re)connection, so a consumer can catch up from the table it tails.
 */
export function listen(
  url: string | (() => string),
  channels: string[],
  onNotification: (channel: string, payload: string) => void,
  options: { onConnect?: () => void; onError?: (error: Error) => void } = {},
): PgListener {
  let closed = false;
  let current: pg.Client | undefined;
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const connect = async (): Promise<void> => {
    while (!closed) {
      const client = new pg.Client({ connectionString: typeof url === 'function' ? url() : url });
      client.on('error', (error) => options.onError?.(error));
      client.on('notification', (n) => onNotification(n.channel, n.payload ?? ''));
      client.on('end', () => {
        if (closed || current !== client) return;
        current = undefined;
        setTimeout(() => void connect(), LISTEN_RECONNECT_DELAY_MS);
      });
      try {
        await client.connect();
        for (const channel of channels) await client.query(`LISTEN ${client.escapeIdentifier(channel)}`);
        current = client;
        markReady();
        options.onConnect?.();
        return;
      } catch (error) {
        options.onError?.(error as Error);
        await client.end().catch(() => undefined);
        await new Promise((r) => setTimeout(r, LISTEN_RECONNECT_DELAY_MS));
      }
    }
  };
  void connect();
  return {
    ready,
    async close() {
      closed = true;
      await current?.end().catch(() => undefined);
    },
  };
}
