import { Migrator, sql, type Kysely, type MigrationResult } from 'kysely';
import { migrations } from './migrations';

/**
 * The database's schema does not fit this release: it misses migrations this release needs while it holds
 * others this release does not know. Starting again does not help: a person must choose the release.
 */
export class DatabaseSchemaError extends Error {
  override name = 'DatabaseSchemaError';
}

/**
 * Brings the schema up to date. Safe when several processes start at once: Kysely's Migrator takes
 * a lock (a row lock on `kysely_migration_lock` inside a transaction) so one runs the migrations and
 * the others wait, then find nothing left to do.
 *
 * A database that a newer release already migrated (every migration of this release applied, and newer
 * ones) is used as it is: during a rolling deploy the previous release's workers keep running, and start
 * again, beside the new ones. That holds because migrations only add (a column or table is dropped one
 * release after the code stopped using it).
 */
export async function migrateToLatest(db: Kysely<any>): Promise<MigrationResult[]> {
  const applied = await appliedMigrations(db);
  const known = Object.keys(migrations);
  const newer = applied.filter((name) => !(name in migrations));
  if (newer.length > 0) {
    const missing = known.filter((name) => !applied.includes(name));
    if (missing.length > 0) {
      throw new DatabaseSchemaError(
        `the database was migrated by another release: it has ${newer.length} migration(s) this release does not know (${newer.slice(-3).join(', ')}) ` +
          `and lacks ${missing.length} this release needs (${missing.slice(0, 3).join(', ')}); run the release that migrated it, or a newer one`,
      );
    }
    return []; // ahead of this release: used as it is
  }
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const { error, results } = await migrator.migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName ?? 'unknown';
    throw new Error(`database migration ${failed} failed: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
  return results ?? [];
}

/** The names of the migrations already applied, oldest first (none on a new database). */
async function appliedMigrations(db: Kysely<any>): Promise<string[]> {
  const table = await sql<{
    present: boolean;
  }>`select to_regclass('public.kysely_migration') is not null as present`.execute(db);
  if (!table.rows[0]?.present) return [];
  const rows = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db);
  return rows.rows.map((r) => r.name);
}
