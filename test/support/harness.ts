import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { Logger } from '@temporalio/common';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { LlmRouter } from '../../activities/llm/router';
import { createProvider } from '../../activities/llm/providers';
import type { ProviderConfig } from '../../activities/llm/types';
import { openDatabase, type DatabaseHandle } from '../../activities/store/db';
import { AgentsClient } from '../../client';
import type { TaskStatus } from '../../workflows/contract';
import { createAgentWorker } from '../../worker/create-worker';
import { startFakeLlmServer, type FakeLlmServer } from '../fake-llm';
import { eventually } from './eventually';
import { installQuietRuntime } from './quiet-runtime';
import { tracingClientInterceptors } from '../../client/tracing';

export interface Harness {
  db: DatabaseHandle;
  llm: FakeLlmServer;
  client: AgentsClient;
  temporal: Client;
  taskQueue: string;
  workspaceDir: string;
  /** Starts (another) worker on the harness's task queue; stopped by `close`. */
  startWorker(providers?: ProviderConfig[]): Promise<Worker>;
  /** Creates an agent with the given provider config; returns its id. */
  createAgent(config?: Record<string, unknown>): Promise<string>;
  waitForStatus(taskId: string, predicate: (s: TaskStatus) => boolean, timeoutMs?: number): Promise<TaskStatus>;
  close(): Promise<void>;
}

/**
 * Everything an integration test needs, all real: the Temporal dev server, PostgreSQL (a server or the embedded one),
 * the fake LLM HTTP server, the real provider SDKs, and a worker on a task queue unique to the test.
 */
export interface HarnessOptions {
  provider?: 'anthropic' | 'openai';
  databaseUrl?: string;
  temporalAddress?: string;
  runtimeLogger?: Logger;
}

export async function createHarness(options: HarnessOptions = {}): Promise<Harness> {
  // A test that inspects the logs passes the worker's own logger; it applies to this test file.
  installQuietRuntime(options.runtimeLogger);
  const address = options.temporalAddress ?? process.env.TEMPORAL_ADDRESS!;
  const db = await openDatabase({ url: options.databaseUrl ?? process.env.DATABASE_URL, poolSize: 5 });
  const llm = await startFakeLlmServer();
  const connection = await Connection.connect({ address });
  // The same tracing interceptor as the product's clients: a no-op unless a test registers a tracer.
  const temporal = new Client({ connection, interceptors: tracingClientInterceptors() });
  const nativeConnection = await NativeConnection.connect({ address });
  const taskQueue = `test-${randomUUID()}`;
  const client = new AgentsClient(temporal, db.db, { taskQueue });
  const workspaceDir = mkdtempSync(path.join(os.tmpdir(), 'da-ws-'));
  const workers: Array<{ worker: Worker; running: Promise<void> }> = [];
  const defaultProviders = (): ProviderConfig[] =>
    options.provider === 'openai'
      ? [{ name: 'openai', kind: 'openai', apiKey: 'test-key', baseURL: `${llm.url}/v1` }]
      : [{ name: 'anthropic', kind: 'anthropic', apiKey: 'test-key', baseURL: llm.url }];

  const harness: Harness = {
    db,
    llm,
    client,
    temporal,
    taskQueue,
    workspaceDir,
    async startWorker(providers = defaultProviders()) {
      const router = LlmRouter.fromConfig(providers, createProvider);
      const worker = await createAgentWorker({
        connection: nativeConnection,
        namespace: 'default',
        taskQueue,
        db: db.db,
        router,
        workflowBundle: { codePath: process.env.TEST_WORKFLOW_BUNDLE! },
      });
      const running = worker.run();
      workers.push({ worker, running });
      return worker;
    },
    async createAgent(config = {}) {
      const id = `agent-${randomUUID().slice(0, 8)}`;
      await client.upsertAgent({
        id,
        name: `Test agent ${id}`,
        files: {
          soul: 'You are careful and concise.',
          agents: 'You complete tasks with tools.',
          heartbeat: '- check tasks',
          tools: 'Use file tools.',
        },
        config,
        workspaceDir,
      });
      return id;
    },
    async waitForStatus(taskId, predicate, timeoutMs = 30_000) {
      let last: TaskStatus | undefined;
      // A query before the workflow's first task fails; eventually() retries it.
      return eventually(
        async () => {
          last = await client.getStatus(taskId);
          return predicate(last) ? last : undefined;
        },
        `task ${taskId}`,
        timeoutMs,
      ).catch((error: unknown) => {
        throw new Error(`${(error as Error).message}; last status ${JSON.stringify(last)}`);
      });
    },
    async close() {
      for (const { worker } of workers) if (worker.getState() === 'RUNNING') worker.shutdown();
      await Promise.allSettled(workers.map((w) => w.running));
      await nativeConnection.close();
      await connection.close();
      await llm.close();
      await db.close();
      rmSync(workspaceDir, { recursive: true, force: true });
    },
  };
  return harness;
}

export interface UseHarnessOptions extends HarnessOptions {
  /** Start a worker on the harness's task queue before the file's tests. */
  worker?: boolean;
  /** Runs first in the file's `afterAll`, while the harness is still open (terminate workflows, close an API). */
  beforeClose?: () => Promise<void>;
}

/**
 * The set-up most integration test files share, in one line: a harness created before the file's tests
 * (with a worker when `worker` is set) and closed after them. The returned object stands for the harness
 * once the `beforeAll` has run; reading it before throws. Jest runs a file's `afterAll` hooks in the order
 * they are declared, so clean-up that needs the open harness goes in `beforeClose`, not in a later
 * `afterAll`.
 */
export function useHarness(options: UseHarnessOptions = {}): Harness {
  const { worker, beforeClose, ...harnessOptions } = options;
  let harness: Harness | undefined;
  beforeAll(async () => {
    harness = await createHarness(harnessOptions);
    if (worker) await harness.startWorker();
  });
  afterAll(async () => {
    if (!harness) return;
    try {
      await beforeClose?.();
    } finally {
      await harness.close();
    }
  });
  return lateBound(() => harness, 'the harness of useHarness()');
}

/** An object that stands for a value a `beforeAll` creates later; methods stay bound to it. */
export function lateBound<T extends object>(current: () => T | undefined, what: string): T {
  return new Proxy({} as T, {
    get(_target, key) {
      const value = current();
      if (value === undefined) throw new Error(`${what} was used before its beforeAll ran`);
      const member: unknown = Reflect.get(value, key, value);
      return typeof member === 'function' ? (member as (...args: unknown[]) => unknown).bind(value) : member;
    },
  });
}

/** A scripted assistant turn calling one tool. */
export function toolTurn(name: string, input: unknown, text = `calling ${name}`) {
  return {
    kind: 'message' as const,
    content: [
      { type: 'text' as const, text },
      { type: 'tool_use' as const, name, input },
    ],
    stopReason: 'tool_use' as const,
    usage: { inputTokens: 100, outputTokens: 20, cacheReadTokens: 50, cacheWriteTokens: 10 },
  };
}

export function textTurn(text: string, stopReason: 'end_turn' | 'max_tokens' = 'end_turn') {
  return {
    kind: 'message' as const,
    content: [{ type: 'text' as const, text }],
    stopReason,
    usage: { inputTokens: 100, outputTokens: 20 },
  };
}

export const submitTurn = (summary = 'done') => toolTurn('task_submit_review', { summary });
