/**
 * `npm start`: the whole product on one machine. Starts the worker (embedded PostgreSQL unless
 * DATABASE_URL is set), defines the demo agent from examples/agents/scribe, runs one task as a Temporal workflow and
 * prints its progress and the Temporal UI links. Then keeps the worker running so you can accept or
 * revise the task from the CLI or the UI (Ctrl-C to stop). With DEMO_EXIT=1 (or CI=true) it accepts the
 * task itself, waits for the post-task reflection and exits. A second start reuses what the first made:
 * its operator token (kept under DATA_DIR until revoked) and its demo task while that is still open
 * (a finished one is named, and a new one starts).
 *
 * SIGINT and SIGTERM stop it the same way: the worker drains (Temporal re-dispatches anything left),
 * the API closes its streams, and the embedded database is checkpointed, then stopped unless another
 * process (a separate worker, `npm run api`) still uses it. The Temporal dev server scripts/start.sh
 * started keeps running. The stop names each thing it leaves running ("Left running: …") with the
 * command that stops it.
 */
import path from 'node:path';
import pg from 'pg';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { LlmRouter } from '../activities/llm/router';
import { createProvider } from '../activities/llm/providers';
import { DEMO_LABEL } from '../activities/llm/demo';
import { openDatabase, type DatabaseHandle } from '../activities/store/db';
import { stopEmbeddedServer } from '../activities/store/embedded-server';
import { AgentsClient } from '../client';
import { printProgress, uiLinks } from '../client/progress';
import { AgentSchedules } from '../client/schedules';
import { loadConfig } from '../worker/config';
import { createAgentWorker } from '../worker/create-worker';
import { runtimeTelemetryOptions, telemetryFromEnv } from '../worker/telemetry';
import { DEMO_TOKEN_NAME, startEmbeddedApi, type DemoTokenOrigin } from '../api/embedded';
import { tracingClientInterceptors } from '../client/tracing';
import { DEMO_AGENT_ID, DEMO_CREATOR, DEMO_TASK_TITLE, describeEarlierDemoTask, earlierDemoTask } from './demo-task';

/** The demo's operator token, kept under DATA_DIR (mode 600) so a second start prints the same one. */
const DEMO_TOKEN_FILE = 'demo-operator.token';

