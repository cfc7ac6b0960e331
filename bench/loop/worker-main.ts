/**
 * The bench's worker process: the product's own `createAgentWorker` with the Anthropic provider pointed
 * at the bench's fake server, and beside it a bench-only worker for the Temporal floor workflow (its
 * own task queue, `<queue>-floor`). A separate process so that its CPU and RSS are measured apart from
 * the driver. Prints `ready` once both poll.
 */
import { NativeConnection, Runtime, DefaultLogger, Worker } from '@temporalio/worker';
import { LlmRouter } from '../../activities/llm/router';
import { createProvider } from '../../activities/llm/providers';
import { openDatabase } from '../../activities/store/db';
import {
  createAgentWorker,
  MAX_CONCURRENT_ACTIVITIES,
  MAX_CONCURRENT_WORKFLOW_TASKS,
} from '../../worker/create-worker';
import { floorActivities } from './floor/activities';
import { workerTuning } from './tuning';

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const env = process.env;
  const database = await openDatabase({
    url: env.DATABASE_URL!,
    poolSize: Number(env.BENCH_DB_POOL ?? 10),
    migrate: false,
  });
  const connection = await NativeConnection.connect({ address: env.BENCH_TEMPORAL_ADDRESS! });
  const router = LlmRouter.fromConfig(
    [{ name: 'anthropic', kind: 'anthropic', apiKey: 'bench', baseURL: env.BENCH_FAKE_URL! }],
    createProvider,
  );
  const worker = await createAgentWorker({
    connection,
    namespace: 'default',
    taskQueue: env.BENCH_TASK_QUEUE!,
    db: database.db,
    router,
    workflowBundle: { codePath: env.BENCH_WORKFLOW_BUNDLE! },
    overrides: workerTuning(env),
  });
  // The floor worker gets the product worker's activity, local-activity and workflow-task slots.
  const floor = await Worker.create({
    connection,
    namespace: 'default',
    taskQueue: `${env.BENCH_TASK_QUEUE!}-floor`,
    workflowBundle: { codePath: env.BENCH_FLOOR_BUNDLE! },
    activities: floorActivities,
    maxConcurrentActivityTaskExecutions: MAX_CONCURRENT_ACTIVITIES,
    maxConcurrentLocalActivityExecutions: MAX_CONCURRENT_ACTIVITIES,
    maxConcurrentWorkflowTaskExecutions: MAX_CONCURRENT_WORKFLOW_TASKS,
    ...workerTuning(env),
  });
  const running = Promise.all([worker.run(), floor.run()]);
  process.stdout.write('ready\n');
  process.on('SIGTERM', () => {
    worker.shutdown();
    floor.shutdown();
  });
  await running;
  await connection.close();
  await database.close();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
