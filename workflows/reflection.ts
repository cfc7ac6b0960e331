import { proxyActivities, upsertSearchAttributes } from '@temporalio/workflow';
import { BACKGROUND_LLM, STORE } from './activity-options';
import type { Activities } from '../activities';
import {
  AgentIdSearchAttribute,
  systemSessionId,
  TaskIdSearchAttribute,
  type ReflectionWorkflowInput,
  type ReflectionWorkflowResult,
} from './contract';
import { REFLECTION_MAX_TOOL_ITERATIONS } from './rules/memory-limits';
import { runToolLoop } from './memory-tool-loop';

const store = proxyActivities<Activities>(STORE);

/**
 * Post-task reflection (seed D1 D1-11), workflow id `reflection-{taskId}`, started by the task workflow
 * when the task is accepted, with parent-close policy ABANDON so it completes after the task workflow
 * has finished. The agent sees the execution trace (rounds, duration, result summary, last 8 notes),
 * guidance for a revised or a first-time-accepted task, and the "5+ step procedure → skill" hint, and
 * saves insights with memory tools only. At most 5 reflections per agent per day (counted in
 * PostgreSQL); a sixth returns `rate-limited` without calling the LLM.
 */
export async function postTaskReflectionWorkflow(input: ReflectionWorkflowInput): Promise<ReflectionWorkflowResult> {
  const { taskId, agentId } = input;
  upsertSearchAttributes([
    { key: AgentIdSearchAttribute, value: agentId },
    { key: TaskIdSearchAttribute, value: taskId },
  ]);
  const sessionId = systemSessionId(agentId, `reflect_${taskId}`);
  const begin = await store.reflectionBegin({ taskId, agentId, sessionId });
  if (begin.status !== 'started') return { taskId, status: begin.status, toolIterations: 0 };

  const loop = await runToolLoop({
    agentId,
    sessionId,
    scenario: 'reflection',
    maxToolIterations: REFLECTION_MAX_TOOL_ITERATIONS,
    label: `reflection ${taskId}`,
    llmOptions: BACKGROUND_LLM,
  });
  await store.reflectionFinish({ taskId, toolIterations: loop.toolIterations });
  return { taskId, status: 'completed', toolIterations: loop.toolIterations };
}
