import { ApplicationFailure, condition, log, setHandler, type ChildWorkflowHandle } from '@temporalio/workflow';
import {
  approvalDelegationSignal,
  delegateApprovalUpdate,
  INVALID_DELEGATION_TYPE,
  type ApprovalDelegationRequest,
  type RecordedApprovalDelegation,
} from './approval-contract';
import type { ApprovalMirror } from './approval-mirror';
import { waitingForLine } from './rules/approval-wait-rules';
import {
  approvalDecisionSignal,
  decideApprovalUpdate,
  reviewDecisionSignal,
  TaskFailureType,
  type ApprovalDecision,
  type PendingApproval,
  type RecordedApprovalDecision,
  type ReviewDecision,
} from './contract';
import type { TaskState } from './rules/task-state';
import {
  budgetDecisionProblem,
  budgetDecisionSignal,
  decideBudgetUpdate,
  INVALID_BUDGET_DECISION_TYPE,
  type RecordedBudgetDecision,
} from './subagent-contract';
import type { taskRoundWorkflow } from './task-round';

/** What the decision handlers read and change of the task workflow's state. */
export interface DecisionHost {
  /** The running round, if any: approvals and budget decisions go to it. */
  round(): ChildWorkflowHandle<typeof taskRoundWorkflow> | undefined;
  state(): TaskState;
  /** What the task's tree has spent so far, as the round last reported it. */
  spentUsd(): number;
  pendingApprovals(): PendingApproval[];
  setPendingApprovals(list: PendingApproval[]): void;
  /** Request ids already decided: a second decision on one is refused. */
  decided: Set<string>;
  /** Review decisions waiting for the main loop. */
  reviews: ReviewDecision[];
  /** The running round's approval waits under a policy, as it reported them. */
  approvals: ApprovalMirror;
}

/**
 * How long an accepted decision under a policy waits for the round to count it. The round answers
 * within one workflow task; only a round that ended meanwhile leaves it unanswered.
 */
const POLICY_DECISION_CONFIRM_MS = 60_000;

/**
 * The task workflow's human decisions: tool-call approvals (signal, and the validated update that
 * refuses what the round would ignore), cost-budget decisions for the round's tree (the same pair),
 * and review decisions (queued for the main loop). Payloads come from people (UI, CLI, client), so
 * nothing is assumed of them.
 */
