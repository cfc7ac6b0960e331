/** `npm run migrate`: brings DATABASE_URL (or the embedded PostgreSQL under DATA_DIR) up to date. */
import path from 'node:path';
import { openDatabase } from '../activities/store/db';
import { migrateToLatest } from './migrate';

async function main(): Promise<void> {
  const database = await openDatabase({
    url: process.env.DATABASE_URL || undefined,
    dataDir: path.resolve(process.env.DATA_DIR ?? '.data', 'postgres'),
    migrate: false,
  });
  try {
    const results = await migrateToLatest(database.db);
    if (results.length === 0) console.log('schema already up to date');
    for (const r of results) console.log(`${r.status.toLowerCase()}: ${r.migrationName}`);
  } finally {
    await database.close();
  }
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
