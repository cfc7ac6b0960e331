/**
 * A policy's `@group` matches people by what they sign in with, as well as by the names listed: the
 * groups in their OIDC groups claim, and a token's scope by name. Pure rules and configuration; the
 * sign-in through a real OpenID provider is in test/api/sso.test.ts.
 */
import { ApprovalsConfigSchema, resolveApprovalPolicy, type ApprovalsConfig } from '../../activities/approvals/policy';
import { groupsFromClaims, type SsoOptions } from '../../api/sso';
import { approverGroupsOf } from '../../api/tokens';
import {
  applyDelegation,
  delegationProblem,
  inQueueOf,
  initialWaitState,
  policyDecisionProblem,
  type ApprovalWaitState,
} from '../../workflows/rules/approval-wait-rules';

const T0 = Date.parse('2026-12-01T12:00:00Z');
const MIN = 60_000;

function stateFor(config: ApprovalsConfig): ApprovalWaitState {
  const policy = resolveApprovalPolicy('shell_execute', [
    { origin: 'agent a', config: ApprovalsConfigSchema.parse(config) },
  ]);
  if (!policy) throw new Error('no policy');
  return initialWaitState('req-1', policy, T0);
}

const releaseBySignIn: ApprovalsConfig = {
  groups: { release: ['alice'], oncall: [] },
  policies: [
    {
      toolClass: 'shell',
      approvers: ['@release'],
      quorum: 2,
      escalate: { afterMs: 10 * MIN, to: ['@oncall'] },
      expireAfterMs: 60 * MIN,
    },
  ],
};

describe('approval groups from sign-in', () => {
  test('a member of the group by their groups claim may decide; someone outside is told who may', () => {
    const s = stateFor(releaseBySignIn);
    const by = (decidedBy: string, decidedByGroups?: string[]) =>
      policyDecisionProblem(s, { decision: 'approved', decidedBy, decidedByGroups }, T0 + MIN);
    expect(by('alice')).toBeUndefined(); // listed by name
    expect(by('sso:olivia@example.test', ['readers', 'release'])).toBeUndefined();
    expect(by('sso:rita@example.test', ['readers'])).toBe(
      'sso:rita@example.test is not an allowed approver of approval request req-1 (policy agent a class shell); allowed now: alice, or a member of @release',
    );
    // The group is matched by name, exactly: no prefix, no case folding.
    expect(by('sso:rita@example.test', ['Release', 'release-old'])).toMatch(/is not an allowed approver/);
  });

  test('the escalation group may decide only once the escalation is due; the queue follows', () => {
    const s = stateFor(releaseBySignIn);
    const oncall = { decision: 'approved' as const, decidedBy: 'sso:otto', decidedByGroups: ['oncall'] };
    expect(policyDecisionProblem(s, oncall, T0 + 5 * MIN)).toMatch(/allowed now: alice, or a member of @release$/);
    expect(inQueueOf(s, 'sso:otto', T0 + 5 * MIN, ['oncall'])).toBe(false);
    expect(policyDecisionProblem(s, oncall, T0 + 11 * MIN)).toBeUndefined();
    expect(inQueueOf(s, 'sso:otto', T0 + 11 * MIN, ['oncall'])).toBe(true);
  });

  test('a group member may hand the request on, and then no longer decides through the group', () => {
    const s = stateFor(releaseBySignIn);
    const from = { from: 'sso:olivia', fromGroups: ['release'], to: 'dan' };
    expect(delegationProblem(s, { from: 'sso:rita', fromGroups: ['readers'], to: 'dan' }, T0)).toMatch(
      /sso:rita is not an allowed approver .* so they cannot hand it on; allowed now: alice, or a member of @release/,
    );
    expect(delegationProblem(s, from, T0)).toBeUndefined();
    const handed = applyDelegation(s, from, T0);
    expect(policyDecisionProblem(handed, { decision: 'approved', decidedBy: 'dan' }, T0 + MIN)).toBeUndefined();
    expect(
      policyDecisionProblem(
        handed,
        { decision: 'approved', decidedBy: 'sso:olivia', decidedByGroups: ['release'] },
        T0 + MIN,
      ),
    ).toBe('sso:olivia handed approval request req-1 to dan, who decides instead');
  });

  test('a token scope is a group by name: @operator with an empty operator group lets any operator decide', () => {
    const s = stateFor({
      groups: { operator: [] },
      policies: [{ toolClass: 'shell', approvers: ['@operator'], expireAfterMs: MIN }],
    });
    const operator = approverGroupsOf({ tokenId: 't1', name: 'ci-bot', scope: 'operator', org: 'default' });
    const service = approverGroupsOf({ tokenId: 't2', name: 'svc', scope: 'service', org: 'default' });
    expect(operator).toEqual(['operator']);
    expect(
      policyDecisionProblem(s, { decision: 'approved', decidedBy: 'ci-bot', decidedByGroups: operator }, T0),
    ).toBeUndefined();
    expect(policyDecisionProblem(s, { decision: 'approved', decidedBy: 'svc', decidedByGroups: service }, T0)).toMatch(
      /allowed now: a member of @operator$/,
    );
    expect(
      approverGroupsOf({
        tokenId: 's',
        name: 'sso:olivia',
        scope: 'operator',
        org: 'default',
        groups: ['release', 'operator'],
      }),
    ).toEqual(['release', 'operator']);
  });

  test('requests opened before groups matched (no groups in the resolved policy) judge by name only', () => {
    const s = stateFor(releaseBySignIn);
    const legacy: ApprovalWaitState = {
      ...s,
      policy: { ...s.policy, approverGroups: undefined, escalateToGroups: undefined },
    };
    expect(
      policyDecisionProblem(
        legacy,
        { decision: 'approved', decidedBy: 'sso:olivia', decidedByGroups: ['release'] },
        T0,
      ),
    ).toMatch(/is not an allowed approver .* allowed now: alice$/);
  });
});

