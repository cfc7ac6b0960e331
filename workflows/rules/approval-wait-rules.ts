/**
 * The approval wait under a policy, as pure functions of the request's state and the time: who may
 * decide now, whether a decision is acceptable, what is due (a reminder, an escalation, expiry) and
 * the "what it waits for" line. Imported by the round (which owns the wait), the task workflow (whose
 * `decideApproval` validator refuses what the round would refuse), the activities, the API and the CLI.
 * Times are epoch milliseconds; in a workflow they come from the workflow clock, so replay agrees.
 */

/** A policy as the request was opened with it: groups already expanded to people, numbers in ms. */
export interface ResolvedApprovalPolicy {
  /** Where it came from, for messages ("agent ops-bot, tool class shell"). */
  name: string;
  /** Who may decide (token names, `sso:<subject>` names of people signed in through OIDC). */
  approvers: string[];
  /** How the approvers were named in the configuration ("@release"), for the waiting line. */
  approversLabel: string;
  /**
   * The groups among the approvers: a person signed in with one of them in their OIDC groups claim, or
   * a token whose scope has its name, may decide too. Absent in requests opened before groups matched.
   */
  approverGroups?: string[];
  /** Distinct approvers needed. */
  quorum: number;
  /** Whether the task's creator may be one of them. */
  creatorCounts: boolean;
  /** `any`: one allowed rejection ends the request; `quorum`: it takes as many rejections as approvals. */
  rejection: 'any' | 'quorum';
  remindAfterMs?: number;
  /** After the first reminder, again every this long until the request ends. */
  remindEveryMs?: number;
  /**
   * Reminders are also posted to the policy's webhook. The URL itself stays in the configuration (it
   * may carry a secret): it never enters workflow history, the status query or the API.
   */
  webhook: boolean;
  escalateAfterMs?: number;
  escalateTo: string[];
  escalateToLabel: string;
  /** The groups among the escalation's people. */
  escalateToGroups?: string[];
  expireAfterMs: number;
  /** What happens when nobody decided in time. */
  onExpiry:
    | { then: 'ask-again' }
    | { then: 'block' }
    | { then: 'escalate'; to: string[]; toLabel: string; toGroups?: string[]; extendMs: number };
}

export interface ApprovalVote {
  by: string;
  atMs: number;
  comment?: string;
}

export interface ApprovalDelegation {
  from: string;
  to: string;
  atMs: number;
  comment?: string;
}

export type PolicyApprovalOutcome = 'approved' | 'rejected' | 'expired';

/** Everything the wait knows about one request; small (it travels in progress signals and history). */
export interface ApprovalWaitState {
  requestId: string;
  policy: ResolvedApprovalPolicy;
  /** The task's creator (`createdBy`), when known. */
  creator?: string;
  requestedAtMs: number;
  approvals: ApprovalVote[];
  rejections: ApprovalVote[];
  delegations: ApprovalDelegation[];
  remindersSent: number;
  /** The escalation's notifications went out. */
  escalated: boolean;
  /** `onExpiry: escalate` extended the wait (and notified its people). */
  extended: boolean;
  outcome?: PolicyApprovalOutcome;
}

export type ApprovalWaitAction =
  { kind: 'remind'; n: number } | { kind: 'escalate' } | { kind: 'extend' } | { kind: 'expire' };

export function initialWaitState(
  requestId: string,
  policy: ResolvedApprovalPolicy,
  requestedAtMs: number,
  creator?: string,
): ApprovalWaitState {
  return {
    requestId,
    policy,
    ...(creator ? { creator } : {}),
    requestedAtMs,
    approvals: [],
    rejections: [],
    delegations: [],
    remindersSent: 0,
    escalated: false,
    extended: false,
  };
}

const escalatesAtMs = (s: ApprovalWaitState): number | undefined =>
  s.policy.escalateAfterMs !== undefined &&
  (s.policy.escalateTo.length > 0 || (s.policy.escalateToGroups?.length ?? 0) > 0)
    ? s.requestedAtMs + s.policy.escalateAfterMs
    : undefined;

/** When the request expires (later once `onExpiry: escalate` extended it). */
export function expiresAtMs(s: ApprovalWaitState): number {
  const base = s.requestedAtMs + s.policy.expireAfterMs;
  return s.extended && s.policy.onExpiry.then === 'escalate' ? base + s.policy.onExpiry.extendMs : base;
}

/** Whether the escalation applies at `nowMs` (by the clock, so a validator does not wait for the round's timer). */
const escalatedAt = (s: ApprovalWaitState, nowMs: number): boolean =>
  s.escalated || (escalatesAtMs(s) !== undefined && nowMs >= escalatesAtMs(s)!);

