/**
 * A worker in its own process, for crash tests: the test SIGKILLs it mid-task and starts another.
 * Configured by environment: TEMPORAL_ADDRESS, DATABASE_URL, TEST_TASK_QUEUE, FAKE_LLM_URL,
 * TEST_WORKFLOW_BUNDLE. Prints "worker-ready" once polling.
 */
import { NativeConnection } from '@temporalio/worker';
import { LlmRouter } from '../../activities/llm/router';
import { createProvider } from '../../activities/llm/providers';
import { openDatabase } from '../../activities/store/db';
import { createAgentWorker } from '../../worker/create-worker';
import { installQuietRuntime } from './quiet-runtime';

async function main(): Promise<void> {
  installQuietRuntime();
  const db = await openDatabase({ url: process.env.DATABASE_URL!, poolSize: 5 });
  const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS! });
  const router = LlmRouter.fromConfig(
    [{ name: 'anthropic', kind: 'anthropic', apiKey: 'test-key', baseURL: process.env.FAKE_LLM_URL! }],
    createProvider,
  );
  const worker = await createAgentWorker({
    connection,
    namespace: 'default',
    taskQueue: process.env.TEST_TASK_QUEUE!,
    db: db.db,
    router,
    workflowBundle: { codePath: process.env.TEST_WORKFLOW_BUNDLE! },
    overrides: { maxConcurrentActivityTaskExecutions: 50 },
  });
  const running = worker.run();
  console.log('worker-ready');
  await running;
  await db.close();
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
