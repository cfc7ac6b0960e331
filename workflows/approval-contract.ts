/**
 * Contract additions for approvals under a policy (issue 23), beside `contract.ts`'s `approvalDecision`
 * and `decideApproval`, which keep their names and payloads: a request can be handed to a colleague.
 */
import { FailureType } from './failure-types';
import { defineSignal, defineUpdate } from '@temporalio/workflow';

/** An approver hands a pending request to a named colleague, who then decides as if asked. */
export interface ApprovalDelegationRequest {
  requestId: string;
  /** Who hands it on (an allowed approver who has not decided). */
  from: string;
  /** The groups of who hands it on, as the caller vouches (see `ApprovalDecision.decidedByGroups`). */
  fromGroups?: string[];
  /** The colleague who gets it. */
  to: string;
  comment?: string;
}

export interface RecordedApprovalDelegation extends ApprovalDelegationRequest {
  delegatedAt: string;
  /** What the request waits for now. */
  waitingFor: string;
}

/** Validated: refuses a request without a policy, an approver who may not decide, one who already decided, an expired request. */
export const delegateApprovalUpdate = defineUpdate<RecordedApprovalDelegation, [ApprovalDelegationRequest]>(
  'delegateApproval',
);

/** Internal: the task workflow forwards an accepted delegation to the round that waits. */
export const approvalDelegationSignal =
  defineSignal<[ApprovalDelegationRequest & { acceptedAtMs?: number }]>('approvalDelegation');

/** Stable failure type of a refused delegation (the update's validator). */
export const INVALID_DELEGATION_TYPE = FailureType.InvalidDelegation;
