/**
 * `npm run api`: the HTTP API as its own process (any number of them can run beside the workers).
 * Connects to Temporal and PostgreSQL like the CLI: DATABASE_URL, else the embedded PostgreSQL under
 * DATA_DIR (started if it is not running). Stops on SIGINT/SIGTERM, closing open streams.
 */
import { Client, Connection } from '@temporalio/client';
import { openDatabase } from '../activities/store/db';
import { AgentsClient } from '../client';
import { tracingClientInterceptors } from '../client/tracing';
import { startProcessTracing } from '../worker/tracing';
import { loadConfig } from '../worker/config';
import { armStopDeadline, closeInOrder, type CloseStep } from '../worker/graceful-stop';
import { ConfigurationError, listenError } from '../activities/env-values';
import { loadApiConfig } from './config';
import { buildApi } from './server';

async function main(): Promise<void> {
  const config = loadConfig();
  const apiConfig = loadApiConfig();
  // What the stop closes, added as each thing is opened and closed newest first. A signal during the
  // start closes what is open so far; the process exits 0 either way, within the grace time.
  const closing: CloseStep[] = [];
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    const deadline = armStopDeadline((waitingFor, afterMs) =>
      console.error(`API stop: still ${waitingFor} ${afterMs} ms after the stop signal; exiting now`),
    );
    await closeInOrder([...closing].reverse(), {
      deadline,
      onError: (what, error) =>
        console.error(`API stop: ${what} failed (${error instanceof Error ? error.message : String(error)})`),
    });
    process.exit(0);
  };
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());

  // The API's request spans, exported as the OTEL_* variables say (off without an endpoint).
  const tracing = startProcessTracing('durable-agents-api');
  if (tracing) closing.push(['exporting the last spans', () => tracing.shutdown()]);
  const database = await openDatabase({ url: config.databaseUrl, dataDir: config.embeddedDbDir });
  closing.push(['closing the database pool', () => database.close()]);
  const connection = await Connection.connect({ address: config.temporalAddress }).catch((error: unknown) => {
    throw new ConfigurationError(
      'TEMPORAL_ADDRESS',
      config.temporalAddress,
      `the host:port of a Temporal frontend that answers (${error instanceof Error ? error.message : String(error)})`,
    );
  });
  closing.push(['closing the Temporal connection', () => connection.close()]);
  const client = new AgentsClient(
    new Client({ connection, namespace: config.namespace, interceptors: tracingClientInterceptors() }),
    database.db,
    { taskQueue: config.taskQueue },
  );
  const app = await buildApi({
    client,
    db: database.db,
    databaseUrl: database.url,
    workspaceRoot: config.workspaceRoot,
    namespace: config.namespace,
    ...apiConfig,
    logger: true,
  });
  // Open streams (SSE) end first, so the server's close does not wait for clients that never leave.
  closing.push([
    'closing the HTTP server and its streams',
    async () => {
      await app.closeStreams();
      await app.close();
    },
  ]);
  const url = await app.listen({ host: apiConfig.host, port: apiConfig.port }).catch((error: unknown) => {
    throw listenError(error, ['API_PORT', apiConfig.port], ['API_HOST', apiConfig.host]);
  });
  app.log.info({ url, temporal: config.temporalAddress }, 'durable-agents API listening');
}

main().catch((error) => {
  console.error(`API failed to start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
