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

/** Workflow-task slots kept for everything but local activities: the SDK's own default. */
export const WORKFLOW_TASK_SLOTS_BESIDE_LOCAL = 40;

/**
 * Workflow-task slots per worker. A workflow task stays open, and keeps its slot, while its local
 * activities run (a round's local steps, the task row's writes, the agent's mailbox writes). With the
 * SDK's default of 40 and 39 workflows each in a 5 s local activity, a new workflow's first task waited
 * about 4.5 s for a slot (38 ms with none held); at 200 tasks the loop bench's workflow tasks waited
 * 1.0–1.1 s to start, and 0.44–0.57 s with these slots. So every local-activity slot may hold one and
 * the default number stay free for the rest (chats, approvals, heartbeats).
 */
export const MAX_CONCURRENT_WORKFLOW_TASKS = MAX_CONCURRENT_ACTIVITIES + WORKFLOW_TASK_SLOTS_BESIDE_LOCAL;

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
    maxConcurrentWorkflowTaskExecutions: MAX_CONCURRENT_WORKFLOW_TASKS,
    ...options.overrides,
  });
}
