import { mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { Connection } from '@temporalio/client';
import { openDatabase } from '../../activities/store/db';
import { quietLogger } from './quiet-logger';

/**
 * Integration tests need a real Temporal server (started by `npm test`, address in TEMPORAL_ADDRESS)
 * and PostgreSQL: DATABASE_URL (CI: a real server) or, when unset, the embedded PostgreSQL started for the
 * loopback port for the duration of the run. The workflow code is bundled once here and reused.
 */
export default async function globalSetup(): Promise<void> {
  const address = process.env.TEMPORAL_ADDRESS;
  if (!address)
    throw new Error('TEMPORAL_ADDRESS is not set: run the tests with `npm test`, which starts a Temporal dev server');
  const connection = await Connection.connect({ address, connectTimeout: '10 seconds' });
  await connection.close();

  const dataDir = path.resolve('.data');
  mkdirSync(dataDir, { recursive: true });
  // Tests keep agents' workspaces in temporary folders: the system's temporary folder is an allowed
  // workspace root (activities/store/workspace-roots.ts) for every test file, the workers it starts in
  // process and the CLI processes it runs. A file that tests the roots sets its own before its harness.
  process.env.AGENTS_WORKSPACE_ALLOWED_ROOTS ??= realpathSync(os.tmpdir());
  if (!process.env.DATABASE_URL) {
    const embeddedDir = path.join(dataDir, `test-postgres-${process.pid}`);
    const handle = await openDatabase({ dataDir: embeddedDir });
    (globalThis as { __TEST_DB__?: { close(): Promise<void> } }).__TEST_DB__ = handle;
    process.env.DATABASE_URL = handle.url;
    process.env.TEST_DB_KIND = 'embedded';
    process.env.TEST_EMBEDDED_DIR = embeddedDir;
  } else {
    const handle = await openDatabase({ url: process.env.DATABASE_URL });
    await handle.close();
    process.env.TEST_DB_KIND = 'postgres';
  }

  const { code } = await bundleWorkflowCode({ workflowsPath: require.resolve('../../workflows'), logger: quietLogger });
  const bundlePath = path.join(dataDir, 'test-workflow-bundle.js');
  writeFileSync(bundlePath, code);
  process.env.TEST_WORKFLOW_BUNDLE = bundlePath;
}
