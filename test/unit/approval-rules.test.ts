import { ApprovalsConfigSchema, resolveApprovalPolicy, type ApprovalsConfig } from '../../activities/approvals/policy';
import { AgentConfigSchema } from '../../activities/store/agents';
import { organisationProblems } from '../../activities/store/organisations';
import {
  actionRecipients,
  allowedApprovers,
  applyAction,
  applyDelegation,
  applyPolicyDecision,
  delegationProblem,
  dueActions,
  expiresAtMs,
  initialWaitState,
  nextDueAtMs,
  inQueueOf,
  policyDecisionProblem,
  waitingForLine,
  type ApprovalWaitState,
} from '../../workflows/rules/approval-wait-rules';

const T0 = Date.parse('2026-12-01T12:00:00Z');
const MIN = 60_000;

function stateFor(config: ApprovalsConfig, tool = 'shell_execute', creator?: string): ApprovalWaitState {
  const policy = resolveApprovalPolicy(tool, [{ origin: 'agent a', config: ApprovalsConfigSchema.parse(config) }]);
  if (!policy) throw new Error('no policy');
  return initialWaitState('req-1', policy, T0, creator);
}

describe('approval policy configuration', () => {
  test('an unknown group, an unreachable quorum and a policy covering nothing are refused, each by its path', () => {
    const parsed = AgentConfigSchema.safeParse({
      approvals: {
        groups: { release: ['alice', 'bob'] },
        policies: [
          { toolClass: 'shell', approvers: ['@ops'], expireAfterMs: MIN },
          { tools: ['file_write'], approvers: ['@release'], quorum: 3, expireAfterMs: MIN },
          { approvers: ['alice'], expireAfterMs: MIN },
          { toolClass: 'shell', approvers: ['alice'], expireAfterMs: MIN, escalate: { afterMs: MIN, to: ['@nobody'] } },
        ],
      },
    });
    expect(parsed.success).toBe(false);
    const issues = parsed.error!.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    expect(issues).toEqual(
      expect.arrayContaining([
        'approvals.policies.0.approvers: unknown approver group @ops; known groups: @release',
        'approvals.policies.1.quorum: quorum 3 is larger than the 2 approvers who exist (alice, bob)',
        'approvals.policies.2: a policy covers either `tools` or a `toolClass`, exactly one of them',
        'approvals.policies.3.escalate.to: unknown approver group @nobody; known groups: @release',
      ]),
    );
  });

  test('the escalation target counts toward the people who can reach a quorum; an organisation is validated the same way', () => {
    expect(
      ApprovalsConfigSchema.safeParse({
        policies: [
          {
            toolClass: 'any',
            approvers: ['alice'],
            quorum: 2,
            escalate: { afterMs: MIN, to: ['bob'] },
            expireAfterMs: MIN,
          },
        ],
      }).success,
    ).toBe(true);
    const problems = organisationProblems({
      name: 'acme',
      context: '',
      announcements: '',
      users: [],
      skills: [],
      approvals: { policies: [{ toolClass: 'shell', approvers: ['@sre'], expireAfterMs: MIN }] } as ApprovalsConfig,
    });
    expect(problems).toEqual([
      'approvals.policies.0.approvers: unknown approver group @sre; known groups: none (define them under approvals.groups)',
    ]);
  });

  test("the agent's first covering policy applies, else its organisation's; tool names and classes both match", () => {
    const agent = ApprovalsConfigSchema.parse({
      policies: [{ name: 'files', tools: ['file_write'], approvers: ['fay'], expireAfterMs: MIN }],
    });
    const org = ApprovalsConfigSchema.parse({
      groups: { sre: ['sam', 'sue'] },
      policies: [{ toolClass: 'shell', approvers: ['@sre'], quorum: 2, expireAfterMs: MIN }],
    });
    const sources = [
      { origin: 'agent a', config: agent },
      { origin: 'organisation acme', config: org },
    ];
    expect(resolveApprovalPolicy('file_write', sources)).toMatchObject({ name: 'agent a files', approvers: ['fay'] });
    expect(resolveApprovalPolicy('shell_execute', sources)).toMatchObject({
      name: 'organisation acme class shell',
      approvers: ['sam', 'sue'],
      approversLabel: '@sre',
      quorum: 2,
    });
    expect(resolveApprovalPolicy('request_user_approval', sources)).toBeUndefined();
  });
});