/** Whether the policy leaves `who` out as the task's creator (`creatorCounts: false`). */
export function excludedAsCreator(s: ApprovalWaitState, who: string): boolean {
  return !s.policy.creatorCounts && s.creator !== undefined && s.creator === who;
}

/**
 * The people who may decide at `nowMs`: the approvers, the escalation's people once due, with
 * delegations applied in order; never the task's creator when the policy does not count them. Everyone
 * who addresses people uses it (the trail's "asked", reminders, refusals' "allowed now", `waitingOn`),
 * so nobody is asked who could not decide.
 */
export function allowedApprovers(s: ApprovalWaitState, nowMs: number): string[] {
  const allowed = new Set(s.policy.approvers);
  if (escalatedAt(s, nowMs)) for (const who of s.policy.escalateTo) allowed.add(who);
  if (s.extended && s.policy.onExpiry.then === 'escalate') for (const who of s.policy.onExpiry.to) allowed.add(who);
  for (const d of s.delegations) {
    allowed.delete(d.from);
    allowed.add(d.to);
  }
  return [...allowed].filter((who) => !excludedAsCreator(s, who));
}

/** The groups whose members may decide at `nowMs` (the approvers', the escalation's once due, the extension's). */
export function allowedGroups(s: ApprovalWaitState, nowMs: number): string[] {
  const groups = new Set(s.policy.approverGroups ?? []);
  if (escalatedAt(s, nowMs)) for (const g of s.policy.escalateToGroups ?? []) groups.add(g);
  if (s.extended && s.policy.onExpiry.then === 'escalate')
    for (const g of s.policy.onExpiry.toGroups ?? []) groups.add(g);
  return [...groups];
}

/**
 * Whether `who` may decide now: by name (delegations applied), or as a member of an allowed group,
 * unless they handed the request on. `groups` are what the caller vouches for (the API: the OIDC
 * groups claim of the signed-in person, or a token's scope).
 */
export function mayDecide(
  s: ApprovalWaitState,
  who: string,
  groups: readonly string[] | undefined,
  nowMs: number,
): boolean {
  if (allowedApprovers(s, nowMs).includes(who)) return true;
  if (s.delegations.some((d) => d.from === who)) return false;
  const allowed = allowedGroups(s, nowMs);
  return (groups ?? []).some((g) => allowed.includes(g));
}

/** "alice, bob, or a member of @release": who may decide now, for refusals. */
function allowedNow(s: ApprovalWaitState, nowMs: number): string {
  const names = allowedApprovers(s, nowMs).join(', ');
  const groups = allowedGroups(s, nowMs).map((g) => `@${g}`);
  if (groups.length === 0) return names || 'nobody';
  return `${names ? `${names}, or ` : ''}a member of ${groups.join(' or ')}`;
}

export interface PolicyDecision {
  decision: 'approved' | 'rejected';
  decidedBy?: string;
  /** The groups the approver belongs to, as the caller vouches (see `mayDecide`). */
  decidedByGroups?: string[];
  comment?: string;
}

/** Why a decision cannot be counted (undefined: it can). Each failure names what would fix it. */
export function policyDecisionProblem(s: ApprovalWaitState, d: PolicyDecision, nowMs: number): string | undefined {
  if (s.outcome === 'expired' || nowMs >= expiresAtMs(s))
    return `approval request ${s.requestId} expired at ${new Date(expiresAtMs(s)).toISOString()}: nobody decided in time, so it can no longer be decided`;
  if (s.outcome) return `approval request ${s.requestId} was already decided (${s.outcome})`;
  const who = d.decidedBy?.trim();
  if (!who)
    return `approval request ${s.requestId} follows the policy ${s.policy.name}: a decision must name its approver (decidedBy)`;
  const handed = [...s.delegations].reverse().find((x) => x.from === who);
  const allowed = allowedApprovers(s, nowMs);
  if (handed && !allowed.includes(who))
    return `${who} handed approval request ${s.requestId} to ${handed.to}, who decides instead`;
  if (excludedAsCreator(s, who))
    return `${who} created the task, and the policy ${s.policy.name} does not count the task's creator as an approver`;
  if (!mayDecide(s, who, d.decidedByGroups, nowMs))
    return `${who} is not an allowed approver of approval request ${s.requestId} (policy ${s.policy.name}); allowed now: ${allowedNow(s, nowMs)}`;
  const voted = [...s.approvals, ...s.rejections].find((v) => v.by === who);
  if (voted)
    return `duplicate approver: ${who} already ${s.approvals.includes(voted) ? 'approved' : 'rejected'} approval request ${s.requestId}; it needs ${s.policy.quorum} distinct approvers`;
  return undefined;
}

