import type { WorkerOptions } from '@temporalio/worker';

/**
 * Worker options the bench can vary (environment, for A/B runs); empty means the product's defaults.
 * BENCH_MAX_CACHED_WORKFLOWS, BENCH_WFT_POLLERS, BENCH_ACTIVITY_POLLERS, BENCH_MAX_ACTIVITIES, BENCH_MAX_WFTS,
 * BENCH_DB_POOL (the worker's PostgreSQL pool).
 */
export function workerTuning(env: NodeJS.ProcessEnv): Partial<WorkerOptions> {
  const out: Partial<WorkerOptions> = {};
  if (env.BENCH_MAX_CACHED_WORKFLOWS) out.maxCachedWorkflows = Number(env.BENCH_MAX_CACHED_WORKFLOWS);
  if (env.BENCH_WFT_POLLERS)
    out.workflowTaskPollerBehavior = { type: 'simple-maximum', maximum: Number(env.BENCH_WFT_POLLERS) };
  if (env.BENCH_ACTIVITY_POLLERS)
    out.activityTaskPollerBehavior = { type: 'simple-maximum', maximum: Number(env.BENCH_ACTIVITY_POLLERS) };
  if (env.BENCH_MAX_ACTIVITIES) out.maxConcurrentActivityTaskExecutions = Number(env.BENCH_MAX_ACTIVITIES);
  if (env.BENCH_MAX_WFTS) out.maxConcurrentWorkflowTaskExecutions = Number(env.BENCH_MAX_WFTS);
  return out;
}
