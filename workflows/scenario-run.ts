import { CancellationScope, proxyActivities, proxyLocalActivities, setCurrentDetails, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { LlmStepResult } from '../activities/llm-step';
import type { ChatRunInput, ChatRunResult } from './agent-contract';
import { CONTINUATION_PROMPT } from './rules/harness';
import { LOOP_WARNING_TEXT, recordToolCall, type ToolCallSignature } from './rules/loop-detector';

/** Seed: the chat scenario's safety cap on tool iterations (DEFAULT_MAX_TOOL_ITERATIONS). */
export const CHAT_MAX_TOOL_ITERATIONS = 200;
/** Chat is interactive: a provider outage fails the reply within minutes rather than hours. */
const llm = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 6 },
});
const tools = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumAttempts: 3 },
});
/** Opening the turn and the end marker: short writes on the chat's critical path, so local activities. */
const store = proxyLocalActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '10 seconds', maximumAttempts: 10 },
});

/** Chat has no approver at hand: a risky call is refused with a way forward instead of waiting. */
const CHAT_APPROVAL_REFUSAL = 'Risky actions need a human approval, which chat cannot ask for: create a task for this work instead, or tell the human what you would run.';

/**
 * One chat reply (seed D1 human-chat scenario), a child of the agent workflow, id
 * `agent-{agentId}-chat-{itemId}`: the human's message joins the channel's session, then LLM step →
 * tools → LLM step … until the model answers without tools, at most 200 tool iterations, with the
 * loop detector warning and then stopping a model that repeats itself. The text streams to the run
 * stream named by this workflow's id, which ends with an `end` event whatever happens (answer, cap,
 * loop, failure or cancellation), so a follower always stops.
 */
export async function chatRunWorkflow(input: ChatRunInput): Promise<ChatRunResult> {
  const streamId = workflowInfo().workflowId;
  let result: ChatRunResult | undefined;
  let failure: string | undefined;
  try {
    result = await converse();
    return result;
  } catch (error) {
    failure = error instanceof Error ? error.message : String(error);
    throw error;
  } finally {
    await CancellationScope.nonCancellable(() =>
      store.publishStreamEvent({ streamId, agentId: input.agentId, kind: 'end', data: { itemId: input.itemId, ...(result ?? {}), ...(failure ? { error: failure } : {}) } }),
    );
  }

  async function converse(): Promise<ChatRunResult> {
    const { turnNumber } = await store.beginChatTurn({ agentId: input.agentId, sessionId: input.sessionId, itemId: input.itemId, text: input.text, from: input.from });
    const history: ToolCallSignature[] = [];
    let injections: string[] = [];
    let iterations = 0;
    for (let turn = 0; ; turn++) {
      setCurrentDetails(`chat ${input.channel} · turn ${turn} · ${iterations} tool iteration(s)`);
      const step: LlmStepResult = await llm.llmStep.executeWithOptions({ summary: `chat reply · turn ${turn}` }, [
        { agentId: input.agentId, sessionId: input.sessionId, scenario: 'chat', attempt: turnNumber, turn, injections },
      ]);
      injections = [];
      if (step.toolCalls.length === 0) {
        if (step.stopReason === 'max_tokens') {
          injections.push(CONTINUATION_PROMPT);
          continue;
        }
        return { iterations, stoppedBy: 'answer', textPreview: step.textPreview };
      }
      if (iterations >= CHAT_MAX_TOOL_ITERATIONS) return { iterations, stoppedBy: 'iteration-cap', textPreview: step.textPreview };
      let stop = false;
      for (const call of step.toolCalls) {
        const base = { agentId: input.agentId, sessionId: input.sessionId, attempt: turnNumber, turn, toolCallId: call.id, scenario: 'chat' as const };
        let outcome = await tools.executeTool.executeWithOptions({ summary: call.summary }, [base]);
        if (outcome.kind === 'approval-required') {
          outcome = await tools.executeTool.executeWithOptions({ summary: `${call.summary} (refused in chat)` }, [
            { ...base, approval: { requestId: outcome.requestId, decision: 'rejected', comment: CHAT_APPROVAL_REFUSAL, decidedBy: 'chat' } },
          ]);
        }
        const verdict = recordToolCall(history, { tool: call.name, args: call.summary, ...(outcome.kind === 'done' ? { result: outcome.preview } : {}) });
        if (verdict.level === 'critical') stop = true;
        else if (verdict.level === 'warning' && !injections.includes(LOOP_WARNING_TEXT)) injections.push(LOOP_WARNING_TEXT);
      }
      iterations += 1;
      if (stop) return { iterations, stoppedBy: 'loop-detector', textPreview: step.textPreview };
    }
  }
}
