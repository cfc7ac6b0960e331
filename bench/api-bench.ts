/**
 * HTTP API throughput (issue 13): requests per second for `GET /v1/tasks/:id` (the live `status`
 * query through Temporal) and for `POST /v1/tasks` (row + workflow start), and Server-Sent Events
 * fan-out: how long until 100 clients following one task all see a new event.
 *
 * Needs TEMPORAL_ADDRESS and DATABASE_URL (a real PostgreSQL); without them it reports that it did not
 * run. Client and server share this process and the machine's cores, so the figures are a floor.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { createProvider } from '../activities/llm/providers';
import { LlmRouter } from '../activities/llm/router';
import { openDatabase } from '../activities/store/db';
import { buildApi, type ApiServer } from '../api/server';
import { createToken, revokeToken } from '../api/tokens';
import { AgentsClient } from '../client';
import { createAgentWorker } from '../worker/create-worker';

/** Requests per measurement and how many are in flight at once. */
const STATUS_REQUESTS = 2_000;
const STATUS_CONCURRENCY = 20;
const START_REQUESTS = 200;
const START_CONCURRENCY = 10;
/** SSE: followers of one task, and events written while they follow. */
const SSE_CLIENTS = 100;
const SSE_EVENTS = 20;
/** The rate limit is not what is measured. */
const UNLIMITED_RATE = 1_000_000;

export async function runApiBench(): Promise<string[]> {
  const address = process.env.TEMPORAL_ADDRESS;
  const url = process.env.DATABASE_URL;
  if (!address || !url) {
    return [
      '## HTTP API',
      '',
      'Not run: set TEMPORAL_ADDRESS and DATABASE_URL (a PostgreSQL server) to measure the API.',
      '',
    ];
  }
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const database = await openDatabase({ url, poolSize: 10 });
  const connection = await Connection.connect({ address });
  const temporal = new Client({ connection });
  const nativeConnection = await NativeConnection.connect({ address });
  const busyQueue = `bench-api-${randomUUID()}`;
  // Starts go to a queue nobody polls: the measurement is the API and the start, not the agent's work.
  const idleQueue = `bench-api-idle-${randomUUID()}`;
  const worker = await createAgentWorker({
    connection: nativeConnection,
    namespace: 'default',
    taskQueue: busyQueue,
    db: database.db,
    router: LlmRouter.fromConfig([{ name: 'demo', kind: 'demo' }], createProvider),
  });
  const running = worker.run();
  const apis: ApiServer[] = [];
  const tokenName = `bench-${randomUUID().slice(0, 8)}`;
  const started: string[] = [];
  try {
    const { token } = await createToken(database.db, tokenName, 'operator');
    const listen = async (client: AgentsClient) => {
      const app = await buildApi({
        client,
        db: database.db,
        databaseUrl: url,
        workspaceRoot: '/tmp/bench-api-workspaces',
        rateLimitPerMinute: UNLIMITED_RATE,
      });
      apis.push(app);
      await app.listen({ host: '127.0.0.1', port: 0 });
      return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    };
    const busy = await listen(new AgentsClient(temporal, database.db, { taskQueue: busyQueue }));
    const idle = await listen(new AgentsClient(temporal, database.db, { taskQueue: idleQueue }));
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const agentId = `bench-${randomUUID().slice(0, 8)}`;
    await fetch(`${busy}/v1/agents/${agentId}`, {
      method: 'PUT',
      headers,
      body: JSON.stringify({
        name: 'Bench',
        files: { soul: 'You are quick.', agents: 'Do the task.', heartbeat: '', tools: '' },
      }),
    });

    // A task that reaches review on the demo model: its status query is answered by the worker.
    const first = (await (
      await fetch(`${busy}/v1/tasks`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ agentId, title: 'Plan a page' }),
      })
    ).json()) as { taskId: string };
    started.push(first.taskId);
    await waitForState(busy, headers, first.taskId, 'review');
    const status = await measure(STATUS_REQUESTS, STATUS_CONCURRENCY, async () => {
      const response = await fetch(`${busy}/v1/tasks/${first.taskId}`, { headers });
      if (response.status !== 200) throw new Error(`GET status answered ${response.status}`);
      await response.arrayBuffer();
    });
    const starts = await measure(START_REQUESTS, START_CONCURRENCY, async () => {
      const response = await fetch(`${idle}/v1/tasks`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ agentId, title: 'Bench start' }),
      });
      if (response.status !== 201) throw new Error(`POST /v1/tasks answered ${response.status}`);
      started.push(((await response.json()) as { taskId: string }).taskId);
    });
    const fanout = await sseFanout(busy, token, first.taskId, database.db);

    return [
      '## HTTP API',
      '',
      `Fastify 5, one API process; client in the same process. Temporal dev server and PostgreSQL on this machine.`,
      '',
      '| measurement | requests | concurrency | requests/s | p50 ms | p99 ms |',
      '| --- | ---: | ---: | ---: | ---: | ---: |',
      `| GET /v1/tasks/:id (status query) | ${STATUS_REQUESTS} | ${STATUS_CONCURRENCY} | ${status.perSecond.toFixed(0)} | ${status.p50.toFixed(1)} | ${status.p99.toFixed(1)} |`,
      `| POST /v1/tasks (row + workflow start) | ${START_REQUESTS} | ${START_CONCURRENCY} | ${starts.perSecond.toFixed(0)} | ${starts.p50.toFixed(1)} | ${starts.p99.toFixed(1)} |`,
      '',
      `SSE fan-out: ${SSE_CLIENTS} clients following one task; ${SSE_EVENTS} events written to PostgreSQL one after another. Time from the write's commit until a client has the event: p50 ${fanout.p50.toFixed(0)} ms, p99 ${fanout.p99.toFixed(0)} ms, max ${fanout.max.toFixed(0)} ms (poll interval 200 ms); ${fanout.delivered} of ${SSE_CLIENTS * SSE_EVENTS} deliveries, ${fanout.duplicates} duplicates, ${fanout.gaps} gaps.`,
      '',
    ];
  } finally {
    for (const app of apis) {
      await app.closeStreams();
      await app.close();
    }
    await Promise.allSettled(
      started.map((id) => temporal.workflow.getHandle(`task-${id}`).terminate('benchmark cleanup')),
    );
    await revokeToken(database.db, tokenName);
    worker.shutdown();
    await running;
    await nativeConnection.close();
    await connection.close();
    await database.close();
  }
}

