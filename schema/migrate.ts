import { Migrator, type Kysely, type MigrationResult } from 'kysely';
import { migrations } from './migrations';

/**
 * Brings the schema up to date. Safe when several processes start at once: Kysely's Migrator takes
 * a lock (a row lock on `kysely_migration_lock` inside a transaction) so one runs the migrations and
 * the others wait, then find nothing left to do.
 */
export async function migrateToLatest(db: Kysely<any>): Promise<MigrationResult[]> {
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