describe('the approval wait', () => {
  test('quorum counts distinct approvers; any allowed rejection ends the request by default', () => {
    let s = stateFor({
      policies: [{ toolClass: 'shell', approvers: ['alice', 'bob', 'carol'], quorum: 2, expireAfterMs: 60 * MIN }],
    });
    s = applyPolicyDecision(s, { decision: 'approved', decidedBy: 'alice' }, T0 + 1);
    expect(s.outcome).toBeUndefined();
    expect(policyDecisionProblem(s, { decision: 'approved', decidedBy: ' alice ' }, T0 + 2)).toMatch(
      /duplicate approver: alice already approved/,
    );
    expect(applyPolicyDecision(s, { decision: 'rejected', decidedBy: 'carol' }, T0 + 3).outcome).toBe('rejected');
    expect(applyPolicyDecision(s, { decision: 'approved', decidedBy: 'bob' }, T0 + 3).outcome).toBe('approved');
  });

  test('with rejection: quorum, one rejection does not end it; with creatorCounts false, the creator may not decide', () => {
    let s = stateFor(
      {
        policies: [
          {
            toolClass: 'shell',
            approvers: ['alice', 'bob', 'carol'],
            quorum: 2,
            rejection: 'quorum',
            creatorCounts: false,
            expireAfterMs: 60 * MIN,
          },
        ],
      },
      'shell_execute',
      'carol',
    );
    expect(policyDecisionProblem(s, { decision: 'approved', decidedBy: 'carol' }, T0)).toMatch(
      /carol created the task/,
    );
    s = applyPolicyDecision(s, { decision: 'rejected', decidedBy: 'alice' }, T0);
    expect(s.outcome).toBeUndefined();
    expect(applyPolicyDecision(s, { decision: 'rejected', decidedBy: 'bob' }, T0).outcome).toBe('rejected');
  });

  test('with creatorCounts false, the creator is addressed nowhere: not asked, not reminded, not listed as allowed', () => {
    const s = stateFor(
      {
        policies: [
          {
            toolClass: 'shell',
            approvers: ['alice', 'bob', 'carol'],
            creatorCounts: false,
            remind: { afterMs: 10 * MIN },
            escalate: { afterMs: 20 * MIN, to: ['carol', 'olga'] },
            expireAfterMs: 60 * MIN,
          },
        ],
      },
      'shell_execute',
      'carol',
    );
    expect(allowedApprovers(s, T0)).toEqual(['alice', 'bob']);
    expect(inQueueOf(s, 'carol', T0)).toBe(false);
    expect(actionRecipients(s, { kind: 'remind', n: 1 }, T0 + 10 * MIN)).toEqual(['alice', 'bob']);
    expect(actionRecipients(s, { kind: 'escalate' }, T0 + 20 * MIN)).toEqual(['olga']);
    // A refusal names who may decide, and she is not among them; her own refusal says why.
    const refused = policyDecisionProblem(s, { decision: 'approved', decidedBy: 'dave' }, T0);
    expect(refused).toMatch(/allowed now: alice, bob$/);
    expect(policyDecisionProblem(s, { decision: 'approved', decidedBy: 'carol' }, T0)).toMatch(
      /carol created the task/,
    );
    // Nor can the request be handed to her.
    expect(delegationProblem(s, { from: 'alice', to: 'carol' }, T0)).toMatch(/carol created the task/);
    // With creatorCounts (the default), the creator is an approver like any other.
    const counted = stateFor(
      { policies: [{ toolClass: 'shell', approvers: ['alice', 'carol'], expireAfterMs: 60 * MIN }] },
      'shell_execute',
      'carol',
    );
    expect(allowedApprovers(counted, T0)).toEqual(['alice', 'carol']);
  });

  test('reminders, escalation and expiry fall due in order, one reminder at a time, with the waiting line to match', () => {
    let s = stateFor({
      groups: { oncall: ['olga'] },
      policies: [
        {
          toolClass: 'shell',
          approvers: ['alice', 'bob'],
          quorum: 2,
          remind: { afterMs: 10 * MIN, everyMs: 10 * MIN },
          escalate: { afterMs: 30 * MIN, to: ['@oncall'] },
          expireAfterMs: 60 * MIN,
        },
      ],
    });
    s = applyPolicyDecision(s, { decision: 'approved', decidedBy: 'alice' }, T0 + MIN);
    expect(nextDueAtMs(s)).toBe(T0 + 10 * MIN);
    expect(waitingForLine(s, T0 + 16 * MIN)).toBe(
      '1 of 2 approvals; escalates to @oncall in 14 min; expires in 44 min',
    );
    expect(dueActions(s, T0 + 10 * MIN)).toEqual([{ kind: 'remind', n: 1 }]);
    s = applyAction(s, { kind: 'remind', n: 1 });
    // A worker that comes back late sends one reminder, not every one it missed.
    expect(dueActions(s, T0 + 35 * MIN)).toEqual([{ kind: 'remind', n: 2 }, { kind: 'escalate' }]);
    expect(policyDecisionProblem(s, { decision: 'approved', decidedBy: 'olga' }, T0 + 29 * MIN)).toMatch(
      /olga is not an allowed approver/,
    );
    expect(policyDecisionProblem(s, { decision: 'approved', decidedBy: 'olga' }, T0 + 30 * MIN)).toBeUndefined();
    s = applyAction(applyAction(s, { kind: 'remind', n: 2 }), { kind: 'escalate' });
    expect(waitingForLine(s, T0 + 35 * MIN)).toBe('1 of 2 approvals; escalated to @oncall; expires in 25 min');
    expect(dueActions(s, T0 + 60 * MIN)).toEqual([{ kind: 'expire' }]);
    s = applyAction(s, { kind: 'expire' });
    expect(policyDecisionProblem(s, { decision: 'approved', decidedBy: 'bob' }, T0 + 61 * MIN)).toMatch(
      /expired at 2026-12-01T13:00:00.000Z: nobody decided in time/,
    );
    expect(waitingForLine(s, T0 + 61 * MIN)).toBe('expired: nobody decided in time');
  });

  test('onExpiry escalate gives other people one more window before the expired outcome', () => {
    let s = stateFor({
      policies: [
        {
          toolClass: 'shell',
          approvers: ['alice'],
          expireAfterMs: 10 * MIN,
          onExpiry: { escalateTo: ['boss'], extendMs: 5 * MIN },
        },
      ],
    });
    expect(dueActions(s, T0 + 10 * MIN)).toEqual([{ kind: 'extend' }]);
    s = applyAction(s, { kind: 'extend' });
    expect(expiresAtMs(s)).toBe(T0 + 15 * MIN);
    expect(allowedApprovers(s, T0 + 11 * MIN)).toEqual(['alice', 'boss']);
    expect(dueActions(s, T0 + 15 * MIN)).toEqual([{ kind: 'expire' }]);
  });

  test('a delegate decides instead of the person who handed the request on', () => {
    let s = stateFor({
      policies: [{ toolClass: 'shell', approvers: ['alice', 'bob'], quorum: 2, expireAfterMs: 60 * MIN }],
    });
    s = applyDelegation(s, { from: 'alice', to: 'dan' }, T0);
    expect(allowedApprovers(s, T0)).toEqual(['bob', 'dan']);
    expect(policyDecisionProblem(s, { decision: 'approved', decidedBy: 'alice' }, T0)).toBe(
      'alice handed approval request req-1 to dan, who decides instead',
    );
    s = applyPolicyDecision(
      applyPolicyDecision(s, { decision: 'approved', decidedBy: 'dan' }, T0),
      { decision: 'approved', decidedBy: 'bob' },
      T0,
    );
    expect(s.outcome).toBe('approved');
  });
});