export function installDecisionHandlers(host: DecisionHost): void {
  /** A human's answer when the round's tree reached its cost budget: the round applies it. */
  setHandler(budgetDecisionSignal, async (decision) => {
    const round = host.round();
    if (!round) {
      log.warn('budgetDecision ignored: no round is running');
      return;
    }
    try {
      await round.signal(budgetDecisionSignal, decision);
    } catch (error) {
      log.warn('could not forward a budget decision to the round', { error: String(error) });
    }
  });
  setHandler(
    decideBudgetUpdate,
    async (decision): Promise<RecordedBudgetDecision> => {
      const spent = host.spentUsd();
      await host.round()!.signal(budgetDecisionSignal, decision);
      return { ...decision, spentUsd: spent, decidedAt: new Date().toISOString() };
    },
    {
      validator: (decision) => {
        const problem = budgetDecisionProblem(decision, host.spentUsd(), host.round() !== undefined);
        if (problem)
          throw ApplicationFailure.create({ type: INVALID_BUDGET_DECISION_TYPE, message: problem, nonRetryable: true });
      },
    },
  );

  /** Passes a decision to the running round; the round ignores ids it never asked about. */
  const forward = async (decision: ApprovalDecision): Promise<void> => {
    if (host.approvals.isPolicyRequest(decision.requestId)) {
      // Under a policy one decision rarely ends the request: the request stays pending until the round says so.
      const acceptedAtMs = Date.now();
      host.approvals.acceptDecision(decision.requestId, decision, acceptedAtMs);
      const forwarded: ApprovalDecision & { acceptedAtMs: number } = { ...decision, acceptedAtMs };
      await host
        .round()
        ?.signal(approvalDecisionSignal, forwarded)
        .catch((error: unknown) =>
          log.warn('could not forward an approval decision to the round', {
            requestId: decision.requestId,
            error: String(error),
          }),
        );
      return;
    }
    host.decided.add(decision.requestId);
    host.setPendingApprovals(host.pendingApprovals().filter((a) => a.requestId !== decision.requestId));
    try {
      await host.round()?.signal(approvalDecisionSignal, decision);
    } catch (error) {
      log.warn('could not forward an approval decision to the round', {
        requestId: decision.requestId,
        error: String(error),
      });
    }
  };
  setHandler(approvalDecisionSignal, async (decision) => {
    const problem = approvalProblem(decision);
    if (problem) {
      log.warn(`approvalDecision signal ignored: ${problem}`);
      return;
    }
    await forward(decision);
  });
  setHandler(
    decideApprovalUpdate,
    async (decision): Promise<RecordedApprovalDecision> => {
      const request = host.pendingApprovals().find((a) => a.requestId === decision.requestId);
      const underPolicy = host.approvals.isPolicyRequest(decision.requestId);
      await forward(decision);
      const recorded = { ...decision, tool: request?.tool ?? 'unknown', decidedAt: new Date().toISOString() };
      if (!underPolicy) return recorded;
      const by = decision.decidedBy!;
      await condition(() => host.approvals.voteFate(decision.requestId, by) !== undefined, POLICY_DECISION_CONFIRM_MS);
      const fate = host.approvals.voteFate(decision.requestId, by);
      if (!fate)
        throw ApplicationFailure.create({
          type: TaskFailureType.invalidDecision,
          message: `approval request ${decision.requestId}: the round did not confirm the decision (it may have ended)`,
          nonRetryable: true,
        });
      if (fate.fate === 'ended') {
        const why =
          fate.state.outcome === 'expired' ? 'expired: nobody decided in time' : `was already ${fate.state.outcome}`;
        throw ApplicationFailure.create({
          type: TaskFailureType.invalidDecision,
          message: `approval request ${decision.requestId} ${why}; this decision was not counted`,
          nonRetryable: true,
        });
      }
      return { ...recorded, waitingFor: waitingForLine(fate.state, Date.now()) };
    },
    {
      validator: (decision) => {
        const problem = approvalProblem(decision);
        // An ApplicationFailure rejects the update; any other error would fail the workflow task.
        if (problem)
          throw ApplicationFailure.create({
            type: TaskFailureType.invalidDecision,
            message: problem,
            nonRetryable: true,
          });
      },
    },
  );
  setHandler(reviewDecisionSignal, (review) => {
    if (review?.decision !== 'accept' && review?.decision !== 'revise') {
      log.warn(`reviewDecision ignored: decision must be 'accept' or 'revise'`);
      return;
    }
    if (host.state() !== 'review') {
      log.warn(`reviewDecision ignored: the task is ${host.state()}, not in review`);
      return;
    }
    host.reviews.push(review);
  });

  const delegationRefused = (message: string) =>
    ApplicationFailure.create({ type: INVALID_DELEGATION_TYPE, message, nonRetryable: true });
  setHandler(
    delegateApprovalUpdate,
    async (delegation): Promise<RecordedApprovalDelegation> => {
      const acceptedAtMs = Date.now();
      host.approvals.acceptDelegation(delegation.requestId, delegation, acceptedAtMs);
      await host.round()?.signal(approvalDelegationSignal, { ...delegation, acceptedAtMs });
      await condition(
        () => host.approvals.delegationFate(delegation.requestId, delegation.from, delegation.to) !== undefined,
        POLICY_DECISION_CONFIRM_MS,
      );
      const fate = host.approvals.delegationFate(delegation.requestId, delegation.from, delegation.to);
      if (fate?.fate !== 'recorded')
        throw delegationRefused(
          `approval request ${delegation.requestId} ended before it was handed on; the delegation was not recorded`,
        );
      return {
        ...delegation,
        delegatedAt: new Date(acceptedAtMs).toISOString(),
        waitingFor: waitingForLine(fate.state, Date.now()),
      };
    },
    {
      validator: (delegation: ApprovalDelegationRequest) => {
        if (typeof delegation?.requestId !== 'string') throw delegationRefused('a delegation needs a requestId');
        if (
          !host.pendingApprovals().some((a) => a.requestId === delegation.requestId) &&
          !host.approvals.isPolicyRequest(delegation.requestId)
        ) {
          throw delegationRefused(`no pending approval request ${delegation.requestId}`);
        }
        const problem = host.approvals.delegationProblem(delegation.requestId, delegation, Date.now());
        if (problem) throw delegationRefused(problem);
      },
    },
  );

  /** Why an approval decision cannot be applied. */
  function approvalProblem(decision: ApprovalDecision | undefined): string | undefined {
    if (typeof decision?.requestId !== 'string') return 'a decision needs a requestId';
    if (decision.decision !== 'approved' && decision.decision !== 'rejected')
      return `decision must be 'approved' or 'rejected', got ${JSON.stringify(decision.decision)}`;
    if (host.approvals.isPolicyRequest(decision.requestId))
      return host.approvals.decisionProblem(decision.requestId, decision, Date.now());
    if (host.decided.has(decision.requestId)) return `approval request ${decision.requestId} was already decided`;
    const pending = host.pendingApprovals();
    if (!pending.some((a) => a.requestId === decision.requestId)) {
      return `no pending approval request ${decision.requestId}; pending: ${pending.map((a) => a.requestId).join(', ') || 'none'}`;
    }
    return undefined;
  }
}
