import { rmSync } from 'node:fs';
import { stopEmbeddedServer } from '../../activities/store/embedded-server';

export default async function globalTeardown(): Promise<void> {
  const db = (globalThis as { __TEST_DB__?: { close(): Promise<void> } }).__TEST_DB__;
  if (db) await db.close();
  const embeddedDir = process.env.TEST_EMBEDDED_DIR;
  if (embeddedDir) {
    await stopEmbeddedServer(embeddedDir);
    rmSync(embeddedDir, { recursive: true, force: true });
  }
}
