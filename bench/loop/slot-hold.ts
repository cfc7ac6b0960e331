/**
 * `tsx bench/loop/slot-hold.ts [holders] [holdMs]`: what a workflow task held open by a local activity
 * costs the other workflows of its worker. A workflow task keeps its workflow-task slot until it
 * completes to the server, and it stays open while its local activities run (a round's local steps).
 * For each slot setting (the SDK's default, and the product worker's `MAX_CONCURRENT_WORKFLOW_TASKS`),
 * `holders` workflows (default 39) each start one local activity of `holdMs` (default 5,000 ms); half a
 * second later a workflow with nothing to do starts, and the table shows how long it took to finish
 * (with no holder, tens of milliseconds). Own Temporal dev server; the bench's floor workflow.
 */
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { floorActivities } from './floor/activities';
import type { floorLoopWorkflow } from './floor/workflows';
import { startDevServer } from './services';
import { quietLogger } from '../../test/support/quiet-logger';
import { installQuietRuntime } from '../../test/support/quiet-runtime';
import {
  MAX_CONCURRENT_ACTIVITIES,
  MAX_CONCURRENT_WORKFLOW_TASKS,
  WORKFLOW_TASK_SLOTS_BESIDE_LOCAL,
} from '../../worker/create-worker';

/** Time between the holders' start and the probe's, so that every holder is inside its local activity. */
const PROBE_AFTER_MS = 500;

async function probe(address: string, slots: number, holders: number, holdMs: number): Promise<number> {
  const connection = await NativeConnection.connect({ address });
  const client = new Client({ connection: await Connection.connect({ address }) });
  const taskQueue = `slot-hold-${randomUUID()}`;
  const worker = await Worker.create({
    connection,
    taskQueue,
    workflowsPath: require.resolve('./floor/workflows'),
    activities: floorActivities,
    maxConcurrentActivityTaskExecutions: MAX_CONCURRENT_ACTIVITIES,
    maxConcurrentLocalActivityExecutions: MAX_CONCURRENT_ACTIVITIES,
    maxConcurrentWorkflowTaskExecutions: slots,
  });
  const start = (iterations: number, delayMs: number) =>
    client.workflow.start<typeof floorLoopWorkflow>('floorLoopWorkflow', {
      taskQueue,
      workflowId: `slot-hold-${randomUUID()}`,
      args: [{ iterations, delayMs, kind: 'local' }],
    });
  try {
    return await worker.runUntil(async () => {
      await (await start(0, 0)).result(); // the bundle loaded and the pollers up
      const held = await Promise.all(Array.from({ length: holders }, () => start(1, holdMs)));
      await new Promise((resolve) => setTimeout(resolve, PROBE_AFTER_MS));
      const startedAt = performance.now();
      await (await start(0, 0)).result();
      const waited = performance.now() - startedAt;
      await Promise.all(held.map((h) => h.result()));
      return waited;
    });
  } finally {
    await connection.close();
  }
}

async function main(): Promise<void> {
  const holders = Number(process.argv[2] ?? WORKFLOW_TASK_SLOTS_BESIDE_LOCAL - 1);
  const holdMs = Number(process.argv[3] ?? 5_000);
  installQuietRuntime(quietLogger);
  const server = await startDevServer();
  try {
    const rows: string[] = [];
    for (const [name, slots] of [
      ['the SDK default', WORKFLOW_TASK_SLOTS_BESIDE_LOCAL],
      ['MAX_CONCURRENT_WORKFLOW_TASKS', MAX_CONCURRENT_WORKFLOW_TASKS],
    ] as const) {
      for (const count of [0, holders]) {
        const waited = await probe(server.address, slots, count, holdMs);
        rows.push(`| ${name} (${slots}) | ${count} | ${waited.toFixed(0)} |`);
      }
    }
    process.stdout.write(
      `Workflow tasks held open by ${holdMs} ms local activities, and a workflow with nothing to do started ${PROBE_AFTER_MS} ms later:\n\n` +
        '| workflow-task slots | workflows in a local activity | the probe took (ms) |\n| --- | ---: | ---: |\n' +
        `${rows.join('\n')}\n`,
    );
  } finally {
    server.process.kill('SIGTERM');
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
