/**
 * The task workflow's view of the approval waits its running round owns. The round reports each
 * request's state (policy, votes, delegations) with its progress; the task's `decideApproval` and
 * `delegateApproval` validators judge a decision against that report plus what this workflow accepted
 * since, so a second vote by the same person is refused even before the round has counted the first.
 * An accepted decision is answered once the round has recorded it (or refused, when the request ended
 * first, for example by expiring), so the caller learns what actually happened.
 */
import type { PendingApproval } from './contract';
import {
  applyDelegation,
  delegationProblem,
  policyDecisionProblem,
  withUnreported,
  type ApprovalDelegation,
  type ApprovalVote,
  type ApprovalWaitState,
  type PolicyDecision,
  type PolicyDelegation,
} from './rules/approval-wait-rules';

type AcceptedVote = ApprovalVote & { decision: 'approved' | 'rejected' };

export class ApprovalMirror {
  private readonly reported = new Map<string, ApprovalWaitState>();
  /** Requests the round reported with an outcome: kept so a waiting update can tell what happened. */
  private readonly concluded = new Map<string, ApprovalWaitState>();
  private readonly accepted = new Map<string, { votes: AcceptedVote[]; delegations: ApprovalDelegation[] }>();

  /** Takes the round's report; returns the requests still waiting (those it reported with an outcome are done). */
  observe(pending: PendingApproval[]): PendingApproval[] {
    const waiting: PendingApproval[] = [];
    for (const p of pending) {
      if (!p.wait) {
        waiting.push(p);
        continue;
      }
      if (p.wait.outcome) {
        this.concluded.set(p.requestId, p.wait);
        this.reported.delete(p.requestId);
        this.accepted.delete(p.requestId);
        continue;
      }
      this.reported.set(p.requestId, p.wait);
      const mine = this.accepted.get(p.requestId);
      if (mine) {
        const seen = new Set([...p.wait.approvals, ...p.wait.rejections].map((v) => v.by));
        mine.votes = mine.votes.filter((v) => !seen.has(v.by));
        mine.delegations = mine.delegations.filter(
          (d) => !p.wait!.delegations.some((x) => x.from === d.from && x.to === d.to),
        );
      }
      waiting.push(p);
    }
    return waiting;
  }

  /** A new round starts: nothing of the last one can be decided any more. */
  clear(): void {
    this.reported.clear();
    this.accepted.clear();
  }

  /** The request's state as far as this workflow knows (report + accepted since), or undefined without a policy. */
  state(requestId: string): ApprovalWaitState | undefined {
    const reported = this.reported.get(requestId);
    if (!reported) return undefined;
    return withUnreported(reported, this.accepted.get(requestId) ?? { votes: [], delegations: [] });
  }

  isPolicyRequest(requestId: string): boolean {
    return this.reported.has(requestId) || this.concluded.has(requestId);
  }

  decisionProblem(requestId: string, decision: PolicyDecision, nowMs: number): string | undefined {
    const concluded = this.concluded.get(requestId);
    if (concluded) return policyDecisionProblem(concluded, decision, nowMs);
    const state = this.state(requestId);
    return state ? policyDecisionProblem(state, decision, nowMs) : undefined;
  }

  delegationProblem(requestId: string, delegation: PolicyDelegation, nowMs: number): string | undefined {
    const concluded = this.concluded.get(requestId);
    if (concluded) return delegationProblem(concluded, delegation, nowMs);
    const state = this.state(requestId);
    return state
      ? delegationProblem(state, delegation, nowMs)
      : `approval request ${requestId} has no approval policy, so it cannot be handed on`;
  }

  acceptDecision(requestId: string, decision: PolicyDecision, nowMs: number): void {
    this.entry(requestId).votes.push({ by: decision.decidedBy!.trim(), atMs: nowMs, decision: decision.decision });
  }

  acceptDelegation(requestId: string, delegation: PolicyDelegation, nowMs: number): void {
    const state = this.state(requestId)!;
    this.entry(requestId).delegations.push(applyDelegation(state, delegation, nowMs).delegations.at(-1)!);
  }

  /**
   * What became of an accepted decision by `by`: `recorded` once a report counts it, `ended` when the
   * request ended without it, undefined while the round has not said.
   */
  voteFate(requestId: string, by: string): { fate: 'recorded' | 'ended'; state: ApprovalWaitState } | undefined {
    const who = by.trim();
    for (const state of [this.concluded.get(requestId), this.reported.get(requestId)]) {
      if (!state) continue;
      if ([...state.approvals, ...state.rejections].some((v) => v.by === who)) return { fate: 'recorded', state };
      if (state.outcome) return { fate: 'ended', state };
    }
    return undefined;
  }

  delegationFate(
    requestId: string,
    from: string,
    to: string,
  ): { fate: 'recorded' | 'ended'; state: ApprovalWaitState } | undefined {
    const concluded = this.concluded.get(requestId);
    if (concluded)
      return {
        fate: concluded.delegations.some((d) => d.from === from && d.to === to) ? 'recorded' : 'ended',
        state: concluded,
      };
    const reported = this.reported.get(requestId);
    if (reported?.delegations.some((d) => d.from === from.trim() && d.to === to.trim()))
      return { fate: 'recorded', state: reported };
    return undefined;
  }

  private entry(requestId: string): { votes: AcceptedVote[]; delegations: ApprovalDelegation[] } {
    let mine = this.accepted.get(requestId);
    if (!mine) this.accepted.set(requestId, (mine = { votes: [], delegations: [] }));
    return mine;
  }
}
