import { NativeConnection, Runtime, type Worker } from '@temporalio/worker';
import { LlmRouter } from '../activities/llm/router';
import { createProvider } from '../activities/llm/providers';
import { openDatabase, type DatabaseHandle } from '../activities/store/db';
import { DatabaseSchemaError } from '../schema/migrate';
import { checkSearchAttributes } from './search-attributes';
import { loadConfig, workerServersFromEnv } from './config';
import { isConfigurationError, listenError } from '../activities/env-values';
import { createAgentWorker } from './create-worker';
import { DependencyHealth, postgresProbe, temporalProbe } from './health';
import { serveWorkerHealth } from './health-server';
import { createLogger, TemporalPinoLogger } from './logger';
import { sandboxStatus } from '../activities/tools/shell/sandbox';
import { webToolsConfig } from '../activities/tools/web/config';
import { ensureStreamPruneSchedule } from './stream-prune-schedule';
import { runtimeTelemetryOptions, telemetryFromEnv } from './telemetry';
import { mcpSessions } from '../activities/tools/mcp/pool';
import { armStopDeadline, closeInOrder, closeServer, type CloseStep, type StopDeadline } from './graceful-stop';

/** Pause before connecting again to a dependency that is not there yet (at start-up). */
export const STARTUP_RETRY_DELAY_MS = 2_000;
/** Pause before starting a new worker after the previous one stopped with an error. */
export const WORKER_RESTART_DELAY_MS = 2_000;

/**
 * The worker process: migrates the database, connects to Temporal and polls the task queue until
 * SIGINT/SIGTERM, then drains in-flight activities (Temporal re-dispatches anything left).
 *
 * It outlives its dependencies: PostgreSQL or Temporal restarting makes running activities fail (and
 * Temporal retries them), lost pg connections are replaced on the next query, and a worker that
 * stops with an error is replaced by a new one on the same connection. Each dependency's state is
 * probed and every change is logged (`postgres is down` … `postgres is up`).
 */
