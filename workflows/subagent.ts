import {
  ApplicationFailure,
  condition,
  getExternalWorkflowHandle,
  isCancellation,
  log,
  proxyActivities,
  setHandler,
} from '@temporalio/workflow';
import { STORE, SUBAGENT_LLM } from './activity-options';
import type { Activities } from '../activities';
import { ZERO_USAGE_TOTALS, type UsageTotals } from './contract';
import { runToolLoop } from './memory-tool-loop';
import { failureMessage } from './rules/failures';
import { SUBAGENT_RESULT_PREVIEW_CHARS, SUBAGENT_THINKING_PREVIEW_CHARS } from './rules/subagents';
import {
  budgetHoldSignal,
  budgetQuery,
  SUBAGENT_FAILED_TYPE,
  subagentSpendSignal,
  subagentWorkflowId,
  type SubagentWorkflowInput,
  type SubagentWorkflowResult,
} from './subagent-contract';
import { subagentOpeningText } from '../prompts/conversation';

const store = proxyActivities<Activities>(STORE);

/**
 * One sub-agent, a child workflow `{parentWorkflowId}-sub-{n}` of the task round that
 * called spawn_subagent(s): its own session, opened with the brief; the sub-agent tool set (files, the
 * shell, memory search: no spawning, no task submission); the task harness's LLM step and tool ledger
 * through the background tool loop, capped at `maxToolIterations`; LLM retries 1 + 2 from 2 s. A call
 * that would need a human approval is declined (nobody waits on a sub-agent). Returns the final
 * answer; a failure ends the workflow failed (SUBAGENT_FAILED_TYPE, with what it spent).
 *
 * Budget: with `budgetUsd` it reports its spend to the parent after every LLM call, and before every
 * call it holds when its cap is reached (telling the parent, which holds the whole tree) or when the
 * parent holds the tree; a human's decision on the task releases it with a new cap, or stops the tree
 * (the parent cancels this workflow). Cancelling the parent cancels this workflow and its in-flight
 * LLM call or shell command.
 */
export async function subagentWorkflow(input: SubagentWorkflowInput): Promise<SubagentWorkflowResult> {
  const self = subagentWorkflowId(input.parentWorkflowId, input.n);
  let limitUsd = input.budgetUsd ?? null;
  let held = false;
  let usage: UsageTotals = ZERO_USAGE_TOTALS;
  const parent = getExternalWorkflowHandle(input.parentWorkflowId);

  setHandler(budgetHoldSignal, (h) => {
    held = h.hold;
    if (typeof h.limitUsd === 'number') limitUsd = h.limitUsd;
  });
  setHandler(budgetQuery, () => ({
    limitUsd,
    spentUsd: usage.costUsd,
    held,
    nodes: [
      { workflowId: self, spentUsd: usage.costUsd, limitUsd, state: held ? ('held' as const) : ('running' as const) },
    ],
  }));

  const tellParent = async (reached: boolean): Promise<void> => {
    try {
      await parent.signal(subagentSpendSignal, { workflowId: self, spentUsd: usage.costUsd, reached });
    } catch (error) {
      log.warn('could not report spend to the parent', { error: String(error) });
    }
  };

  try {
    const loop = await runToolLoop({
      agentId: input.agentId,
      sessionId: input.sessionId,
      scenario: 'subagent',
      maxToolIterations: input.maxToolIterations,
      label: `sub-agent ${input.n}`,
      taskId: input.taskId,
      opening: [subagentOpeningText(input, { workflowId: input.parentWorkflowId, taskId: input.taskId })],
      llmOptions: SUBAGENT_LLM,
      beforeStep: async () => {
        if (limitUsd !== null && usage.costUsd >= limitUsd && !held) {
          held = true;
          await tellParent(true);
        }
        await condition(() => !held);
      },
      afterStep: async (u) => {
        usage = u;
        if (input.budgetUsd !== undefined) await tellParent(false);
      },
    });
    const result = await store.subagentReply({
      sessionId: input.sessionId,
      turn: loop.lastTurn,
      maxChars: loop.capped ? SUBAGENT_THINKING_PREVIEW_CHARS : SUBAGENT_RESULT_PREVIEW_CHARS,
    });
    return { result, iterations: loop.toolIterations, capped: loop.capped, usage: loop.usage };
  } catch (error) {
    if (isCancellation(error)) throw error;
    throw ApplicationFailure.create({
      type: SUBAGENT_FAILED_TYPE,
      message: failureMessage(error),
      nonRetryable: true,
      details: [{ usage }],
    });
  }
}
