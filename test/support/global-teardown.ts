import { rmSync } from 'node:fs';

export default async function globalTeardown(): Promise<void> {
  const db = (globalThis as { __TEST_DB__?: { close(): Promise<void> } }).__TEST_DB__;
  if (db) await db.close();
  if (process.env.TEST_PGLITE_DIR) rmSync(process.env.TEST_PGLITE_DIR, { recursive: true, force: true });
}
