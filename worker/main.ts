import { NativeConnection, Runtime } from '@temporalio/worker';
import { LlmRouter } from '../activities/llm/router';
import { createProvider } from '../activities/llm/providers';
import { openDatabase } from '../activities/store/db';
import { loadConfig } from './config';
import { createAgentWorker } from './create-worker';
import { createLogger, TemporalPinoLogger } from './logger';
import { runtimeTelemetryOptions, telemetryFromEnv } from './telemetry';

/**
 * The worker process: migrates the database, connects to Temporal and polls the task queue until
 * SIGINT/SIGTERM, then drains in-flight activities (Temporal re-dispatches anything left).
 */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger();
  Runtime.install({ logger: new TemporalPinoLogger(logger), telemetryOptions: runtimeTelemetryOptions() });
  const telemetry = telemetryFromEnv();
  if (telemetry && process.env.METRICS_PORT) await telemetry.serveMetrics(Number(process.env.METRICS_PORT), process.env.METRICS_HOST, process.env.TEMPORAL_METRICS_BIND && `http://${process.env.TEMPORAL_METRICS_BIND}/metrics`);
  const database = await openDatabase({ url: config.databaseUrl, dataDir: `${config.dataDir}/pglite` });
  const connection = await NativeConnection.connect({ address: config.temporalAddress });
  const router = LlmRouter.fromConfig(config.providers, createProvider);
  const worker = await createAgentWorker({ connection, namespace: config.namespace, taskQueue: config.taskQueue, db: database.db, router, telemetry });
  logger.info(
    { taskQueue: config.taskQueue, temporal: config.temporalAddress, database: database.kind, providers: config.providers.map((p) => p.name) },
    'durable-agents worker started',
  );
  try {
    await worker.run();
  } finally {
    await connection.close();
    await database.close();
    await telemetry?.shutdown();
  }
}

main().catch((error) => {
  createLogger().fatal({ err: error }, 'worker failed');
  process.exit(1);
});
