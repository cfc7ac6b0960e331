/**
 * The bench's worker process: the product's own `createAgentWorker` with the Anthropic provider pointed
 * at the bench's fake server. A separate process so that its CPU and RSS are measured apart from the
 * driver. Prints `ready` once it polls.
 */
import { NativeConnection, Runtime, DefaultLogger } from '@temporalio/worker';
import { LlmRouter } from '../../activities/llm/router';
import { createProvider } from '../../activities/llm/providers';
import { openDatabase } from '../../activities/store/db';
import { createAgentWorker } from '../../worker/create-worker';
import { workerTuning } from './tuning';

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const env = process.env;
  const database = await openDatabase({ url: env.DATABASE_URL!, poolSize: Number(env.BENCH_DB_POOL ?? 10), migrate: false });
  const connection = await NativeConnection.connect({ address: env.BENCH_TEMPORAL_ADDRESS! });
  const router = LlmRouter.fromConfig([{ name: 'anthropic', kind: 'anthropic', apiKey: 'bench', baseURL: env.BENCH_FAKE_URL! }], createProvider);
  const worker = await createAgentWorker({
    connection,
    namespace: 'default',
    taskQueue: env.BENCH_TASK_QUEUE!,
    db: database.db,
    router,
    workflowBundle: { codePath: env.BENCH_WORKFLOW_BUNDLE! },
    overrides: workerTuning(env),
  });
  const running = worker.run();
  process.stdout.write('ready\n');
  process.on('SIGTERM', () => worker.shutdown());
  await running;
  await connection.close();
  await database.close();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
