import { NativeConnection, Runtime } from '@temporalio/worker';
import { LlmRouter } from '../activities/llm/router';
import { createProvider } from '../activities/llm/providers';
import { openDatabase } from '../activities/store/db';
import { loadConfig } from './config';
import { createAgentWorker } from './create-worker';
import { createLogger, TemporalPinoLogger } from './logger';
import { ensureStreamPruneSchedule } from './stream-prune-schedule';

/**
 * The worker process: migrates the database, connects to Temporal and polls the task queue until
 * SIGINT/SIGTERM, then drains in-flight activities (Temporal re-dispatches anything left).
 */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger();
  Runtime.install({ logger: new TemporalPinoLogger(logger) });
  const database = await openDatabase({ url: config.databaseUrl, dataDir: `${config.dataDir}/pglite` });
  const connection = await NativeConnection.connect({ address: config.temporalAddress });
  const router = LlmRouter.fromConfig(config.providers, createProvider);
  const worker = await createAgentWorker({ connection, namespace: config.namespace, taskQueue: config.taskQueue, db: database.db, router });
  await ensureStreamPruneSchedule({ address: config.temporalAddress, namespace: config.namespace, taskQueue: config.taskQueue });
  logger.info(
    { taskQueue: config.taskQueue, temporal: config.temporalAddress, database: database.kind, providers: config.providers.map((p) => p.name) },
    'durable-agents worker started',
  );
  try {
    await worker.run();
  } finally {
    await connection.close();
    await database.close();
  }
}

main().catch((error) => {
  createLogger().fatal({ err: error }, 'worker failed');
  process.exit(1);
});
