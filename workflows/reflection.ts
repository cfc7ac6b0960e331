import { log, ParentClosePolicy, proxyActivities, startChild, upsertSearchAttributes } from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/common';
import { BACKGROUND_LLM, STORE } from './activity-options';
import type { Activities } from '../activities';
import {
  AgentIdSearchAttribute,
  reflectionWorkflowId,
  systemSessionId,
  TaskIdSearchAttribute,
  type ReflectionWorkflowInput,
  type ReflectionWorkflowResult,
} from './contract';
import { REFLECTION_MAX_TOOL_ITERATIONS } from './rules/memory-limits';
import { runToolLoop } from './memory-tool-loop';
import { inheritedOrgAttribute } from './org-attribute';

const store = proxyActivities<Activities>(STORE);

/**
 * Post-task reflection, workflow id `reflection-{taskId}`, started by the task workflow
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

/**
 * Starts the post-task reflection of an accepted task: it outlives the task workflow (parent-close
 * policy ABANDON); only its start is awaited. Already started (a retried accept, a rerun) is fine; any
 * other failure is logged, never a reason to undo the accepted task.
 */
export async function startPostTaskReflection(taskId: string, agentId: string): Promise<void> {
  try {
    await startChild(postTaskReflectionWorkflow, {
      workflowId: reflectionWorkflowId(taskId),
      args: [{ taskId, agentId }],
      parentClosePolicy: ParentClosePolicy.ABANDON,
      // One reflection per task, even if the task is reopened and accepted again.
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      typedSearchAttributes: [
        { key: AgentIdSearchAttribute, value: agentId },
        { key: TaskIdSearchAttribute, value: taskId },
        ...inheritedOrgAttribute(),
      ],
      staticSummary: `reflection on task ${taskId}`,
    });
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return;
    log.warn('could not start the post-task reflection', { error: String(error) });
  }
}
