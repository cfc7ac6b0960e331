/**
 * The wait for a human decision on a risky tool call under an approval policy, inside the round that
 * made the call. Everything lives in workflow state and timers: the votes so far, reminders,
 * escalation, delegations and expiry survive a worker's death, because a new worker rebuilds them by
 * replaying this history; each notification is an activity keyed by its event, so none is sent twice.
 * Decisions arrive as the `approvalDecision` signal (forwarded by the task workflow after its
 * `decideApproval` validator accepted them) and delegations as `approvalDelegation`.
 */
import { condition, log, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { TASK_STORE } from './activity-options';
import type { ApprovalDecision } from './contract';
import type { ApprovalDelegationRequest } from './approval-contract';
import {
  actionRecipients,
  applyAction,
  applyDelegation,
  applyPolicyDecision,
  delegationProblem,
  dueActions,
  initialWaitState,
  nextDueAtMs,
  policyDecisionProblem,
  type ApprovalWaitAction,
  type ApprovalWaitState,
  type ResolvedApprovalPolicy,
} from './rules/approval-wait-rules';

const store = proxyActivities<Activities>(TASK_STORE);

// Runs with APPROVAL_POLICY_WAIT_PATCH (patches.ts): a risky call opens its request with `openApprovalRequest`
// and, when a policy applies, waits here. Without it the round records the request with
// `recordApprovalRequest` and waits for one decision until `approvalTimeoutMs`, then `timed_out`.

/** What reaches a waiting request: decisions and delegations, in arrival order. */
export type ApprovalInboxItem =
  | { kind: 'decision'; decision: ApprovalDecision & { acceptedAtMs?: number } }
  | { kind: 'delegation'; delegation: ApprovalDelegationRequest & { acceptedAtMs?: number } };

export interface PolicyWaitInput {
  requestId: string;
  agentId: string;
  taskId?: string;
  summary: string;
  policy: ResolvedApprovalPolicy;
  requestedAtMs: number;
  creator?: string;
  /** Filled by the round's signal handlers while this request waits. */
  inbox: ApprovalInboxItem[];
  /** Called after every change, so the task workflow (and its `status` query) sees the state. */
  onChange(state: ApprovalWaitState): Promise<void>;
}

const ACTION_EVENT = { remind: 'reminded', escalate: 'escalated', extend: 'extended', expire: 'expired' } as const;

/** Waits until the policy's quorum approved, a rejection ended it, or it expired; returns the final state. */
export async function waitUnderPolicy(input: PolicyWaitInput): Promise<ApprovalWaitState> {
  const initial = initialWaitState(input.requestId, input.policy, input.requestedAtMs, input.creator);
  await input.onChange(initial);
  const final = await waitFrom(initial, input);
  // The outcome is reported too: a `decideApproval` update waiting on the task workflow learns how it ended.
  await input.onChange(final);
  return final;
}

async function waitFrom(initial: ApprovalWaitState, input: PolicyWaitInput): Promise<ApprovalWaitState> {
  let state = initial;
  const base = { requestId: input.requestId, agentId: input.agentId, taskId: input.taskId, summary: input.summary };
  for (;;) {
    let changed = false;
    for (const item of input.inbox.splice(0)) {
      // A decision the task workflow accepted before expiry counts even if it reaches the round just after.
      const atMs = Math.min(
        Date.now(),
        (item.kind === 'decision' ? item.decision.acceptedAtMs : item.delegation.acceptedAtMs) ?? Date.now(),
      );
      if (item.kind === 'decision') {
        const problem = policyDecisionProblem(state, item.decision, atMs);
        if (problem) {
          log.warn(`approval decision not counted: ${problem}`);
          continue;
        }
        state = applyPolicyDecision(state, item.decision, atMs);
        const by = item.decision.decidedBy!.trim();
        await store.recordApprovalEvent.executeWithOptions({ summary: `approval ${item.decision.decision} by ${by}` }, [
          {
            ...base,
            kind: item.decision.decision,
            actor: by,
            ...(item.decision.comment ? { comment: item.decision.comment } : {}),
            eventKey: `${input.requestId}:vote:${by}`,
            state,
            atMs,
          },
        ]);
      } else {
        const problem = delegationProblem(state, item.delegation, atMs);
        if (problem) {
          log.warn(`approval delegation not applied: ${problem}`);
          continue;
        }
        state = applyDelegation(state, item.delegation, atMs);
        const { from, to } = state.delegations.at(-1)!;
        await store.recordApprovalEvent.executeWithOptions({ summary: `approval handed by ${from} to ${to}` }, [
          {
            ...base,
            kind: 'delegated',
            actor: from,
            targets: [to],
            ...(item.delegation.comment ? { comment: item.delegation.comment } : {}),
            eventKey: `${input.requestId}:delegate:${state.delegations.length}`,
            state,
            atMs,
          },
        ]);
      }
      changed = true;
      if (state.outcome) return state;
    }
    const now = Date.now();
    for (const action of dueActions(state, now)) {
      const targets = actionRecipients(state, action, now);
      state = applyAction(state, action);
      await store.recordApprovalEvent.executeWithOptions({ summary: actionSummary(action, targets) }, [
        {
          ...base,
          kind: ACTION_EVENT[action.kind],
          targets,
          eventKey: `${input.requestId}:${action.kind}${action.kind === 'remind' ? `:${action.n}` : ''}`,
          state,
          atMs: now,
        },
      ]);
      changed = true;
    }
    if (state.outcome) return state;
    if (changed) await input.onChange(state);
    const waitMs = Math.max(1, nextDueAtMs(state)! - Date.now());
    await condition(() => input.inbox.length > 0, waitMs);
  }
}

function actionSummary(action: ApprovalWaitAction, targets: string[]): string {
  const to = targets.length ? ` ${targets.join(', ')}` : '';
  switch (action.kind) {
    case 'remind':
      return `approval reminder ${action.n} to${to}`;
    case 'escalate':
      return `approval escalated to${to}`;
    case 'extend':
      return `approval expired; last call to${to}`;
    case 'expire':
      return 'approval expired: nobody decided in time';
  }
}
