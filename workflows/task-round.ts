import {
  allHandlersFinished,
  CancellationScope,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  isCancellation,
  log,
  deprecatePatch,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import { FUSED_STEP, FUSED_STEP_LOCAL, TASK_STORE, TASK_TOOL } from './activity-options';
import type { Activities } from '../activities';
import type { ApprovalOutcome, ExecuteToolResult } from '../activities/tools/execute';
import type { DeferredToolCall, StepWithToolsResult } from '../activities/step/with-tools';
import type { LlmStepInput } from '../activities/step/types';
import {
  addUsage,
  approvalDecisionSignal,
  commentSignal,
  roundProgressQuery,
  roundProgressSignal,
  type RoundProgress,
  roundWorkflowId,
  runViewerPath,
  ZERO_USAGE_TOTALS,
  type ApprovalDecision,
  type PendingApproval,
  type RoundOutcome,
  type RoundWorkflowInput,
  type TaskComment,
  type TaskPhase,
} from './contract';
import {
  APPROVAL_POLICY_WAIT_PATCH,
  BASELINE_0_9_0_PATCH,
  FUSED_STEP_PATCH,
  LOCAL_STEP_BOUNDS_5S_PATCH,
  LOCAL_STEP_PATCH,
  NO_START_REPORT_PATCH,
  ROUND_LAST_CALLS_PATCH,
  SUBAGENTS_SETTLE_BEFORE_CANCEL_PATCH,
} from './patches';
import {
  FIRST_STEP_PLACEMENT,
  isRoundStop,
  LOCAL_STEP_BOUNDS,
  LOCAL_STEP_BOUNDS_0_8_0,
  nextStepPlacement,
  ROUND_STOP_GRACE_MS,
  roundStopKey,
  type StepPlacement,
} from './rules/step-placement';
import {
  injectionsAfterToolIteration,
  phaseReportDue,
  ROUND_MAX_HISTORY_EVENTS_PER_RUN,
  shouldContinueAsNew,
} from './rules/harness';
import { roundDetailsMarkdown, uiSummary } from './rules/call-lines';
import { RoundCalls } from './round-calls';
import { createSubagentSpawner } from './subagent-spawner';
import { waitUnderPolicy, type ApprovalInboxItem } from './approval-wait';
import { approvalDelegationSignal } from './approval-contract';
import { expiredResultText } from './rules/approval-wait-rules';
import { CONTINUATION_PROMPT, finalCriticalReminderText, roundCommentText } from '../prompts/task';

const tools = proxyActivities<Activities>(TASK_TOOL);
const fused = proxyActivities<Activities>(FUSED_STEP);
const fusedLocal = proxyLocalActivities<Activities>(FUSED_STEP_LOCAL);
const store = proxyActivities<Activities>(TASK_STORE);

/**
 * One execution round of a task (the task harness): LLM step → tools, sequentially → LLM step …
 * until the agent calls task_submit_review. No iteration cap; reminders every 10 tool iterations, a
 * reflection checkpoint every 30, one final critical reminder when the model stops without submitting.
 * Risky tool calls wait for a human decision (signal `approvalDecision`, forwarded by the task
 * workflow) for `approvalTimeoutMs`. The conversation lives in PostgreSQL; this history only holds
 * ids, counters and short previews, and the run continues as new when Temporal suggests it or when it
 * reaches ROUND_MAX_HISTORY_EVENTS_PER_RUN events, carrying counters and not-yet-used signals.
 *
 * Cancelled (task cancelled or paused): the in-flight activity is cancelled, which stops an LLM stream
 * or a shell command within seconds; the run ends cancelled and the task workflow records the state.
 */
export async function taskRoundWorkflow(input: RoundWorkflowInput): Promise<RoundOutcome> {
  const carry = input.carry;
  let turn = carry?.llmTurn ?? 0;
  let toolIterations = carry?.toolIterations ?? 0;
  let finalReminderSent = carry?.finalReminderSent ?? false;
  let usage = carry?.usage ?? ZERO_USAGE_TOTALS;
  let injections: string[] = carry?.pendingInjections ?? [];
  const comments: TaskComment[] = [...(carry?.comments ?? input.comments ?? [])];
  const decisions = new Map<string, ApprovalDecision>((carry?.approvalDecisions ?? []).map((d) => [d.requestId, d]));
  const pending = new Map<string, PendingApproval>();
  let opening = carry ? undefined : { revisionFeedback: input.revisionFeedback };
  let lastReportedIteration: number | undefined;
  // Asked first: a run started by 0.9.0 or later takes every earlier patch without asking it ('The
  // release baseline' in patches.ts).
  const baseline = patched(BASELINE_0_9_0_PATCH);
  // Every round in the support window runs the fused step; runs before the baseline still write its
  // marker first, so the histories that carry it replay unchanged (see FUSED_STEP_PATCH in patches.ts).
  if (!baseline) deprecatePatch(FUSED_STEP_PATCH);
  // A fresh round tells its task workflow nothing at start (see NO_START_REPORT_PATCH).
  if (!carry && (baseline || patched(NO_START_REPORT_PATCH))) lastReportedIteration = toolIterations;
  // Quick steps after quick ones run as local activities (see LOCAL_STEP_PATCH, rules/step-placement.ts).
  const localSteps = baseline || patched(LOCAL_STEP_PATCH);
  // A run with local steps asks its later patches here, in its first workflow task ('Up-front patches'
  // in patches.ts).
  const upFront = baseline
    ? { approvalPolicyWait: true, settleBeforeCancel: true }
    : localSteps
      ? {
          approvalPolicyWait: patched(APPROVAL_POLICY_WAIT_PATCH),
          settleBeforeCancel: patched(SUBAGENTS_SETTLE_BEFORE_CANCEL_PATCH),
        }
      : undefined;
  // Asked up front too; runs of 0.8.0 and 0.9.0 keep their 1 s bounds.
  const stepBounds = localSteps && patched(LOCAL_STEP_BOUNDS_5S_PATCH) ? LOCAL_STEP_BOUNDS : LOCAL_STEP_BOUNDS_0_8_0;
  // Asked up front too: a run ends with a line for its last step's calls (see ROUND_LAST_CALLS_PATCH).
  const calls = new RoundCalls(patched(ROUND_LAST_CALLS_PATCH));
  let placement: StepPlacement = FIRST_STEP_PLACEMENT;
  /** Local steps since the last regular one: their markers are not in `historyLength` until their workflow task completes. */
  let unseenMarkers = 0;

  /** Requests waiting under a policy, and what reached them (each decision counts, not only the first). */
  const policyInboxes = new Map<string, ApprovalInboxItem[]>();
  /** Set when an expired request's policy blocks the task: the round ends after the current calls. */
  let blockedReason: string | undefined;
  setHandler(approvalDecisionSignal, (d) => {
    const inbox = policyInboxes.get(d.requestId);
    if (inbox) return void inbox.push({ kind: 'decision', decision: d });
    if (!decisions.has(d.requestId)) decisions.set(d.requestId, d);
  });
  setHandler(
    approvalDelegationSignal,
    (d) => void policyInboxes.get(d.requestId)?.push({ kind: 'delegation', delegation: d }),
  );
  setHandler(commentSignal, (c) => void comments.push(c));

  // Sub-agents and the tree's cost governor; without a budget and without spawn calls it adds no command.
  const spawner = createSubagentSpawner({
    workflowId: roundWorkflowId(input.taskId, input.round),
    agentId: input.agentId,
    taskId: input.taskId,
    limitUsd: input.budgetUsd ?? null,
    spentBeforeUsd: input.budgetSpentBeforeUsd ?? 0,
    carry: carry?.subagents,
    onHeldChange: (held) => report(held ? 'awaiting-budget' : spawner.spawning() ? 'running-tool' : 'thinking', true),
    settleBeforeCancel: upFront?.settleBeforeCancel,
  });

  let phase: TaskPhase = 'thinking';
  /** The round's current details in the Temporal UI: progress, the newest calls, the run viewer. */
  const details = (now: TaskPhase, note?: string): void => {
    phase = now;
    setCurrentDetails(
      roundDetailsMarkdown({
        round: input.round,
        attempt: input.attempt,
        iteration: toolIterations,
        phase: now,
        usage,
        note,
        recent: calls.recent,
        runViewer: runViewerPath(input.taskId),
      }),
    );
  };
  const progress = (): RoundProgress => ({
    round: input.round,
    iteration: toolIterations,
    phase,
    usage,
    pendingApprovals: [...pending.values()],
    ...(spawner.accounting() ? { budget: spawner.report() } : {}),
  });
  setHandler(roundProgressQuery, progress);

  /** Tells the task workflow what this round is doing (throttled: each report is history in both workflows). */
  const report = async (now: TaskPhase, force = false): Promise<void> => {
    details(now);
    if (!phaseReportDue(lastReportedIteration, force)) return;
    lastReportedIteration = toolIterations;
    try {
      await getExternalWorkflowHandle(input.parentWorkflowId).signal(roundProgressSignal, progress());
    } catch (error) {
      log.warn('could not report progress to the task workflow', { error: String(error) });
    }
  };

  try {
    const outcome = await harnessLoop();
    await calls.showLast();
    return outcome;
  } catch (error) {
    // Paused or cancelled: comments that never reached the model go back to the task workflow, which
    // keeps them for the next attempt (after a pause) instead of losing them with this run.
    if (isCancellation(error) && comments.length > 0) {
      await CancellationScope.nonCancellable(async () => {
        const parent = getExternalWorkflowHandle(input.parentWorkflowId);
        for (const comment of comments.splice(0)) {
          await parent
            .signal(commentSignal, comment)
            .catch((e: unknown) =>
              log.warn('could not hand a comment back to the task workflow', { error: String(e) }),
            );
        }
      });
    }
    throw error;
  }

  async function harnessLoop(): Promise<RoundOutcome> {
    for (;;) {
      const { continueAsNewSuggested, historyLength } = workflowInfo();
      const history = { continueAsNewSuggested, historyLength: historyLength + unseenMarkers };
      if (shouldContinueAsNew(history, ROUND_MAX_HISTORY_EVENTS_PER_RUN)) {
        // Signal handlers are synchronous, but wait anyway so that nothing received is lost.
        await condition(allHandlersFinished);
        await calls.showLast();
        log.info('round continues as new', {
          round: input.round,
          turn,
          toolIterations,
          historyLength: history.historyLength,
        });
        await continueAsNew<typeof taskRoundWorkflow>({
          ...input,
          carry: {
            llmTurn: turn,
            toolIterations,
            finalReminderSent,
            usage,
            pendingInjections: [...injections, ...drainComments(comments)],
            comments: [],
            // Nothing is pending at the top of the loop, and the task workflow forwards decisions only
            // for pending requests: every decision received so far has been used.
            approvalDecisions: [],
            ...(spawner.accounting() ? { subagents: spawner.carry() } : {}),
          },
        });
      }
      await report('thinking');
      await spawner.beforeLlmCall();
      injections.push(...drainComments(comments));
      const stepInput = {
        agentId: input.agentId,
        taskId: input.taskId,
        sessionId: input.sessionId,
        scenario: 'task' as const,
        attempt: input.attempt,
        turn,
        opening,
        injections,
      };
      const local = localSteps && placement.kind === 'local';
      const step = await runStep(stepInput, local);
      unseenMarkers = local ? unseenMarkers + 1 : 0;
      const stepTurn = turn;
      calls.addStep(stepTurn, step);
      placement = nextStepPlacement(placement, step.elapsedMs, stepBounds);
      turn += 1;
      opening = undefined;
      injections = [];
      usage = addUsage(usage, step.usage);
      spawner.addOwnSpend(step.usage.costUsd);
      details('thinking');

      if (step.toolCalls.length > 0) {
        let submission: string | undefined;
        // The fused step already ran the calls that needed nobody, in order, up to the first that needs a human.
        const ran = step.toolResults;
        for (const { result } of ran) if (result.submission !== undefined) submission = result.submission;
        if (ran.length > 0) details('running-tool');
        // Sequentially, in the model's order (task execution runs tools one by one).
        const toRun: DeferredToolCall[] = step.deferred;
        for (const call of toRun) {
          const result = await runTool(call, stepTurn, call.approval ?? call.inWorkflow);
          calls.addTool(stepTurn, call.summary, result);
          if (result.kind === 'done' && result.submission !== undefined) submission = result.submission;
          if (blockedReason) break;
        }
        toolIterations += 1;
        if (blockedReason) {
          details('finished', 'blocked');
          return { kind: 'blocked', reason: blockedReason, usage, iterations: toolIterations, ...undelivered() };
        }
        if (submission !== undefined) {
          if (spawner.accounting()) await report('awaiting-review', true); // the final spend per node
          details('awaiting-review');
          return { kind: 'submitted', summary: submission, usage, iterations: toolIterations, ...undelivered() };
        }
        injections.push(...injectionsAfterToolIteration(input.taskId, toolIterations));
        continue;
      }
      if (step.stopReason === 'max_tokens') {
        injections.push(CONTINUATION_PROMPT);
        continue;
      }
      if (comments.length > 0) continue; // a human spoke while the model was answering: let it reply
      if (!finalReminderSent) {
        finalReminderSent = true;
        injections.push(finalCriticalReminderText(input.taskId));
        continue;
      }
      if (spawner.accounting()) await report('finished', true);
      details('finished');
      return { kind: 'not-submitted', usage, iterations: toolIterations, lastText: step.textPreview, ...undelivered() };
    }
  }

  /**
   * The fused step, as a regular or a local activity. A local step stopped by its round's recorded
   * stop request waits here for the cancellation that follows it; if none comes within
   * ROUND_STOP_GRACE_MS, the step runs again as a regular activity.
   */
  async function runStep(stepInput: LlmStepInput, local: boolean): Promise<StepWithToolsResult> {
    // The label, then the calls of the step before (rules/call-lines.ts): the UI names every call.
    const label = `llm ${input.modelLabel} + tools · round ${input.round} turn ${stepInput.turn}`;
    const summary = calls.stepSummary(label);
    if (local) {
      try {
        return await fusedLocal.llmStepWithTools.executeWithOptions(
          { ...FUSED_STEP_LOCAL, summary: calls.stepSummary(`${label} · local`) },
          [{ ...stepInput, stopKey: roundStopKey(input.round, input.attempt) }],
        );
      } catch (error) {
        if (!isRoundStop(error)) throw error;
        await condition(() => false, ROUND_STOP_GRACE_MS); // a cancellation ends the wait with CancelledFailure
        log.warn('the round was asked to stop but no cancellation came; running the step again', {
          round: input.round,
          turn: stepInput.turn,
        });
      }
    }
    return fused.llmStepWithTools.executeWithOptions({ summary }, [stepInput]);
  }

  /** Runs one call as its own activity; `known`: the fused step already found that it needs approval. */
  async function runTool(
    call: { id: string; name: string; summary: string },
    stepTurn: number,
    known?: ExecuteToolResult,
  ): Promise<ExecuteToolResult> {
    await report('running-tool');
    const base = {
      agentId: input.agentId,
      taskId: input.taskId,
      sessionId: input.sessionId,
      attempt: input.attempt,
      turn: stepTurn,
      toolCallId: call.id,
      scenario: 'task' as const,
    };
    // The call's summary comes from the model: defused and bounded for the Temporal UI (uiSummary).
    const first = known ?? (await tools.executeTool.executeWithOptions({ summary: uiSummary(call.summary) }, [base]));
    if (first.kind === 'run-in-workflow') {
      // Sub-agents: child workflows; their aggregated result is recorded through the ledger like any result.
      const spawned = await spawner.run(first);
      usage = addUsage(usage, spawned.usage);
      const recorded = await tools.executeTool.executeWithOptions({ summary: uiSummary(`${call.summary} (result)`) }, [
        { ...base, workflowResult: { content: spawned.content, isError: spawned.isError } },
      ]);
      if (spawned.stopped) throw spawner.stoppedFailure();
      await report('running-tool', true); // the status shows each sub-agent's spend
      return recorded;
    }
    if (first.kind !== 'approval-required') return first;

    const { requestId } = first;
    if (upFront?.approvalPolicyWait ?? patched(APPROVAL_POLICY_WAIT_PATCH))
      return awaitApproval(first, call, stepTurn, base);
    const { requestedAt } = await store.recordApprovalRequest(approvalRequestInput(first, call.id, stepTurn));
    pending.set(requestId, { requestId, tool: first.tool, summary: first.summary, requestedAt });
    await report('awaiting-approval', true);
    const decided = await condition(() => decisions.has(requestId), input.approvalTimeoutMs);
    pending.delete(requestId);
    const decision = decisions.get(requestId);
    const outcome =
      decided && decision
        ? { requestId, decision: decision.decision, comment: decision.comment, decidedBy: decision.decidedBy }
        : { requestId, decision: 'timed_out' as const };
    await store.recordApprovalDecision({
      requestId,
      taskId: input.taskId,
      status: outcome.decision,
      decidedBy: outcome.decidedBy,
      comment: outcome.comment,
    });
    await report('running-tool', true);
    return tools.executeTool.executeWithOptions({ summary: uiSummary(`${call.summary} (${outcome.decision})`) }, [
      { ...base, approval: outcome },
    ]);
  }

  /** What an approval request records: the call, where it was asked, and why. */
  function approvalRequestInput(
    first: Extract<ExecuteToolResult, { kind: 'approval-required' }>,
    toolCallId: string,
    turn: number,
  ) {
    const { requestId, tool, summary, reason } = first;
    return {
      requestId,
      agentId: input.agentId,
      taskId: input.taskId,
      workflowId: input.parentWorkflowId,
      sessionId: input.sessionId,
      attempt: input.attempt,
      turn,
      toolCallId,
      tool,
      summary,
      reason,
    };
  }

  /**
   * Opens the request and waits for it: under a policy (reminders, escalation, quorum, delegation,
   * expiry) when one applies, else for one decision until `approvalTimeoutMs` as before.
   */
  async function awaitApproval(
    first: Extract<ExecuteToolResult, { kind: 'approval-required' }>,
    call: { id: string; summary: string },
    stepTurn: number,
    base: Parameters<typeof tools.executeTool>[0],
  ): Promise<ExecuteToolResult> {
    const { requestId } = first;
    const opened = await store.openApprovalRequest.executeWithOptions(
      { summary: uiSummary(`approval requested: ${call.summary}`) },
      [approvalRequestInput(first, call.id, stepTurn)],
    );
    const request = { requestId, tool: first.tool, summary: first.summary, requestedAt: opened.requestedAt };
    let outcome: ApprovalOutcome;
    if (opened.policy) {
      policyInboxes.set(requestId, []);
      const final = await waitUnderPolicy({
        requestId,
        agentId: input.agentId,
        taskId: input.taskId,
        summary: first.summary,
        policy: opened.policy,
        requestedAtMs: Date.parse(opened.requestedAt),
        creator: opened.creator,
        inbox: policyInboxes.get(requestId)!,
        onChange: async (wait) => {
          pending.set(requestId, { ...request, wait });
          await report('awaiting-approval', true);
        },
      });
      policyInboxes.delete(requestId);
      pending.delete(requestId);
      const votes = final.outcome === 'rejected' ? final.rejections : final.approvals;
      outcome =
        final.outcome === 'expired'
          ? { requestId, decision: 'expired', explanation: expiredResultText(first.summary, final) }
          : {
              requestId,
              decision: final.outcome === 'rejected' ? 'rejected' : 'approved',
              decidedBy: votes.map((v) => v.by).join(' and '),
              ...(votes.some((v) => v.comment)
                ? {
                    comment: votes
                      .filter((v) => v.comment)
                      .map((v) => (votes.length > 1 ? `${v.by}: ${v.comment}` : v.comment))
                      .join('; '),
                  }
                : {}),
            };
      if (final.outcome === 'expired' && final.policy.onExpiry.then === 'block') {
        blockedReason = `approval request ${requestId} for "${first.summary}" expired: nobody decided in time (policy ${final.policy.name})`;
      }
    } else {
      pending.set(requestId, request);
      await report('awaiting-approval', true);
      const decided = await condition(() => decisions.has(requestId), input.approvalTimeoutMs);
      pending.delete(requestId);
      const decision = decisions.get(requestId);
      outcome =
        decided && decision
          ? { requestId, decision: decision.decision, comment: decision.comment, decidedBy: decision.decidedBy }
          : { requestId, decision: 'timed_out' };
    }
    await store.recordApprovalDecision({
      requestId,
      taskId: input.taskId,
      status: outcome.decision,
      decidedBy: outcome.decidedBy,
      comment: outcome.comment,
    });
    await report('running-tool', true);
    return tools.executeTool.executeWithOptions({ summary: uiSummary(`${call.summary} (${outcome.decision})`) }, [
      { ...base, approval: outcome },
    ]);
  }

  /** Comments that came in after the last LLM turn; returned so that the task workflow keeps them. */
  function undelivered(): { undeliveredComments?: TaskComment[] } {
    return comments.length > 0 ? { undeliveredComments: comments.splice(0) } : {};
  }
}

function drainComments(comments: TaskComment[]): string[] {
  return comments.splice(0).map((c) => (c.kind === 'message' ? c.text : roundCommentText(c.from, c.text)));
}
