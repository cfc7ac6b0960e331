/**
 * Conversation benchmark (not a test): chat time-to-first-delta and per-delta overhead against the
 * fake provider's own stream, and the stream store's write-to-follower latency. Needs a Temporal
 * server (TEMPORAL_ADDRESS) and PostgreSQL (DATABASE_URL); without them it prints why it skipped.
 *
 *   TEMPORAL_ADDRESS=127.0.0.1:7233 DATABASE_URL=postgres://… npx tsx bench/index.ts
 */
import { randomUUID } from 'node:crypto';
import Anthropic from '@anthropic-ai/sdk';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { createProvider } from '../activities/llm/providers';
import { LlmRouter } from '../activities/llm/router';
import { openDatabase } from '../activities/store/db';
import { StepStreamPublisher } from '../activities/streams/publisher';
import { AgentsClient } from '../client';
import { ConversationClient } from '../client/chat';
import { tailStream } from '../client/streams';
import { agentWorkflowId } from '../workflows/agent-contract';
import { createAgentWorker } from '../worker/create-worker';
import { startFakeLlmServer } from '../test/fake-llm';

/** Chats measured (after one warm-up). */
const CHATS = 10;
/** Streamed chunks per answer (12 characters each) and the fake's delay between them. */
const ANSWER_CHUNKS = 40;
const CHUNK_DELAY_MS = 10;
/** Deltas written for the store latency measurement. */
const STORE_DELTAS = 500;

const ANSWER = 'x'.repeat(12 * ANSWER_CHUNKS);