async function main(): Promise<void> {
  const config = loadConfig();
  const servers = workerServersFromEnv();
  const runtimeTelemetry = runtimeTelemetryOptions();
  const logger = createLogger();
  // Core's own logs (connection errors, poll retries) go through pino too, as JSON lines.
  const runtime = Runtime.install({
    logger: new TemporalPinoLogger(logger),
    telemetryOptions: {
      logging: { filter: { core: 'WARN', other: 'ERROR' }, forward: {} },
      ...runtimeTelemetry,
    },
  });
  // Traces and Prometheus metrics, when their environment variables are set (off by default).
  const telemetry = telemetryFromEnv();

  // What the stop closes, added as each thing is opened and closed newest first: one left open (a
  // listening port, a pool) would keep the process alive after "worker stopped".
  const closing: CloseStep[] = [];
  let stopping = false;
  let current: Worker | undefined;
  let deadline: StopDeadline | undefined;
  let wake!: () => void;
  const stopRequested = new Promise<void>((resolve) => (wake = resolve));
  // SIGTERM (an orchestrator's stop) drains: the worker stops polling, lets in-flight activities finish
  // within its grace time, and Temporal re-dispatches anything left to another worker. Before the worker
  // polls (still waiting for PostgreSQL or Temporal) the stop is immediate.
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    deadline = armStopDeadline((waitingFor, afterMs) =>
      logger.error({ waitingFor, afterMs }, `still ${waitingFor} ${afterMs} ms after the stop signal; exiting now`),
    );
    deadline.waitingFor('the worker to drain its activities');
    logger.info('stopping: draining the worker');
    // Temporal's runtime may have begun the drain on the same signal already.
    if (current?.getState() === 'RUNNING') current.shutdown();
    wake();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  // Last line of defence: log, never die, on a stray rejection (the worker keeps polling).
  process.on('unhandledRejection', (error) => logger.error({ err: error }, 'unhandled rejection'));

  // The runtime shuts itself down when its last connection closes; one that never opened (a stop while
  // waiting for PostgreSQL) would keep the process alive through its log forwarding.
  closing.push(['shutting down the Temporal runtime', () => runtime.shutdown()]);
  if (telemetry) closing.push(['exporting the last spans', () => telemetry.shutdown()]);
  // MCP servers the worker started (sandboxed child processes) and HTTP sessions end with it.
  closing.push(['ending MCP sessions', () => mcpSessions.closeAll()]);
  try {
    if (telemetry && servers.metrics) {
      const { port, host } = servers.metrics;
      const runtimeMetrics = runtimeTelemetry?.metrics;
      const metricsServer = await telemetry
        .serveMetrics(
          port,
          host,
          runtimeMetrics && 'prometheus' in runtimeMetrics
            ? `http://${runtimeMetrics.prometheus.bindAddress}/metrics`
            : undefined,
        )
        .catch((error: unknown) => {
          throw listenError(error, ['METRICS_PORT', port], ['METRICS_HOST', host]);
        });
      closing.push(['closing the metrics server', () => closeServer(metricsServer)]);
    }

    // Created once both connections exist; the pool reports lost connections to it from the start.
    const healthRef: { current?: DependencyHealth } = {};
    const database = await untilUp(
      'PostgreSQL',
      () =>
        openDatabase({
          url: config.databaseUrl,
          dataDir: config.embeddedDbDir,
          onConnectionError: (error) => {
            logger.warn({ err: error.message }, 'a PostgreSQL connection was lost; the next query opens a new one');
            healthRef.current?.report('postgres', false, error);
          },
        }),
      (opened) => opened.close(),
    );
    if (!database) return;
    closing.push(['closing the database pool', () => database.close()]);
    const connection = await untilUp(
      'Temporal',
      () => NativeConnection.connect({ address: config.temporalAddress }),
      (opened) => opened.close(),
    );
    if (!connection) return;
    closing.push(['closing the Temporal connection', () => connection.close()]);
    const unchecked = await checkSearchAttributes(connection, config.namespace);
    if (unchecked) logger.warn(unchecked);
    const health = new DependencyHealth({
      probes: { postgres: postgresProbe(database.db), temporal: temporalProbe(connection) },
      onChange: (name, status) =>
        status.state === 'up'
          ? logger.info({ dependency: name, ...status }, `${name} is up`)
          : logger.warn({ dependency: name, ...status }, `${name} is ${status.state}`),
    });
    healthRef.current = health;
    health.start();
    closing.push(['stopping the dependency probes', () => health.stop()]);
    if (servers.health) {
      const { port, host } = servers.health;
      const healthServer = await serveWorkerHealth(
        { snapshot: () => health.snapshot(), polling: () => !stopping && current?.getState() === 'RUNNING' },
        port,
        host,
      ).catch((error: unknown) => {
        throw listenError(error, ['HEALTH_PORT', port], ['HEALTH_HOST', host]);
      });
      closing.push(['closing the health server', () => closeServer(healthServer)]);
    }
    const router = LlmRouter.fromConfig(config.providers, createProvider);
    // Hourly pruning of old stream rows; failing to create it must not stop the worker from serving.
    await ensureStreamPruneSchedule({
      address: config.temporalAddress,
      namespace: config.namespace,
      taskQueue: config.taskQueue,
    }).catch((error: unknown) =>
      logger.warn(
        { err: String(error) },
        'could not ensure the stream prune schedule; old stream rows are kept until it exists',
      ),
    );
    logger.info(
      {
        taskQueue: config.taskQueue,
        temporal: config.temporalAddress,
        database: describeDatabase(database),
        providers: config.providers.map((p) => p.name),
      },
      'durable-agents worker started',
    );
    // Every start says where tool processes run; a bad AGENTS_SANDBOX or AGENTS_SANDBOX_BWRAP stops the start here.
    const sandbox = await sandboxStatus();
    logger[sandbox.level](
      { sandbox: sandbox.level === 'info' ? 'bwrap' : sandbox.level === 'warn' ? 'off' : 'unavailable' },
      sandbox.message,
    );
    // The web tools' settings (WEB_FETCH*, WEB_SEARCH_*): a bad value stops the start here, not at an agent's first call.
    const web = webToolsConfig();
    logger.info(
      {
        webFetch: web.fetchEnabled ? 'on' : 'off',
        webFetchAllow: web.policy.allowed,
        webSearch: web.search?.kind ?? 'off',
      },
      'web tools',
    );
    while (!stopping) {
      let worker: Worker | undefined;
      try {
        worker = current = await createAgentWorker({
          connection,
          namespace: config.namespace,
          taskQueue: config.taskQueue,
          db: database.db,
          router,
          telemetry,
          ...(config.workflowBundlePath ? { workflowBundle: { codePath: config.workflowBundlePath } } : {}),
          ...(config.deployment
            ? {
                overrides: {
                  workerDeploymentOptions: {
                    version: config.deployment,
                    useWorkerVersioning: true,
                    defaultVersioningBehavior: 'AUTO_UPGRADE',
                  },
                },
              }
            : {}),
        });
        if (stopping) break;
        await worker.run();
        if (!stopping) logger.warn('the worker stopped without being asked to; starting a new one');
      } catch (error) {
        if (stopping) break;
        health.report('temporal', false, error);
        logger.error(
          { err: error },
          `the worker stopped with an error; starting a new one in ${WORKER_RESTART_DELAY_MS} ms`,
        );
      }
      if (!stopping) await pauseUnlessStopping(WORKER_RESTART_DELAY_MS);
    }
  } finally {
    current = undefined;
    await closeInOrder(closing.reverse(), {
      deadline,
      onError: (what, error) => logger.warn({ err: error }, `${what} failed; the stop goes on`),
    });
    if (stopping) logger.info('durable-agents worker stopped');
  }

  /**
   * Connects, retrying while the dependency is not there yet (containers start in any order).
   * Undefined once a stop is asked for: the wait ends at once, and a connection that opens late is closed.
   */
  async function untilUp<T>(
    what: string,
    connect: () => Promise<T>,
    close: (opened: T) => Promise<unknown>,
  ): Promise<T | undefined> {
    for (let attempt = 1; !stopping; attempt++) {
      const attempting = connect().then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      );
      const outcome = await Promise.race([attempting, stopRequested.then(() => undefined)]);
      if (outcome === undefined) {
        void attempting.then((late) => ('value' in late ? close(late.value) : undefined)).catch(() => undefined);
        return undefined;
      }
      if ('value' in outcome) return outcome.value;
      const { error } = outcome;
      // A schema from another release is not a server still starting: waiting would hide it.
      if (error instanceof DatabaseSchemaError) throw error;
      if (stopping) return undefined;
      if (attempt === 1 || attempt % 10 === 0)
        logger.warn({ err: error instanceof Error ? error.message : String(error), attempt }, `waiting for ${what}`);
      await pauseUnlessStopping(STARTUP_RETRY_DELAY_MS);
    }
    return undefined;
  }

  /** A pause that a stop ends at once (its timer cleared, so it holds the process no longer). */
  function pauseUnlessStopping(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      void stopRequested.then(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}

function describeDatabase(database: DatabaseHandle): string {
  if (database.kind === 'postgres') return 'postgres';
  return `embedded PostgreSQL at ${database.url}${database.startedServer ? ' (started by this process; it keeps running after it)' : ''}`;
}

main().catch((error) => {
  // A bad variable is the operator's to fix: one line saying which and why, no stack.
  if (isConfigurationError(error)) createLogger().fatal({ variable: error.variable }, error.message);
  else createLogger().fatal({ err: error }, 'worker failed');
  process.exit(1);
});