/** The state after an accepted decision (check `policyDecisionProblem` first); sets the outcome when it ends the request. */
export function applyPolicyDecision(s: ApprovalWaitState, d: PolicyDecision, nowMs: number): ApprovalWaitState {
  const vote: ApprovalVote = { by: d.decidedBy!.trim(), atMs: nowMs, ...(d.comment ? { comment: d.comment } : {}) };
  const next =
    d.decision === 'approved'
      ? { ...s, approvals: [...s.approvals, vote] }
      : { ...s, rejections: [...s.rejections, vote] };
  const rejectionsNeeded = s.policy.rejection === 'any' ? 1 : s.policy.quorum;
  if (next.rejections.length >= rejectionsNeeded) return { ...next, outcome: 'rejected' };
  if (next.approvals.length >= s.policy.quorum) return { ...next, outcome: 'approved' };
  return next;
}

export interface PolicyDelegation {
  from?: string;
  /** The groups of the person who hands it on, as the caller vouches (see `mayDecide`). */
  fromGroups?: string[];
  to?: string;
  comment?: string;
}

/** Why a delegation cannot be applied (undefined: it can). */
export function delegationProblem(s: ApprovalWaitState, d: PolicyDelegation, nowMs: number): string | undefined {
  if (s.outcome) return `approval request ${s.requestId} was already decided (${s.outcome})`;
  if (nowMs >= expiresAtMs(s))
    return `approval request ${s.requestId} expired: nobody decided in time, so it can no longer be handed on`;
  const from = d.from?.trim();
  const to = d.to?.trim();
  if (!from || !to) return 'a delegation names who hands the request on (from) and the colleague who gets it (to)';
  if (to.length > APPROVER_NAME_MAX_CHARS)
    return `the delegate's name is longer than ${APPROVER_NAME_MAX_CHARS} characters`;
  const allowed = allowedApprovers(s, nowMs);
  if (!mayDecide(s, from, d.fromGroups, nowMs))
    return `${from} is not an allowed approver of approval request ${s.requestId}, so they cannot hand it on; allowed now: ${allowedNow(s, nowMs)}`;
  if ([...s.approvals, ...s.rejections].some((v) => v.by === from))
    return `${from} already decided approval request ${s.requestId}; a decision cannot be handed on`;
  if (from === to) return `${from} cannot hand a request to themselves`;
  if (excludedAsCreator(s, to))
    return `${to} created the task, and the policy ${s.policy.name} does not count the task's creator as an approver`;
  if (allowed.includes(to)) return `${to} may already decide approval request ${s.requestId}`;
  if ([...s.approvals, ...s.rejections].some((v) => v.by === to))
    return `${to} already decided approval request ${s.requestId}`;
  return undefined;
}

export function applyDelegation(s: ApprovalWaitState, d: PolicyDelegation, nowMs: number): ApprovalWaitState {
  return {
    ...s,
    delegations: [
      ...s.delegations,
      { from: d.from!.trim(), to: d.to!.trim(), atMs: nowMs, ...(d.comment ? { comment: d.comment } : {}) },
    ],
  };
}

/** A person's name is shown in lists and lines: a name, not a paragraph. */
export const APPROVER_NAME_MAX_CHARS = 200;

/** When the next reminder is due (undefined: none left before expiry). */
function nextReminderAtMs(s: ApprovalWaitState): number | undefined {
  const { remindAfterMs, remindEveryMs } = s.policy;
  if (remindAfterMs === undefined) return undefined;
  if (s.remindersSent > 0 && remindEveryMs === undefined) return undefined;
  const at = s.requestedAtMs + remindAfterMs + s.remindersSent * (remindEveryMs ?? 0);
  return at < expiresAtMs(s) ? at : undefined;
}

/** What is due at `nowMs`, in the order it should happen (at most one reminder: a late worker does not spam). */
export function dueActions(s: ApprovalWaitState, nowMs: number): ApprovalWaitAction[] {
  if (s.outcome) return [];
  // Past expiry nobody is reminded or escalated to: the request ends (or gets its one last window).
  if (nowMs >= expiresAtMs(s))
    return [s.policy.onExpiry.then === 'escalate' && !s.extended ? { kind: 'extend' } : { kind: 'expire' }];
  const due: ApprovalWaitAction[] = [];
  const reminder = nextReminderAtMs(s);
  if (reminder !== undefined && nowMs >= reminder) due.push({ kind: 'remind', n: s.remindersSent + 1 });
  const escalation = escalatesAtMs(s);
  if (!s.escalated && escalation !== undefined && nowMs >= escalation) due.push({ kind: 'escalate' });
  return due;
}

/** The state after an action ran (its notifications are the caller's business). */
export function applyAction(s: ApprovalWaitState, action: ApprovalWaitAction): ApprovalWaitState {
  switch (action.kind) {
    case 'remind':
      return { ...s, remindersSent: action.n };
    case 'escalate':
      return { ...s, escalated: true };
    case 'extend':
      return { ...s, extended: true };
    case 'expire':
      return { ...s, outcome: 'expired' };
  }
}

