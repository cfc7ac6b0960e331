import {
  CancellationScope,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  workflowInfo,
} from '@temporalio/workflow';
import { CHAT_LLM, MAILBOX_STORE_LOCAL, RUN_TOOL } from './activity-options';
import type { Activities } from '../activities';
import type { LlmStepResult } from '../activities/step/types';
import type { ChatRunInput, ChatRunResult } from './agent-contract';
import { CONVERSATION_MAX_TOOL_ITERATIONS } from './rules/conversation';
import { CONVERSATION_APPROVAL_REFUSAL } from '../prompts/conversation';
import { CONTINUATION_PROMPT, LOOP_WARNING_TEXT } from '../prompts/task';
import { recordToolCall, type ToolCallSignature } from './rules/loop-detector';
import { uiSummary } from './rules/call-lines';

const llm = proxyActivities<Activities>(CHAT_LLM);
const tools = proxyActivities<Activities>(RUN_TOOL);
const store = proxyLocalActivities<Activities>(MAILBOX_STORE_LOCAL);

/**
 * One conversation reply, a child of the agent workflow, id `agent-{agentId}-chat-{itemId}`, in the
 * item's scenario (chat, a2a, comment_response or group_chat: its prompt section and tool set; a run
 * started before scenarios existed answers as chat): the message joins the channel's session, then LLM
 * step → tools → LLM step … until the model answers without tools, at most the scenario's cap of tool
 * iterations (200), with the loop detector warning and then stopping a model that repeats itself. A
 * risky call is refused (no approver waits in a conversation). The text streams to the run
 * stream named by this workflow's id, which ends with an `end` event whatever happens (answer, cap,
 * loop, failure or cancellation), so a follower always stops.
 */
export async function chatRunWorkflow(input: ChatRunInput): Promise<ChatRunResult> {
  const streamId = workflowInfo().workflowId;
  const scenario = input.scenario ?? 'chat';
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
      store.publishStreamEvent({
        streamId,
        agentId: input.agentId,
        kind: 'end',
        data: { itemId: input.itemId, ...(result ?? {}), ...(failure ? { error: failure } : {}) },
      }),
    );
  }

  async function converse(): Promise<ChatRunResult> {
    const { turnNumber } = await store.beginChatTurn({
      agentId: input.agentId,
      sessionId: input.sessionId,
      itemId: input.itemId,
      text: input.text,
      from: input.from,
    });
    const history: ToolCallSignature[] = [];
    let injections: string[] = [];
    let iterations = 0;
    for (let turn = 0; ; turn++) {
      setCurrentDetails(`${scenario} ${input.channel} · turn ${turn} · ${iterations} tool iteration(s)`);
      const step: LlmStepResult = await llm.llmStep.executeWithOptions(
        { summary: `${scenario} reply · turn ${turn}` },
        [
          {
            agentId: input.agentId,
            sessionId: input.sessionId,
            scenario,
            attempt: turnNumber,
            turn,
            injections,
            sender: input.from,
          },
        ],
      );
      injections = [];
      if (step.toolCalls.length === 0) {
        if (step.stopReason === 'max_tokens') {
          injections.push(CONTINUATION_PROMPT);
          continue;
        }
        return { iterations, stoppedBy: 'answer', textPreview: step.textPreview };
      }
      if (iterations >= CONVERSATION_MAX_TOOL_ITERATIONS[scenario])
        return { iterations, stoppedBy: 'iteration-cap', textPreview: step.textPreview };
      let stop = false;
      for (const call of step.toolCalls) {
        const base = {
          agentId: input.agentId,
          sessionId: input.sessionId,
          attempt: turnNumber,
          turn,
          toolCallId: call.id,
          scenario,
        };
        let outcome = await tools.executeTool.executeWithOptions({ summary: uiSummary(call.summary) }, [base]);
        if (outcome.kind === 'approval-required') {
          outcome = await tools.executeTool.executeWithOptions(
            { summary: uiSummary(`${call.summary} (refused in ${scenario})`) },
            [
              {
                ...base,
                approval: {
                  requestId: outcome.requestId,
                  decision: 'rejected',
                  comment: CONVERSATION_APPROVAL_REFUSAL[scenario],
                  decidedBy: scenario,
                },
              },
            ],
          );
        }
        const verdict = recordToolCall(history, {
          tool: call.name,
          args: call.summary,
          ...(outcome.kind === 'done' ? { result: outcome.preview } : {}),
        });
        if (verdict.level === 'critical') stop = true;
        else if (verdict.level === 'warning' && !injections.includes(LOOP_WARNING_TEXT))
          injections.push(LOOP_WARNING_TEXT);
      }
      iterations += 1;
      if (stop) return { iterations, stoppedBy: 'loop-detector', textPreview: step.textPreview };
    }
  }
}
