import { log, proxyActivities, setCurrentDetails, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { HEARTBEAT_LLM, STORE } from './activity-options';
import type { Activities } from '../activities';
import {
  AgentIdSearchAttribute,
  heartbeatSessionId,
  type HeartbeatOutcome,
  type HeartbeatWorkflowInput,
  type HeartbeatWorkflowResult,
} from './contract';
import { HEARTBEAT_MAX_TOOL_ITERATIONS } from './rules/harness';
import { idleSkipDecision, isHeartbeatOk } from './rules/heartbeat-rules';
import { runToolLoop } from './memory-tool-loop';

const store = proxyActivities<Activities>(STORE);

/**
 * One heartbeat check-in of an agent, started by the agent's Temporal Schedule
 * `heartbeat-{agentId}` (overlap: skip). When nothing it watches changed since the last heartbeat, the
 * LLM call is skipped, at most 3 times in a row. Otherwise the agent gets the `[HEARTBEAT CHECK-IN]`
 * prompt and the heartbeat tool whitelist for at most 30 tool iterations; a `HEARTBEAT_OK` reply ends
 * the run with nothing done. The LLM call is retried 3 times with exponential backoff from 3 s; a run
 * that still fails is recorded so the next tick patrols again.
 */
export async function heartbeatWorkflow(input: HeartbeatWorkflowInput): Promise<HeartbeatWorkflowResult> {
  const { agentId } = input;
  const { workflowId, startTime } = workflowInfo();
  upsertSearchAttributes([{ key: AgentIdSearchAttribute, value: agentId }]);

  const { fingerprint, previous } = await store.heartbeatBegin({ agentId });
  const decision = input.force ? { skip: false, skippedInRow: 0 } : idleSkipDecision(previous, fingerprint);
  if (decision.skip) {
    setCurrentDetails(`idle: skipped (${decision.skippedInRow} in a row)`);
    await store.heartbeatRecord({
      agentId,
      workflowId,
      outcome: 'skipped',
      fingerprint,
      skippedInRow: decision.skippedInRow,
      toolIterations: 0,
    });
    return { agentId, outcome: 'skipped', toolIterations: 0, skippedInRow: decision.skippedInRow };
  }

  const sessionId = heartbeatSessionId(agentId, startTime.getTime());
  await store.heartbeatPrepare({ agentId, sessionId });
  let loop;
  try {
    loop = await runToolLoop({
      agentId,
      sessionId,
      scenario: 'heartbeat',
      maxToolIterations: HEARTBEAT_MAX_TOOL_ITERATIONS,
      label: `heartbeat ${agentId}`,
      llmOptions: HEARTBEAT_LLM,
    });
  } catch (error) {
    log.warn('heartbeat failed after its retries', { agentId, error: String(error) });
    await store.heartbeatRecord({
      agentId,
      workflowId,
      outcome: 'failed',
      fingerprint,
      skippedInRow: 0,
      toolIterations: 0,
      sessionId,
    });
    throw error;
  }
  const outcome: HeartbeatOutcome = loop.capped
    ? 'iteration-cap'
    : loop.toolIterations === 0 && isHeartbeatOk(loop.lastText)
      ? 'ok'
      : 'acted';
  setCurrentDetails(`${outcome} · ${loop.toolIterations} tool iterations`);
  await store.heartbeatRecord({
    agentId,
    workflowId,
    outcome,
    fingerprint,
    skippedInRow: 0,
    toolIterations: loop.toolIterations,
    sessionId,
    lastTurn: loop.lastTurn,
  });
  return { agentId, outcome, toolIterations: loop.toolIterations, skippedInRow: 0, sessionId };
}