async function waitForState(
  base: string,
  headers: Record<string, string>,
  taskId: string,
  state: string,
): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const body = (await (await fetch(`${base}/v1/tasks/${taskId}`, { headers })).json()) as { state?: string };
    if (body.state === state) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`task ${taskId} did not reach ${state}`);
}

async function measure(
  total: number,
  concurrency: number,
  request: () => Promise<void>,
): Promise<{ perSecond: number; p50: number; p99: number }> {
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        next += 1;
        const t = performance.now();
        await request();
        latencies.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1_000;
  latencies.sort((a, b) => a - b);
  return {
    perSecond: total / seconds,
    p50: latencies[Math.floor(latencies.length / 2)]!,
    p99: latencies[Math.floor(latencies.length * 0.99)]!,
  };
}

async function sseFanout(
  base: string,
  token: string,
  taskId: string,
  db: Awaited<ReturnType<typeof openDatabase>>['db'],
) {
  const events = await db
    .selectFrom('task_events')
    .select((eb) => eb.fn.max('seq').as('max'))
    .where('task_id', '=', taskId)
    .executeTakeFirstOrThrow();
  const startSeq = Number(events.max ?? 0);
  const writtenAt = new Map<number, number>();
  const latencies: number[] = [];
  let duplicates = 0;
  let gaps = 0;
  const controllers: AbortController[] = [];
  const connected: Array<Promise<void>> = [];
  const done: Array<Promise<void>> = [];
  for (let c = 0; c < SSE_CLIENTS; c++) {
    const controller = new AbortController();
    controllers.push(controller);
    let ready!: () => void;
    connected.push(new Promise((r) => (ready = r)));
    done.push(
      (async () => {
        const response = await fetch(`${base}/v1/tasks/${taskId}/events`, {
          headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', 'last-event-id': String(startSeq) },
          signal: controller.signal,
        });
        ready();
        let buffer = '';
        let last = startSeq;
        const decoder = new TextDecoder();
        try {
          for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
            buffer += decoder.decode(chunk, { stream: true });
            for (const match of buffer.matchAll(/^id: (\d+)$/gm)) {
              const seq = Number(match[1]);
              if (seq <= last) duplicates += 1;
              else if (seq !== last + 1) gaps += 1;
              last = Math.max(last, seq);
              latencies.push(performance.now() - (writtenAt.get(seq) ?? performance.now()));
            }
            buffer = buffer.slice(buffer.lastIndexOf('\n\n') + 2);
            if (last >= startSeq + SSE_EVENTS) return;
          }
        } catch {
          // aborted at the end
        }
      })(),
    );
  }
  await Promise.all(connected);
  await new Promise((r) => setTimeout(r, 500));
  for (let i = 1; i <= SSE_EVENTS; i++) {
    await db
      .insertInto('task_events')
      .values({ task_id: taskId, type: 'bench-probe', data: JSON.stringify({ i }), idem_key: null })
      .execute();
    writtenAt.set(startSeq + i, performance.now());
    await new Promise((r) => setTimeout(r, 50));
  }
  await Promise.race([Promise.all(done), new Promise((r) => setTimeout(r, 10_000))]);
  for (const c of controllers) c.abort();
  latencies.sort((a, b) => a - b);
  return {
    p50: latencies[Math.floor(latencies.length / 2)] ?? NaN,
    p99: latencies[Math.floor(latencies.length * 0.99)] ?? NaN,
    max: latencies.at(-1) ?? NaN,
    delivered: latencies.length,
    duplicates,
    gaps,
  };
}
