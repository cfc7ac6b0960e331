import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { Kysely, PostgresDialect, type PostgresPool, type PostgresPoolClient } from 'kysely';
import pg from 'pg';
import type { Database } from '../../schema/database';
import { migrateToLatest } from '../../schema/migrate';
import { electEmbeddedServer, type EmbeddedLease } from './embedded-server';

export interface DatabaseHandle {
  db: Kysely<Database>;
  /** `postgres`: a real server by DATABASE_URL; `pglite`: the embedded WASM PostgreSQL. */
  kind: 'postgres' | 'pglite';
  /** A URL other processes (the CLI, a second worker) can connect to. */
  url: string;
  /** For `pglite`: whether this process serves the embedded database or connects to another's. */
  role: 'server' | 'client';
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** A PostgreSQL URL. Absent: the embedded PGlite persisted under `dataDir` (shared, see below). */
  url?: string;
  /** Where PGlite keeps its files (default `.data/pglite`). */
  dataDir?: string;
  /** Run migrations before returning (default true). */
  migrate?: boolean;
  /** Pool size (default 10 for a server, EMBEDDED_POOL_SIZE for the embedded database). */
  poolSize?: number;
  /**
   * Told about every lost connection (a server restart, the serving process exiting). Never thrown:
   * the query that was running fails, and the next one opens a new connection.
   */
  onConnectionError?: (error: Error) => void;
}

/** The embedded database runs one query at a time; a few connections per process are plenty. */
export const EMBEDDED_POOL_SIZE = 4;

// pg returns BIGINT (int8) as a string to avoid precision loss; our bigserial ids stay strings.

/**
 * Opens the database: a real PostgreSQL server when a URL is given, else the embedded PGlite
 * (PostgreSQL compiled to WASM) served over the PostgreSQL wire protocol on a loopback port, so every
 * code path uses `pg`. Embedded, whichever process opens it first (the worker, `npm start`, the CLI)
 * serves it and records its URL beside the data folder; the others connect to that URL, and take over
 * when the serving process exits or crashed (see `electEmbeddedServer`).
 *
 * Connections lost to a server restart never crash the process: pg emits them as `'error'` events on
 * the pool and on each client, which are handled here (and reported to `onConnectionError`).
 */
export async function openDatabase(options: OpenDatabaseOptions = {}): Promise<DatabaseHandle> {
  const onError = options.onConnectionError ?? (() => undefined);
  const handle = options.url
    ? openServerDatabase(options.url, options.poolSize ?? 10, onError)
    : await openEmbeddedDatabase(options.dataDir ?? path.resolve('.data', 'pglite'), options.poolSize ?? EMBEDDED_POOL_SIZE, onError);
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

function openServerDatabase(url: string, poolSize: number, onError: (error: Error) => void): DatabaseHandle {
  const pool = resilientPool(url, poolSize, onError);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return { db, kind: 'postgres', role: 'client', url, close: () => db.destroy() };
}

async function openEmbeddedDatabase(dataDir: string, poolSize: number, onError: (error: Error) => void): Promise<DatabaseHandle> {
  mkdirSync(path.dirname(dataDir), { recursive: true });
  const pool = new FailoverPool(dataDir, poolSize, onError);
  const lease = await pool.lease();
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    kind: 'pglite',
    get url() {
      return pool.url ?? lease.url;
    },
    get role() {
      return pool.role ?? lease.role;
    },
    close: () => db.destroy(),
  };
}

/**
 * The pool behind the embedded database: a pg pool to whichever process serves it. When that process
 * goes away (connection refused), a new election runs (this process may become the server) and the
 * connection is tried once more.
 */
class FailoverPool implements PostgresPool {
  private current?: { lease: EmbeddedLease; pool: pg.Pool };
  private electing?: Promise<{ lease: EmbeddedLease; pool: pg.Pool }>;

  constructor(
    private readonly dataDir: string,
    private readonly max: number,
    private readonly onError: (error: Error) => void,
  ) {}

  get url(): string | undefined {
    return this.current?.lease.url;
  }
  get role(): 'server' | 'client' | undefined {
    return this.current?.lease.role;
  }

  async lease(): Promise<EmbeddedLease> {
    return (await this.ensure()).lease;
  }

  async connect(): Promise<PostgresPoolClient> {
    const current = await this.ensure();
    try {
      return await current.pool.connect();
    } catch (error) {
      if (!isServerGone(error) || current.lease.role === 'server') throw error;
      this.onError(error as Error);
      await this.replace(current);
      return (await this.ensure()).pool.connect();
    }
  }

  async end(): Promise<void> {
    const current = this.current;
    this.current = undefined;
    if (current) {
      await current.pool.end();
      await current.lease.release();
    }
  }

  private async ensure(): Promise<{ lease: EmbeddedLease; pool: pg.Pool }> {
    if (this.current) return this.current;
    this.electing ??= electEmbeddedServer(this.dataDir)
      .then((lease) => (this.current = { lease, pool: resilientPool(lease.url, this.max, this.onError) }))
      .finally(() => (this.electing = undefined));
    return this.electing;
  }

  private async replace(stale: { lease: EmbeddedLease; pool: pg.Pool }): Promise<void> {
    if (this.current !== stale) return;
    this.current = undefined;
    await stale.pool.end().catch(() => undefined);
    await stale.lease.release();
  }
}

function isServerGone(error: unknown): boolean {
  const code = (error as { code?: string } | undefined)?.code;
  return code === 'ECONNREFUSED' || code === 'ECONNRESET' || /Connection terminated/.test(String(error));
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
