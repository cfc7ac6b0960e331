import {
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  log,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ExecuteToolResult } from '../activities/tools/execute';
import type { LlmStepResult } from '../activities/llm-step';
import {
  addUsage,
  approvalDecisionSignal,
  commentSignal,
  roundProgressSignal,
  ZERO_USAGE_TOTALS,
  type ApprovalDecision,
  type PendingApproval,
  type RoundOutcome,
  type RoundWorkflowInput,
  type TaskComment,
  type TaskPhase,
} from './contract';
import { CONTINUATION_PROMPT, finalCriticalReminderText, injectionsAfterToolIteration } from './rules/harness';
import { formatTokens } from './rules/format';

/** LLM calls: retried by Temporal (SDK retries are off); non-retryable provider errors stop at once. */
const llm = proxyActivities<Activities>({
  startToCloseTimeout: '20 minutes',
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '2 minutes', maximumAttempts: 8 },
});
/** Tools: the ledger makes retries safe (seed §3.7: 3 attempts, 500 ms base). */
const tools = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumAttempts: 3 },
});
const store = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 20 },
});

/**
 * One execution round of a task (seed D1's task harness): LLM step → tools, sequentially → LLM step …
 * until the agent calls task_submit_review. No iteration cap; reminders every 10 tool iterations, a
 * reflection checkpoint every 30, one final critical reminder when the model stops without submitting.
 * Risky tool calls wait for a human decision. The conversation lives in PostgreSQL; this history only
 * holds ids, counters and short previews, and the run continues as new when Temporal suggests it.
 */
export async function taskRoundWorkflow(input: RoundWorkflowInput): Promise<RoundOutcome> {
  const carry = input.carry;
  let turn = carry?.llmTurn ?? 0;
  let toolIterations = carry?.toolIterations ?? 0;
  let finalReminderSent = carry?.finalReminderSent ?? false;
  let usage = carry?.usage ?? ZERO_USAGE_TOTALS;
  let injections: string[] = carry?.pendingInjections ?? [];
  const comments: TaskComment[] = [...(carry?.comments ?? [])];
  const decisions = new Map<string, ApprovalDecision>((carry?.approvalDecisions ?? []).map((d) => [d.requestId, d]));
  const pending = new Map<string, PendingApproval>();
  let opening = carry ? undefined : { revisionFeedback: input.revisionFeedback };

  setHandler(approvalDecisionSignal, (d) => {
    if (!decisions.has(d.requestId)) decisions.set(d.requestId, d);
  });
  setHandler(commentSignal, (c) => void comments.push(c));

  const report = async (phase: TaskPhase): Promise<void> => {
    setCurrentDetails(`round ${input.round} · attempt ${input.attempt} · iteration ${toolIterations} · ${phase}`);
    try {
      await getExternalWorkflowHandle(input.parentWorkflowId).signal(roundProgressSignal, {
        round: input.round,
        iteration: toolIterations,
        phase,
        usage,
        pendingApprovals: [...pending.values()],
      });
    } catch (error) {
      log.warn('could not report progress to the task workflow', { error: String(error) });
    }
  };

  for (;;) {
    if (workflowInfo().continueAsNewSuggested) {
      await continueAsNew<typeof taskRoundWorkflow>({
        ...input,
        carry: {
          llmTurn: turn,
          toolIterations,
          finalReminderSent,
          usage,
          pendingInjections: [...injections, ...drainComments(comments)],
          comments: [],
          approvalDecisions: [...decisions.values()],
        },
      });
    }
    injections.push(...drainComments(comments));
    await report('thinking');
    const step: LlmStepResult = await llm.llmStep.executeWithOptions(
      { summary: `llm ${input.modelLabel} · round ${input.round} turn ${turn}` },
      [{ agentId: input.agentId, taskId: input.taskId, sessionId: input.sessionId, scenario: 'task', attempt: input.attempt, turn, opening, injections }],
    );
    const stepTurn = turn;
    turn += 1;
    opening = undefined;
    injections = [];
    usage = addUsage(usage, step.usage);
    setCurrentDetails(`llm ${step.model} · ${formatTokens(step.usage.inputTokens + step.usage.cacheReadTokens)} in / ${formatTokens(step.usage.outputTokens)} out`);

    if (step.toolCalls.length > 0) {
      let submission: string | undefined;
      for (const call of step.toolCalls) {
        const result = await runTool(call, stepTurn);
        if (result.kind === 'done' && result.submission !== undefined) submission = result.submission;
      }
      toolIterations += 1;
      if (submission !== undefined) {
        await report('awaiting-review');
        return { kind: 'submitted', summary: submission, usage, iterations: toolIterations };
      }
      injections.push(...injectionsAfterToolIteration(input.taskId, toolIterations));
      continue;
    }
    if (step.stopReason === 'max_tokens') {
      injections.push(CONTINUATION_PROMPT);
      continue;
    }
    if (!finalReminderSent) {
      finalReminderSent = true;
      injections.push(finalCriticalReminderText(input.taskId));
      continue;
    }
    return { kind: 'not-submitted', usage, iterations: toolIterations, lastText: step.textPreview };
  }

  async function runTool(call: { id: string; name: string; summary: string }, stepTurn: number): Promise<ExecuteToolResult> {
    await report('running-tool');
    const base = { agentId: input.agentId, taskId: input.taskId, sessionId: input.sessionId, attempt: input.attempt, turn: stepTurn, toolCallId: call.id, scenario: 'task' as const };
    let result = await tools.executeTool.executeWithOptions({ summary: call.summary }, [base]);
    if (result.kind !== 'approval-required') return result;

    const { requestId } = result;
    const { requestedAt } = await store.recordApprovalRequest({
      requestId,
      agentId: input.agentId,
      taskId: input.taskId,
      workflowId: input.parentWorkflowId,
      sessionId: input.sessionId,
      attempt: input.attempt,
      turn: stepTurn,
      toolCallId: call.id,
      tool: result.tool,
      summary: result.summary,
      reason: result.reason,
    });
    pending.set(requestId, { requestId, tool: result.tool, summary: result.summary, requestedAt });
    await report('awaiting-approval');
    const decided = await condition(() => decisions.has(requestId), input.approvalTimeoutMs);
    pending.delete(requestId);
    const decision = decisions.get(requestId);
    const outcome = decided && decision
      ? { requestId, decision: decision.decision, comment: decision.comment, decidedBy: decision.decidedBy }
      : { requestId, decision: 'timed_out' as const };
    await store.recordApprovalDecision({ requestId, taskId: input.taskId, status: outcome.decision, decidedBy: outcome.decidedBy, comment: outcome.comment });
    await report('running-tool');
    result = await tools.executeTool.executeWithOptions({ summary: `${call.summary} (${outcome.decision})` }, [{ ...base, approval: outcome }]);
    return result;
  }
}

function drainComments(comments: TaskComment[]): string[] {
  return comments.splice(0).map((c) => `[COMMENT${c.from ? ` from ${c.from}` : ''}] ${c.text}`);
}
