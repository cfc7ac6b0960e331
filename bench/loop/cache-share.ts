/**
 * Cacheable input share per scenario, from the request bodies our real prompt assembly sends: the
 * product's fused step runs in process (no Temporal: the prompt does not depend on it) with a paced
 * clock, 12 s per call as a real model answers, starting 20 s into a minute so that the minute turns
 * several times. The recorded bodies go through the Anthropic prefix-cache model (cache-model.ts).
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import type { ChatRouter } from '../../activities/llm/types';
import { createActivities } from '../../activities';
import { upsertAgent } from '../../activities/store/agents';
import { runStepWithTools } from '../../activities/step/with-tools';
import { injectionsAfterToolIteration } from '../../workflows/rules/harness';
import { modelPrefixCache, type CacheFigures } from './cache-model';
import { insertBenchTask, offersTools, type ScriptedTasks } from './scenario';

/** A realistic pace: the measurement had the model answer after 12 s. */
const PACE_MS = 12_000;
/** The task: 13 calls (12 file writes, then the submission). */
const TASK_CALLS = 13;
/** A heartbeat that looks around before it answers: 5 memory searches, then HEARTBEAT_OK. */
const HEARTBEAT_CALLS = 6;
/** 20 s into a minute: 13 calls at 12 s cross three minute boundaries. */
const CLOCK_START = Date.parse('2026-11-30T10:00:20Z');

export async function runCacheShare(
  db: Kysely<Database>,
  router: ChatRouter,
  scripts: ScriptedTasks,
  workspace: string,
): Promise<string[]> {
  const agentId = `bench-cache-${randomUUID().slice(0, 8)}`;
  const workspaceDir = path.join(workspace, agentId);
  mkdirSync(workspaceDir, { recursive: true });
  await upsertAgent(db, {
    id: agentId,
    name: 'Bench cache agent',
    files: {
      soul: 'You are careful and concise.',
      agents: 'You complete tasks with tools and report what you did.',
      heartbeat: '- check tasks\n- look at recent memory',
      tools: 'Use the file tools for files.',
    },
    config: {},
    workspaceDir,
  });
  let now = CLOCK_START;
  const clock = () => new Date(now);

  // Task: the round's loop, as the workflow drives it (opening, harness injections), one call per tick.
  const taskId = randomUUID();
  await insertBenchTask(db, { id: taskId, agentId });
  scripts.add(taskId, { calls: TASK_CALLS, answerMs: 0 });
  const sessionId = `bench_cache_${taskId}`;
  let injections: string[] = [];
  for (let turn = 0, iterations = 0; turn < TASK_CALLS; turn += 1) {
    const step = await runStepWithTools(
      db,
      router,
      {
        agentId,
        taskId,
        sessionId,
        scenario: 'task',
        attempt: 1,
        turn,
        ...(turn === 0 ? { opening: {} } : {}),
        injections,
      },
      clock,
    );
    now += PACE_MS;
    if (step.toolResults.some((r) => r.result.submission !== undefined)) break;
    iterations += 1;
    injections = injectionsAfterToolIteration(taskId, iterations);
  }
  const task = modelPrefixCache(scripts.requestsOf(taskId).map((r) => r.body));

  // Heartbeat: the check-in prompt, then the small tool loop.
  let heartbeatCalls = 0;
  scripts.other = (request) => {
    if (!offersTools(request))
      return { kind: 'message', content: [{ type: 'text', text: 'ok' }], stopReason: 'end_turn' };
    heartbeatCalls += 1;
    return heartbeatCalls < HEARTBEAT_CALLS
      ? {
          kind: 'message',
          content: [{ type: 'tool_use', name: 'memory_search', input: { query: `topic ${heartbeatCalls}` } }],
          stopReason: 'tool_use',
        }
      : { kind: 'message', content: [{ type: 'text', text: 'HEARTBEAT_OK' }], stopReason: 'end_turn' };
  };
  const heartbeatSession = `bench_heartbeat_${agentId}`;
  const activities = createActivities({ db, router });
  await activities.heartbeatPrepare({ agentId, sessionId: heartbeatSession });
  const recordedFrom = scripts.recorded().length;
  for (let turn = 0; turn < HEARTBEAT_CALLS; turn += 1) {
    const step = await runStepWithTools(
      db,
      router,
      { agentId, sessionId: heartbeatSession, scenario: 'heartbeat', attempt: 1, turn },
      clock,
    );
    now += PACE_MS;
    if (step.toolCalls.length === 0) break;
  }
  scripts.other = undefined;
  const heartbeat = modelPrefixCache(
    scripts
      .recorded()
      .slice(recordedFrom)
      .filter(offersTools)
      .map((r) => r.body),
  );

  const row = (name: string, f: CacheFigures) =>
    `| ${name} | ${f.calls} | ${(f.cachedShareAfterFirst * 100).toFixed(1)} % | ${f.misses} |`;
  return [
    `Cacheable input share: our real request bodies, Anthropic's prefix caching modelled (breakpoints, ${20}-block look-back), a clock paced at ${PACE_MS / 1_000} s per call starting 20 s into a minute. Share of input tokens a cache read serves, calls 2..n.`,
    '',
    '| scenario | calls | cacheable share from the 2nd call | calls that missed the previous prefix |',
    '| --- | ---: | ---: | ---: |',
    row('task (file writes, then submit)', task),
    row('heartbeat (memory searches, then HEARTBEAT_OK)', heartbeat),
  ];
}
