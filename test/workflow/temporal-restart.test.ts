import { createHarness, type Harness } from '../support/harness';
import { startProductWorker, type ProductWorker } from '../support/product-worker';
import { startOwnTemporal, type OwnTemporal } from '../support/services';
import { expectNoDuplicatedEffects, stepAgent } from '../support/step-agent';

const TASKS = 10;
/** How long the Temporal server stays down: long enough for polls and completions to fail. */
const TEMPORAL_DOWN_MS = 5_000;

/**
 * The test's own Temporal dev server is stopped while 10 tasks run and started again on the same
 * state file. The same worker process (`worker/main.ts`, in a child process) reconnects, every task
 * reaches review, and nothing is done twice.
 */
describe('the worker survives a Temporal server restart', () => {
  let temporal: OwnTemporal;
  let h: Harness;
  let worker: ProductWorker | undefined;
  beforeAll(async () => {
    temporal = await startOwnTemporal();
    h = await createHarness({ temporalAddress: temporal.address });
    h.llm.setResponder(stepAgent);
  });
  afterAll(async () => {
    await worker?.stop();
    await h.close();
    await temporal.close();
  });

  test(`${TASKS} running tasks, the Temporal dev server stopped and started again on the same state file`, async () => {
    worker = await startProductWorker({
      TEMPORAL_ADDRESS: temporal.address,
      TEMPORAL_TASK_QUEUE: h.taskQueue,
      ANTHROPIC_API_KEY: 'test-key',
      ANTHROPIC_BASE_URL: h.llm.url,
    });
    const pid = worker.child.pid;
    const agentId = await h.createAgent();
    const taskIds: string[] = [];
    for (let i = 0; i < TASKS; i++)
      taskIds.push((await h.client.startTask({ agentId, title: `Survive ${i}`, description: 'write steps' })).taskId);
    await worker.waitForLog(() => h.llm.requests.length >= TASKS, 'the first LLM calls');
    await temporal.stop();
    await worker.waitForLog((l) => l.msg === 'temporal is down', 'the worker to log that Temporal is down');
    await new Promise((r) => setTimeout(r, TEMPORAL_DOWN_MS));
    await temporal.start();
    await worker.waitForLog(
      (l) =>
        l.msg === 'temporal is up' &&
        worker!.logs.indexOf(l) > worker!.logs.findIndex((d) => d.msg === 'temporal is down'),
      'the worker to log that Temporal is back',
    );

    for (const taskId of taskIds) await h.waitForStatus(taskId, (s) => s.state === 'review', 180_000);
    expect(worker.child.exitCode).toBeNull();
    expect(worker.child.pid).toBe(pid);
    await expectNoDuplicatedEffects(h, taskIds);
  }, 300_000);
});