describe('approval groups in the configuration', () => {
  test('an empty group is one filled at sign-in: no quorum check against its listed people; a listed group keeps it', () => {
    expect(ApprovalsConfigSchema.safeParse(releaseBySignIn).success).toBe(true);
    const listed = ApprovalsConfigSchema.safeParse({
      groups: { release: ['alice'] },
      policies: [{ toolClass: 'shell', approvers: ['@release'], quorum: 2, expireAfterMs: MIN }],
    });
    expect(listed.error?.issues.map((i) => i.message)).toEqual([
      'quorum 2 is larger than the 1 approver who exist (alice)',
    ]);
    // An unknown group is still refused.
    const unknown = ApprovalsConfigSchema.safeParse({
      groups: { release: [] },
      policies: [{ toolClass: 'shell', approvers: ['@ops'], expireAfterMs: MIN }],
    });
    expect(unknown.error?.issues.map((i) => i.message)).toEqual([
      'unknown approver group @ops; known groups: @release',
    ]);
  });

  test('the resolved policy carries the groups of its approvers, escalation and expiry window', () => {
    const policy = resolveApprovalPolicy('shell_execute', [
      {
        origin: 'agent a',
        config: ApprovalsConfigSchema.parse({
          groups: { release: ['alice'], oncall: [], boss: [] },
          policies: [
            {
              toolClass: 'shell',
              approvers: ['@release', 'carol'],
              escalate: { afterMs: MIN, to: ['@oncall'] },
              expireAfterMs: MIN,
              onExpiry: { escalateTo: ['@boss'], extendMs: MIN },
            },
          ],
        }),
      },
    ])!;
    expect(policy).toMatchObject({
      approvers: ['alice', 'carol'],
      approverGroups: ['release'],
      escalateTo: [],
      escalateToGroups: ['oncall'],
      onExpiry: { then: 'escalate', to: [], toGroups: ['boss'] },
    });
  });
});

describe('the groups claim', () => {
  const options = (groupsClaim?: string): SsoOptions => ({
    issuer: 'http://127.0.0.1:1',
    clientId: 'c',
    roleClaim: 'roles',
    roles: { operator: ['ops'] },
    ...(groupsClaim ? { groupsClaim } : {}),
  });

  test('read from `groups` by default or the configured claim; strings split; non-strings, duplicates and oversized values dropped', () => {
    expect(groupsFromClaims(options(), { groups: ['release', 'release', 7, 'x'.repeat(201), ''] })).toEqual([
      'release',
    ]);
    expect(groupsFromClaims(options('teams'), { groups: ['release'], teams: 'sre, release' })).toEqual([
      'sre',
      'release',
    ]);
    expect(groupsFromClaims(options(), {})).toEqual([]);
    expect(groupsFromClaims(options(), { groups: Array.from({ length: 500 }, (_, i) => `g${i}`) })).toHaveLength(200);
  });
});