export async function runStreamBench(): Promise<string[]> {
  if (!process.env.TEMPORAL_ADDRESS || !process.env.DATABASE_URL) {
    return [
      '## Chat streams',
      '',
      'Skipped: set TEMPORAL_ADDRESS and DATABASE_URL (a Temporal server and PostgreSQL) to run it.',
      '',
    ];
  }
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const db = await openDatabase({ url: process.env.DATABASE_URL, poolSize: 5 });
  const llm = await startFakeLlmServer({
    responder: () => ({
      kind: 'message',
      content: [{ type: 'text', text: ANSWER }],
      stopReason: 'end_turn',
      chunkDelayMs: CHUNK_DELAY_MS,
    }),
  });
  const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS });
  const nativeConnection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS });
  const taskQueue = `bench-${randomUUID()}`;
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('../workflows'),
    logger: new DefaultLogger('ERROR'),
  });
  const worker = await createAgentWorker({
    connection: nativeConnection,
    namespace: 'default',
    taskQueue,
    db: db.db,
    router: LlmRouter.fromConfig(
      [{ name: 'anthropic', kind: 'anthropic', apiKey: 'bench', baseURL: llm.url }],
      createProvider,
    ),
    workflowBundle: { code },
  });
  const running = worker.run();
  const temporal = new Client({ connection });
  const agents = new AgentsClient(temporal, db.db, { taskQueue });
  const conv = new ConversationClient(agents, { connectionString: db.url });
  const agentId = `bench-${randomUUID().slice(0, 8)}`;
  try {
    await agents.upsertAgent({
      id: agentId,
      name: 'bench',
      files: { soul: 'Brief.', agents: 'Answer.', heartbeat: '-', tools: '-' },
      config: {},
      workspaceDir: '/tmp',
    });

    // The fake's own stream through the SDK: the floor.
    const sdk = new Anthropic({ apiKey: 'bench', baseURL: llm.url, maxRetries: 0 });
    const direct: Array<{ firstMs: number; totalMs: number }> = [];
    for (let i = 0; i <= CHATS; i++) {
      const t0 = performance.now();
      let first = 0;
      const stream = sdk.messages.stream({
        model: 'bench-model',
        max_tokens: 100,
        messages: [{ role: 'user', content: 'hi' }],
      });
      stream.on('text', () => (first ||= performance.now() - t0));
      await stream.finalMessage();
      if (i > 0) direct.push({ firstMs: first, totalMs: performance.now() - t0 });
    }

    const chats: Array<{ firstMs: number; totalMs: number; deltas: number; deliveredMs: number }> = [];
    for (let i = 0; i <= CHATS; i++) {
      const t0 = performance.now();
      let first = 0;
      let deltas = 0;
      const { itemId } = await conv.deliver(agentId, {
        kind: 'chat',
        from: { type: 'human', id: 'bench' },
        text: `message ${i}`,
      });
      const deliveredMs = performance.now() - t0;
      for await (const e of conv.follow(agentId, itemId)) {
        if (e.type === 'delta') {
          first ||= performance.now() - t0;
          deltas += 1;
        }
      }
      if (i > 0) chats.push({ firstMs: first, totalMs: performance.now() - t0, deltas, deliveredMs });
    }

    // Store: write deltas one by one, as fast as the publisher lets them out, and time the follower.
    const streamId = `bench-${randomUUID()}`;
    const sentAt = new Map<number, number>();
    const latencies: number[] = [];
    const follower = (async () => {
      for await (const e of tailStream({ db: db.db, connectionString: db.url }, streamId, {
        until: (ev) => ev.kind === 'step-end',
      })) {
        if (e.kind === 'delta') latencies.push(performance.now() - (sentAt.get(Number(e.text)) ?? performance.now()));
      }
    })();
    const publisher = new StepStreamPublisher(db.db, { streamId }, 'bench/step', 1, {});
    const storeStarted = performance.now();
    for (let i = 0; i < STORE_DELTAS; i++) {
      sentAt.set(i, performance.now());
      publisher.push(String(i));
      await publisher.flush(); // one row per delta: the worst case
    }
    await publisher.finish({});
    const storeMs = performance.now() - storeStarted;
    await follower;

    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const p95 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.95)]!;
    const directFirst = med(direct.map((d) => d.firstMs));
    const directTotal = med(direct.map((d) => d.totalMs));
    const chatFirst = med(chats.map((c) => c.firstMs));
    const chatTotal = med(chats.map((c) => c.totalMs));
    const deltasSeen = med(chats.map((c) => c.deltas));
    return [
      '## Chat streams (Temporal + PostgreSQL + fake provider)',
      '',
      `${CHATS} chats after a warm-up; each answer is ${ANSWER_CHUNKS} chunks of 12 characters, ${CHUNK_DELAY_MS} ms apart. Medians.`,
      '',
      '| measure | fake provider via SDK | `chat()` through the agent workflow | overhead |',
      '| --- | --- | --- | --- |',
      `| time to first delta | ${directFirst.toFixed(1)} ms | ${chatFirst.toFixed(1)} ms | +${(chatFirst - directFirst).toFixed(1)} ms |`,
      `| whole answer | ${directTotal.toFixed(1)} ms | ${chatTotal.toFixed(1)} ms | +${(chatTotal - directTotal).toFixed(1)} ms |`,
      `| of which \`deliver\` (update, item stored) | | ${med(chats.map((c) => c.deliveredMs)).toFixed(1)} ms | |`,
      `| deltas delivered | ${ANSWER_CHUNKS} | ${deltasSeen} (batched every 50 ms) | |`,
      '',
      `Stream store, one row per delta (worst case): ${STORE_DELTAS} deltas in ${storeMs.toFixed(0)} ms (${(storeMs / STORE_DELTAS).toFixed(2)} ms per delta written); write-to-follower latency median ${med(latencies).toFixed(1)} ms, p95 ${p95(latencies).toFixed(1)} ms.`,
      '',
    ];
  } finally {
    await temporal.workflow
      .getHandle(agentWorkflowId(agentId))
      .terminate('bench finished')
      .catch(() => undefined);
    worker.shutdown();
    await running;
    await nativeConnection.close();
    await connection.close();
    await llm.close();
    await db.close();
  }
}
