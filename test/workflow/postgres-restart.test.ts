import { sql } from 'kysely';
import { freeLoopbackPort, listen } from '../../activities/store/db';
import { eventually } from '../support/eventually';
import { createHarness, type Harness } from '../support/harness';
import { startProductWorker, type ProductWorker } from '../support/product-worker';
import { startOwnPostgres, type OwnPostgres } from '../support/services';
import { expectNoDuplicatedEffects, stepAgent } from '../support/step-agent';

const TASKS = 10;
/** How long PostgreSQL stays down: longer than a few activity retries, so work really waits for it. */
const POSTGRES_DOWN_MS = 5_000;

/**
 * PostgreSQL (the test's own server) is stopped in immediate mode while 10 tasks run, then started
 * again. The same worker process (`worker/main.ts`, in a child process) lives on, every task reaches
 * review, nothing is done twice, the worker's logs say when PostgreSQL went down and came back, and a
 * LISTEN connection (`listen`) is re-opened by itself.
 */
describe('the worker survives a PostgreSQL restart', () => {
  let postgres: OwnPostgres;
  let h: Harness;
  let worker: ProductWorker | undefined;
  beforeAll(async () => {
    postgres = startOwnPostgres(await freeLoopbackPort());
    h = await createHarness({ databaseUrl: postgres.url });
    h.llm.setResponder(stepAgent);
  });
  afterAll(async () => {
    await worker?.stop();
    await h.close();
    postgres.close();
  });

  test(`${TASKS} running tasks, PostgreSQL stopped in immediate mode and started again`, async () => {
    worker = await startProductWorker({
      DATABASE_URL: postgres.url,
      TEMPORAL_TASK_QUEUE: h.taskQueue,
      ANTHROPIC_API_KEY: 'test-key',
      ANTHROPIC_BASE_URL: h.llm.url,
    });
    const pid = worker.child.pid;
    // A LISTEN connection of its own, like a progress stream's: it must be back after the restart.
    const heard: string[] = [];
    let connects = 0;
    const listener = listen(postgres.url, ['ops_restart'], (_channel, payload) => heard.push(payload), {
      onConnect: () => (connects += 1),
    });
    await listener.ready;
    const agentId = await h.createAgent();
    const taskIds: string[] = [];
    for (let i = 0; i < TASKS; i++)
      taskIds.push((await h.client.startTask({ agentId, title: `Survive ${i}`, description: 'write steps' })).taskId);
    // Down while the tasks are mid-way: some LLM calls made, most not.
    await worker.waitForLog(() => h.llm.requests.length >= TASKS, 'the first LLM calls');
    postgres.stopImmediately();
    await worker.waitForLog((l) => l.msg === 'postgres is down', 'the worker to log that PostgreSQL is down');
    await new Promise((r) => setTimeout(r, POSTGRES_DOWN_MS));
    postgres.start();
    await worker.waitForLog(
      (l) =>
        l.msg === 'postgres is up' &&
        worker!.logs.indexOf(l) > worker!.logs.findIndex((d) => d.msg === 'postgres is down'),
      'the worker to log that PostgreSQL is back',
    );

    await eventually(
      async () => {
        await sql`select pg_notify('ops_restart', 'after the restart')`.execute(h.db.db);
        return heard.includes('after the restart');
      },
      'a notification on the re-opened LISTEN connection',
      30_000,
      250,
    );
    expect(connects).toBeGreaterThanOrEqual(2);
    await listener.close();

    for (const taskId of taskIds) await h.waitForStatus(taskId, (s) => s.state === 'review', 180_000);
    expect(worker.child.exitCode).toBeNull();
    expect(worker.child.pid).toBe(pid);
    await expectNoDuplicatedEffects(h, taskIds);
  }, 300_000);
});