/** When something is next due (a reminder, the escalation or expiry); undefined once decided. */
export function nextDueAtMs(s: ApprovalWaitState): number | undefined {
  if (s.outcome) return undefined;
  const escalation = !s.escalated ? escalatesAtMs(s) : undefined;
  return Math.min(...[nextReminderAtMs(s), escalation, expiresAtMs(s)].filter((t): t is number => t !== undefined));
}

/** Who is asked to act when an action runs: reminders go to those who may still decide, escalations to their people. */
export function actionRecipients(s: ApprovalWaitState, action: ApprovalWaitAction, nowMs: number): string[] {
  const voted = new Set([...s.approvals, ...s.rejections].map((v) => v.by));
  const ask = (w: string) => !voted.has(w) && !excludedAsCreator(s, w);
  if (action.kind === 'escalate') return s.policy.escalateTo.filter(ask);
  if (action.kind === 'extend') return s.policy.onExpiry.then === 'escalate' ? s.policy.onExpiry.to.filter(ask) : [];
  if (action.kind === 'expire') return [];
  return allowedApprovers(s, nowMs).filter((w) => !voted.has(w));
}

/** "in 40 s", "in 14 min", "in 2 h 5 min", "now". */
export function formatIn(ms: number): string {
  if (ms <= 0) return 'now';
  if (ms < 60_000) return `in ${Math.ceil(ms / 1_000)} s`;
  const minutes = Math.ceil(ms / 60_000);
  if (minutes < 60) return `in ${minutes} min`;
  const hours = Math.floor(minutes / 60);
  return `in ${hours} h${minutes % 60 ? ` ${minutes % 60} min` : ''}`;
}

/** What the request waits for, for the inbox, the CLI and the API: "1 of 2 approvals; escalates to @oncall in 14 min". */
export function waitingForLine(s: ApprovalWaitState, nowMs: number): string {
  if (s.outcome === 'expired') return 'expired: nobody decided in time';
  if (s.outcome) return s.outcome;
  const parts = [`${s.approvals.length} of ${s.policy.quorum} approval${s.policy.quorum === 1 ? '' : 's'}`];
  const delegated = s.delegations.at(-1);
  if (delegated) parts.push(`handed by ${delegated.from} to ${delegated.to}`);
  const escalation = escalatesAtMs(s);
  if (escalation !== undefined && !escalatedAt(s, nowMs))
    parts.push(`escalates to ${s.policy.escalateToLabel} ${formatIn(escalation - nowMs)}`);
  else if (escalation !== undefined) parts.push(`escalated to ${s.policy.escalateToLabel}`);
  parts.push(`expires ${formatIn(expiresAtMs(s) - nowMs)}`);
  return parts.join('; ');
}

/** Whether `who` has this request in their own queue: they may decide now and have not yet. */
export function inQueueOf(s: ApprovalWaitState, who: string, nowMs: number, groups?: readonly string[]): boolean {
  if (s.outcome || nowMs >= expiresAtMs(s)) return false;
  if (excludedAsCreator(s, who) || !mayDecide(s, who, groups, nowMs)) return false;
  return ![...s.approvals, ...s.rejections].some((v) => v.by === who);
}

/** Merges the votes and delegations the task workflow accepted but the round has not reported yet into its report. */
export function withUnreported(
  reported: ApprovalWaitState,
  accepted: { votes: Array<ApprovalVote & { decision: 'approved' | 'rejected' }>; delegations: ApprovalDelegation[] },
): ApprovalWaitState {
  let s = reported;
  for (const v of accepted.votes) {
    if ([...s.approvals, ...s.rejections].some((x) => x.by === v.by)) continue;
    s =
      v.decision === 'approved'
        ? { ...s, approvals: [...s.approvals, { by: v.by, atMs: v.atMs }] }
        : { ...s, rejections: [...s.rejections, { by: v.by, atMs: v.atMs }] };
  }
  for (const d of accepted.delegations)
    if (!s.delegations.some((x) => x.from === d.from && x.to === d.to))
      s = { ...s, delegations: [...s.delegations, d] };
  return s;
}

/** What the model is told when nobody decided in time (not the words of a refusal). */
export function expiredResultText(summary: string, s: ApprovalWaitState): string {
  const waited = formatIn(expiresAtMs(s) - s.requestedAtMs).replace(/^in /, '');
  const next =
    s.policy.onExpiry.then === 'block'
      ? 'The task is now blocked until a human resumes it.'
      : 'You may call it again to ask again, or carry on without it.';
  return `Not run: nobody decided on the approval request for "${summary}" in time (it expired after ${waited}). This is not a refusal. ${next}`;
}
