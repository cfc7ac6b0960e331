/**
 * Mailbox throughput benchmark (not a test): deliveries per second through the `deliver` update
 * (update-with-start, item stored in PostgreSQL, triaged by the workflow) into one agent and spread
 * over 100 agents. Items are notifications, which run no LLM, so the figure is the mailbox path alone.
 * Needs TEMPORAL_ADDRESS and DATABASE_URL; without them it prints why it skipped.
 */
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { createProvider } from '../activities/llm/providers';
import { LlmRouter } from '../activities/llm/router';
import { openDatabase } from '../activities/store/db';
import { AgentsClient } from '../client';
import { ConversationClient } from '../client/chat';
import { agentWorkflowId } from '../workflows/agent-contract';
import { createAgentWorker } from '../worker/create-worker';

/** Deliveries measured per scenario: enough for a stable rate, short enough for a two-core machine. */
const DELIVERIES = 300;
/**
 * Deliveries in flight at once. Into one agent: 8, under Temporal's default limit of 10 in-flight
 * updates per workflow (`history.maxInFlightUpdates`; above it the server answers RESOURCE_EXHAUSTED).
 * Into many agents: 20 (a busy service's callers).
 */
const CONCURRENCY_ONE = 8;
const CONCURRENCY_MANY = 20;
/** Agents in the fan-out scenario. */
const MANY_AGENTS = 100;

export async function runMailboxBench(): Promise<string[]> {
  if (!process.env.TEMPORAL_ADDRESS || !process.env.DATABASE_URL) {
    return [
      '## Mailbox throughput',
      '',
      'Skipped: set TEMPORAL_ADDRESS and DATABASE_URL (a Temporal server and PostgreSQL) to run it.',
      '',
    ];
  }
  try {
    Runtime.install({ logger: new DefaultLogger('ERROR') });
  } catch {
    // Already installed by an earlier section of this run (the stream bench).
  }
  const db = await openDatabase({ url: process.env.DATABASE_URL, poolSize: 10 });
  const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS });
  const nativeConnection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS });
  const taskQueue = `bench-mailbox-${randomUUID()}`;
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('../workflows'),
    logger: new DefaultLogger('ERROR'),
  });
  const worker = await createAgentWorker({
    connection: nativeConnection,
    namespace: 'default',
    taskQueue,
    db: db.db,
    // No LLM call happens (notifications only); the router is required by the worker.
    router: LlmRouter.fromConfig(
      [{ name: 'anthropic', kind: 'anthropic', apiKey: 'bench', baseURL: 'http://127.0.0.1:9' }],
      createProvider,
    ),
    workflowBundle: { code },
  });
  const running = worker.run();
  const temporal = new Client({ connection });
  const agents = new AgentsClient(temporal, db.db, { taskQueue });
  const conv = new ConversationClient(agents, { connectionString: db.url });
  const prefix = `bench-mb-${randomUUID().slice(0, 6)}`;
  const ids = Array.from({ length: MANY_AGENTS }, (_, i) => `${prefix}-${i}`);
  try {
    for (const id of ids)
      await agents.upsertAgent({
        id,
        name: id,
        files: { soul: 'Brief.', agents: '-', heartbeat: '-', tools: '-' },
        config: {},
        workspaceDir: '/tmp',
      });

    const run = async (
      target: (i: number) => string,
      concurrency: number,
    ): Promise<{ seconds: number; latencies: number[]; concurrency: number }> => {
      const latencies: number[] = [];
      let next = 0;
      const started = performance.now();
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          for (let i = next++; i < DELIVERIES; i = next++) {
            const t0 = performance.now();
            await conv.deliver(target(i), {
              kind: 'notification',
              from: { type: 'system', id: 'bench' },
              text: `event ${i}`,
            });
            latencies.push(performance.now() - t0);
          }
        }),
      );
      return { seconds: (performance.now() - started) / 1_000, latencies, concurrency };
    };
    await conv.deliver(ids[0]!, { kind: 'notification', from: { type: 'system', id: 'bench' }, text: 'warm-up' });
    const one = await run(() => ids[0]!, CONCURRENCY_ONE);
    const many = await run((i) => ids[i % MANY_AGENTS]!, CONCURRENCY_MANY);

    const pct = (xs: number[], p: number) =>
      [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
    const row = (label: string, r: { seconds: number; latencies: number[]; concurrency: number }) =>
      `| ${label} | ${DELIVERIES} | ${r.concurrency} | ${r.seconds.toFixed(2)} s | ${(DELIVERIES / r.seconds).toFixed(1)} | ${pct(r.latencies, 0.5).toFixed(1)} ms | ${pct(r.latencies, 0.95).toFixed(1)} ms |`;
    return [
      '## Mailbox throughput (Temporal + PostgreSQL)',
      '',
      `\`deliver\` (update-with-start; stored, then triaged) of notification items (no LLM run). One agent: ${CONCURRENCY_ONE} in flight (Temporal allows 10 in-flight updates per workflow). Into ${MANY_AGENTS} agents, the first delivery to each starts its workflow.`,
      '',
      '| target | deliveries | in flight | time | deliveries/s | median latency | p95 latency |',
      '| --- | --- | --- | --- | --- | --- | --- |',
      row('one agent', one),
      row(`${MANY_AGENTS} agents`, many),
      '',
    ];
  } finally {
    for (const id of ids)
      await temporal.workflow
        .getHandle(agentWorkflowId(id))
        .terminate('bench finished')
        .catch(() => undefined);
    worker.shutdown();
    await running;
    await nativeConnection.close();
    await connection.close();
    await db.close();
  }
}
