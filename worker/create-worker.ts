import { type NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import type { Kysely } from 'kysely';
import { createActivities } from '../activities';
import { webToolsConfig } from '../activities/tools/web/config';
import type { ChatRouter } from '../activities/llm/types';
import type { Database } from '../schema/database';
import type { Telemetry } from './telemetry';

/**
 * Cancellation reaches an activity with the response to its next heartbeat; a 1 s throttle keeps
 * "cancel stops the LLM stream / shell command" within seconds (the default throttle can be 30 s+).
 */
export const HEARTBEAT_THROTTLE = '1 second';

/**
 * Activity slots per worker. An LLM step spends nearly all its time waiting for the provider, so a slot
 * costs memory, not CPU: with the SDK's default of 100, 200 concurrent tasks queued half of their steps
 * behind the other half (the loop bench measured ~1 s schedule-to-start per iteration; 0.9 ms with 400).
 */
export const MAX_CONCURRENT_ACTIVITIES = 400;

export interface AgentWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  db: Kysely<Database>;
  router: ChatRouter;
  /** A pre-built workflow bundle (tests, production images); else workflows are bundled at start. */
  workflowBundle?: WorkerOptions['workflowBundle'];
  /** Extra worker options (tuning, interceptors). */
  overrides?: Partial<WorkerOptions>;
  /** Traces and metrics (worker/telemetry.ts); absent: off. A pre-built bundle must include its workflow interceptors. */
  telemetry?: Telemetry;
}

export async function createAgentWorker(options: AgentWorkerOptions): Promise<Worker> {
  // The web tools' environment settings: a bad value stops every kind of worker at start, not each agent's step.
  webToolsConfig();
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    ...(options.workflowBundle
      ? { workflowBundle: options.workflowBundle }
      : { workflowsPath: require.resolve('../workflows') }),
    activities: createActivities({
      db: options.db,
      router: options.telemetry ? options.telemetry.instrumentRouter(options.router) : options.router,
    }),
    ...options.telemetry?.workerOptions({ prebuiltBundle: options.workflowBundle !== undefined }),
    maxHeartbeatThrottleInterval: HEARTBEAT_THROTTLE,
    defaultHeartbeatThrottleInterval: HEARTBEAT_THROTTLE,
    shutdownGraceTime: '10 seconds',
    maxConcurrentActivityTaskExecutions: MAX_CONCURRENT_ACTIVITIES,
    // The task and mailbox bookkeeping runs as local activities: as many slots as regular ones.
    maxConcurrentLocalActivityExecutions: MAX_CONCURRENT_ACTIVITIES,
    ...options.overrides,
  });
}