async function main(): Promise<void> {
  const config = loadConfig();
  const exitWhenDone = process.env.DEMO_EXIT === '1' || process.env.CI === 'true';
  // Shutdown is ours (below), not the runtime's: it must close the API and the database too.
  Runtime.install({
    logger: new DefaultLogger('WARN'),
    telemetryOptions: runtimeTelemetryOptions(),
    shutdownSignals: [],
  });
  const telemetry = telemetryFromEnv();
  const database = await openDatabase({ url: config.databaseUrl, dataDir: config.embeddedDbDir });
  const nativeConnection = await NativeConnection.connect({ address: config.temporalAddress });
  const connection = await Connection.connect({ address: config.temporalAddress });
  const client = new AgentsClient(
    new Client({ connection, namespace: config.namespace, interceptors: tracingClientInterceptors() }),
    database.db,
    { taskQueue: config.taskQueue },
  );
  const router = LlmRouter.fromConfig(config.providers, createProvider);
  const worker = await createAgentWorker({
    connection: nativeConnection,
    namespace: config.namespace,
    taskQueue: config.taskQueue,
    db: database.db,
    router,
    telemetry,
  });
  const running = worker.run();
  let api: Awaited<ReturnType<typeof startEmbeddedApi>> | undefined = undefined;
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await api?.close();
      await running.catch(() => undefined);
      await connection.close();
      await nativeConnection.close();
      await closeDatabase(database, config.embeddedDbDir);
      await telemetry?.shutdown();
      const temporal = temporalLeftRunning(config.temporalAddress);
      if (temporal) console.log(temporal);
    })());
  // `on`, not `once`: a Ctrl-C reaches both npm and this process, and npm relays it once more; a second
  // signal must not kill the process halfway through its shutdown (stop() runs once).
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (stopping) return;
      console.log(`\n${signal}: draining the worker and closing the API and the database…`);
      stop().then(
        () => process.exit(0),
        (error: unknown) => {
          console.error(error);
          process.exit(1);
        },
      );
    });
  }

  console.log(
    `\nWorker polling "${config.taskQueue}" on Temporal ${config.temporalAddress}; database: ${database.kind === 'embedded' ? `embedded PostgreSQL at ${database.url}` : database.url}`,
  );
  console.log(
    config.demoModel ? `Model: ${DEMO_LABEL}` : `Providers: ${config.providers.map((p) => p.name).join(' → ')}`,
  );
  api = await startEmbeddedApi({
    client,
    database,
    workspaceRoot: config.workspaceRoot,
    namespace: config.namespace,
    registries: telemetry ? [telemetry.registry] : [],
    tokenFile: path.join(config.dataDir, DEMO_TOKEN_FILE),
  });
  const revoke = `npm run agents -- token revoke ${DEMO_TOKEN_NAME}`;
  const tokenNote: Record<DemoTokenOrigin, string> = {
    kept: ` (the one an earlier start made; it stays valid until: ${revoke})`,
    replaced: ` (new: the one an earlier start kept in ${DEMO_TOKEN_FILE} no longer works (revoked, or made for another database); this one stays valid until: ${revoke})`,
    new: ` (kept in ${path.join(config.dataDir, DEMO_TOKEN_FILE)} for the next start; valid until: ${revoke})`,
  };
  console.log(
    `HTTP API: ${api.url}/v1 (OpenAPI at /v1/openapi.json)\n  Operator token: ${api.token}${tokenNote[api.tokenOrigin]}\n  Approvals inbox: ${api.url}/inbox (sign in with the operator token)`,
  );

  await client.upsertAgentFromFolder(path.resolve('examples/agents/scribe'), {
    id: DEMO_AGENT_ID,
    workspaceDir: path.join(config.workspaceRoot, DEMO_AGENT_ID),
  });
  // The agent's heartbeat (every 30 min) and daily consolidation, as Temporal Schedules you can pause in the UI.
  const schedules = new AgentSchedules(client.temporal, { taskQueue: config.taskQueue });
  await schedules.createHeartbeat(DEMO_AGENT_ID);
  await schedules.createConsolidation(DEMO_AGENT_ID);
  console.log(
    `Schedules heartbeat-${DEMO_AGENT_ID} and consolidation-${DEMO_AGENT_ID}: ${process.env.TEMPORAL_UI_URL ?? 'http://localhost:8233'}/namespaces/${config.namespace}/schedules`,
  );
  // A second start shows the demo task an earlier one left open instead of starting another.
  const earlier = await earlierDemoTask(client, database);
  if (earlier)
    console.log(
      `\n${describeEarlierDemoTask(earlier, config.temporalAddress, uiLinks(earlier.id, DEMO_AGENT_ID).task)}`,
    );
  const taskId =
    earlier?.kind === 'open'
      ? earlier.id
      : (
          await client.startTask({
            agentId: DEMO_AGENT_ID,
            title: DEMO_TASK_TITLE,
            description:
              'Write plan.md in your workspace: the outline of a one-page guide (what a durable agent is, why Temporal, how a human approves risky steps). Read it back, then submit it for review.',
            createdBy: DEMO_CREATOR,
          })
        ).taskId;
  const links = uiLinks(taskId, DEMO_AGENT_ID);
  console.log(
    `${earlier?.kind === 'open' ? '' : `\nTask ${taskId} is running as workflow task-${taskId}.\n`}  Watch it:        ${links.task}\n  All agent runs:  ${links.agentRuns}\n`,
  );

  const status = await printProgress(client, taskId);
  if (status?.state !== 'review')
    throw new Error(`the demo task ended in ${status?.state ?? 'an unknown state'}: ${status?.lastError ?? ''}`);
  console.log(`\nThe task is in review. Submission: ${status.submission ?? ''}`);
  if (exitWhenDone) {
    await client.review(taskId, { decision: 'accept', decidedBy: 'demo' });
    const result = await client.result(taskId);
    console.log(
      `Accepted: task ${result.state} after ${result.rounds} round(s), ${result.usage.inputTokens} input / ${result.usage.outputTokens} output tokens.`,
    );
    await stop();
    return;
  }
  console.log(
    `Accept or revise it from another terminal${database.kind === 'embedded' ? ' (the CLI finds the embedded database by itself)' : ` (DATABASE_URL=${database.url})`}:\n` +
      `  npm run agents -- task accept ${taskId}\n  npm run agents -- task revise ${taskId} --feedback "shorter, please"\n` +
      `or send the reviewDecision signal from the Temporal UI. Ctrl-C (or kill ${process.pid}) stops the worker; Temporal keeps the task.`,
  );
  await running;
  await stop();
}

/**
 * What `npm start` leaves running for the person at the terminal: the Temporal dev server scripts/start.sh
 * started or found, which keeps every workflow's history browsable in the Web UI. Found already running
 * and not started by an earlier start (no pid recorded under DATA_DIR), it is not ours to stop: the
 * message says so. Nothing when TEMPORAL_ADDRESS named a server of the user's own.
 */
function temporalLeftRunning(address: string): string | undefined {
  const ui = process.env.DEMO_TEMPORAL_UI;
  if (!ui) return undefined;
  const pid = Number(process.env.DEMO_TEMPORAL_PID);
  if (Number.isInteger(pid) && pid > 0) {
    if (!isAlive(pid)) return undefined;
    return (
      `Left running: the Temporal dev server (process ${pid}) at ${address}, Web UI ${ui}, so the task's history stays browsable; ` +
      `the next \`npm start\` uses it again. Stop it with: kill ${pid}`
    );
  }
  return (
    `Left running: the Temporal server at ${address}, Web UI ${ui}. It was already running when this start began, ` +
    `and no \`npm start\` recorded starting it (no pid under DATA_DIR), so it is left to whatever started it.`
  );
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Closes our pool; embedded, checkpoints and then stops the server unless another process is still
 * connected to it (it then keeps serving that process, and `agents db stop` ends it).
 */
async function closeDatabase(database: DatabaseHandle, embeddedDbDir: string): Promise<void> {
  const url = database.url;
  await database.close();
  if (database.kind !== 'embedded') return;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  let others = 0;
  try {
    await client.query('checkpoint');
    const { rows } = await client.query<{ others: number }>(
      "select count(*)::int as others from pg_stat_activity where backend_type = 'client backend' and pid <> pg_backend_pid()",
    );
    others = rows[0]?.others ?? 0;
  } finally {
    await client.end();
  }
  if (others > 0) {
    console.log(
      `Left running: the embedded PostgreSQL at ${url}, for the ${others} other connection(s) using it. Stop it with: npm run agents -- db stop`,
    );
    return;
  }
  await stopEmbeddedServer(embeddedDbDir);
  console.log(`Stopped the embedded PostgreSQL (its data stays in ${embeddedDbDir}).`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
