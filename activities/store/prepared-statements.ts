import { createHash } from 'node:crypto';
import type { PostgresCursor, PostgresPool, PostgresPoolClient, PostgresQueryResult } from 'kysely';

/**
 * A statement is prepared from its second use on: one run once (a migration step, a report) is not
 * worth a plan kept by every connection.
 */
export const PREPARE_FROM_USE = 2;

/**
 * Distinct statements this process prepares, at most. Every backend keeps each one it ran, with its
 * plan, for the connection's life; the product's hot statements are a few dozen, and a statement built
 * with a varying shape (an IN list of n values) stops being prepared here instead of growing without end.
 */
export const PREPARED_STATEMENTS_MAX = 256;

/** Distinct statements whose uses are counted before they are prepared (bounded like the names). */
const COUNTED_STATEMENTS_MAX = 4 * PREPARED_STATEMENTS_MAX;

/**
 * The name each hot statement is prepared under, shared by every connection of a pool. A name is the
 * statement's hash, so two connections (or two processes) that prepare the same text agree on it.
 */
export class StatementNames {
  private readonly uses = new Map<string, number>();
  private readonly names = new Map<string, string>();
  private generation = 0;

  /** The name to prepare `text` under, or undefined to run it unprepared (first use, or over the bound). */
  nameFor(text: string): string | undefined {
    const named = this.names.get(text);
    if (named) return named;
    const uses = (this.uses.get(text) ?? 0) + 1;
    if (uses < PREPARE_FROM_USE || this.names.size >= PREPARED_STATEMENTS_MAX) {
      if (this.uses.size < COUNTED_STATEMENTS_MAX || this.uses.has(text)) this.uses.set(text, uses);
      return undefined;
    }
    this.uses.delete(text);
    const name = `da_${createHash('sha1').update(text).digest('hex').slice(0, 20)}${this.generation ? `_${this.generation}` : ''}`;
    this.names.set(text, name);
    return name;
  }

  /**
   * Forgets a statement's name after PostgreSQL refused its cached plan (a migration changed a table it
   * reads with `select *`): its next use prepares it afresh under a new name on every connection.
   */
  retire(text: string): void {
    this.names.delete(text);
    this.generation += 1;
  }

  get size(): number {
    return this.names.size;
  }
}

/**
 * A pool whose connections run the product's hot statements as named prepared statements: PostgreSQL
 * parses each once per connection and, after a few runs, reuses a generic plan instead of planning it
 * again on every bind. For the step's prompt read that planning was most of the statement's time.
 *
 * A cached plan refused after a migration (`cached plan must not change result type`) is retired and,
 * outside a transaction, the statement is run again at once; inside one the error stands (the
 * transaction is already aborted) and the caller's retry prepares it afresh.
 */
export function preparingPool(pool: PostgresPool, names = new StatementNames()): PostgresPool {
  return {
    connect: async () => preparingClient(await pool.connect(), names),
    end: () => pool.end(),
  };
}

function preparingClient(client: PostgresPoolClient, names: StatementNames): PostgresPoolClient {
  const raw = client as unknown as {
    query<R>(config: { name: string; text: string; values: unknown[] }): Promise<PostgresQueryResult<R>>;
  };
  let inTransaction = false;
  async function query<R>(text: string, parameters: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>> {
    if (parameters.length === 0) {
      // Transaction control comes through here as plain statements without parameters.
      if (/^\s*(begin|start\s+transaction)\b/i.test(text)) inTransaction = true;
      else if (/^\s*(commit|rollback|end)\b/i.test(text)) inTransaction = false;
      return client.query<R>(text, parameters);
    }
    const name = names.nameFor(text);
    if (!name) return client.query<R>(text, parameters);
    try {
      return await raw.query<R>({ name, text, values: [...parameters] });
    } catch (error) {
      if (!isStalePlan(error)) throw error;
      names.retire(text);
      if (inTransaction) throw error;
      return client.query<R>(text, parameters);
    }
  }
  return {
    query: ((textOrCursor: string | PostgresCursor<unknown>, parameters?: ReadonlyArray<unknown>) =>
      typeof textOrCursor === 'string'
        ? query(textOrCursor, parameters ?? [])
        : client.query(textOrCursor)) as PostgresPoolClient['query'],
    release: (destroy?: boolean) => client.release(destroy),
  };
}

/** PostgreSQL's refusal of a prepared statement whose tables changed shape since it was prepared. */
function isStalePlan(error: unknown): boolean {
  const e = error as { code?: string; message?: string } | undefined;
  return e?.code === '0A000' && /cached plan must not change result type/.test(e.message ?? '');
}
