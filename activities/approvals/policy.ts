/**
 * Approval policies: who decides a risky tool call, how many of them, when they are reminded, when the
 * request escalates and when it expires. Configured per agent (`config.approvals`) and per
 * organisation (`APPROVALS.json` in its folder), each policy for some tools or a tool class; validated
 * by zod like the rest of the agent configuration, so an unknown group or an unreachable quorum is
 * refused when the configuration is saved, not discovered while a request waits.
 */
import { z } from 'zod';
import { APPROVER_NAME_MAX_CHARS, type ResolvedApprovalPolicy } from '../../workflows/rules/approval-wait-rules';

/** Tool classes a policy can name instead of tool names. */
export const TOOL_CLASSES = {
  /** Commands run through the shell tool (git pushes among them). */
  shell: ['shell_execute'],
  /** Questions the agent asks a human. */
  question: ['request_user_approval'],
  /** Writing files in the workspace. */
  files: ['file_write'],
} as const satisfies Record<string, readonly string[]>;
export type ToolClass = keyof typeof TOOL_CLASSES | 'any';

/** A longest wait worth configuring: past a month a request is forgotten, whatever the policy says. */
export const APPROVAL_WAIT_MAX_MS = 31 * 24 * 3_600_000;
/** Groups and approver lists are lists of people, not directories. */
export const APPROVERS_MAX = 100;
/** A reminder more often than this is noise, and each one is a notification and a history event. */
export const REMIND_EVERY_MIN_MS = 1_000;

const GROUP_NAME = /^[a-z0-9][a-z0-9_.-]{0,62}$/;
const person = z.string().trim().min(1).max(APPROVER_NAME_MAX_CHARS);
/** A person's name, or `@group` for a group of the same configuration. */
const approverRef = person.refine((v) => !v.startsWith('@') || GROUP_NAME.test(v.slice(1)), {
  message: "a group reference is '@' and 1-63 lowercase letters, digits, '.', '_' or '-'",
});
const duration = z.number().int().positive().max(APPROVAL_WAIT_MAX_MS);

export const ApprovalPolicySchema = z
  .object({
    /** For messages and the audit trail; default: the tools or tool class it covers. */
    name: z.string().trim().min(1).max(120).optional(),
    /** Tool names this policy covers. */
    tools: z.array(z.string().min(1).max(100)).min(1).max(50).optional(),
    /** Or a class of tools; `any` covers every call that needs approval. */
    toolClass: z.enum(['shell', 'question', 'files', 'any']).optional(),
    /** Who may decide: names (an API token's name, `sso:<subject>` for someone signed in through OIDC) or `@group`. */
    approvers: z.array(approverRef).min(1).max(APPROVERS_MAX),
    /** Distinct approvers needed (default 1). */
    quorum: z.number().int().min(1).max(APPROVERS_MAX).optional(),
    /** Whether the task's creator may be one of them (default true). */
    creatorCounts: z.boolean().optional(),
    /** `any` (default): one rejection ends the request; `quorum`: it takes as many rejections as approvals. */
    rejection: z.enum(['any', 'quorum']).optional(),
    remind: z
      .object({
        afterMs: duration,
        everyMs: z.number().int().min(REMIND_EVERY_MIN_MS).max(APPROVAL_WAIT_MAX_MS).optional(),
        webhookUrl: z.url({ protocol: /^https?$/ }).optional(),
      })
      .strict()
      .optional(),
    escalate: z
      .object({ afterMs: duration, to: z.array(approverRef).min(1).max(APPROVERS_MAX) })
      .strict()
      .optional(),
    expireAfterMs: duration,
    /** After expiry: `ask-again` (default; the model is told and may ask again), `block` (the task moves to blocked), or one more window for other people. */
    onExpiry: z
      .union([
        z.literal('ask-again'),
        z.literal('block'),
        z.object({ escalateTo: z.array(approverRef).min(1).max(APPROVERS_MAX), extendMs: duration }).strict(),
      ])
      .optional(),
  })
  .strict()
  .refine((p) => (p.tools === undefined) !== (p.toolClass === undefined), {
    message: 'a policy covers either `tools` or a `toolClass`, exactly one of them',
  });
export type ApprovalPolicyConfig = z.infer<typeof ApprovalPolicySchema>;

export const ApprovalsConfigSchema = z
  .object({
    /**
     * Named groups of people, referenced as `@name` by this configuration's policies. A group also
     * takes in whoever signs in with its name in their OIDC groups claim, or uses a token whose scope
     * is its name; an empty list leaves its membership to those alone.
     */
    groups: z
      .record(
        z.string().regex(GROUP_NAME, "a group name is 1-63 lowercase letters, digits, '.', '_' or '-'"),
        z.array(person).max(APPROVERS_MAX),
      )
      .optional(),
    /** The first policy that covers a tool applies. */
    policies: z.array(ApprovalPolicySchema).max(50),
  })
  .strict()
  .superRefine((config, ctx) => {
    for (const problem of approvalsConfigProblems(config))
      ctx.addIssue({ code: 'custom', message: problem.message, path: problem.path });
  });
export type ApprovalsConfig = z.infer<typeof ApprovalsConfigSchema>;

/** Unknown groups, and quorums larger than the people who could ever decide. */
function approvalsConfigProblems(config: {
  groups?: Record<string, string[]>;
  policies: ApprovalPolicyConfig[];
}): Array<{ message: string; path: (string | number)[] }> {
  const problems: Array<{ message: string; path: (string | number)[] }> = [];
  const groups = config.groups ?? {};
  config.policies.forEach((policy, i) => {
    const refs: Array<[string[], (string | number)[]]> = [[policy.approvers, ['policies', i, 'approvers']]];
    if (policy.escalate) refs.push([policy.escalate.to, ['policies', i, 'escalate', 'to']]);
    if (typeof policy.onExpiry === 'object')
      refs.push([policy.onExpiry.escalateTo, ['policies', i, 'onExpiry', 'escalateTo']]);
    let unknownGroup = false;
    for (const [list, path] of refs) {
      for (const ref of list) {
        if (ref.startsWith('@') && !Object.hasOwn(groups, ref.slice(1))) {
          unknownGroup = true;
          problems.push({
            path,
            message: `unknown approver group ${ref}; known groups: ${
              Object.keys(groups)
                .map((g) => `@${g}`)
                .join(', ') || 'none (define them under approvals.groups)'
            }`,
          });
        }
      }
    }
    const deciders = [...policy.approvers, ...(policy.escalate?.to ?? [])];
    const people = new Set(expand(deciders, groups));
    const quorum = policy.quorum ?? 1;
    // A group listed empty is filled at sign-in: how many people it has is not known here.
    const signInGroup = deciders.some((r) => r.startsWith('@') && groups[r.slice(1)]?.length === 0);
    // With an unknown group the count of people means nothing: that group's problem is the one to fix.
    if (!unknownGroup && !signInGroup && quorum > people.size) {
      problems.push({
        path: ['policies', i, 'quorum'],
        message: `quorum ${quorum} is larger than the ${people.size} approver${people.size === 1 ? '' : 's'} who exist (${[...people].join(', ')})`,
      });
    }
  });
  return problems;
}

function expand(refs: readonly string[], groups: Record<string, string[]>): string[] {
  return [...new Set(refs.flatMap((r) => (r.startsWith('@') ? (groups[r.slice(1)] ?? []) : [r.trim()])))];
}

/** The group names among `refs` (`@release` → `release`). */
const groupsIn = (refs: readonly string[]): string[] => [
  ...new Set(refs.filter((r) => r.startsWith('@')).map((r) => r.slice(1))),
];

const label = (refs: readonly string[]): string => refs.map((r) => (r.startsWith('@') ? r : `@${r}`)).join(', ');

function covers(policy: ApprovalPolicyConfig, tool: string): boolean {
  if (policy.tools) return policy.tools.includes(tool);
  if (policy.toolClass === 'any') return true;
  return (TOOL_CLASSES[policy.toolClass as keyof typeof TOOL_CLASSES] as readonly string[]).includes(tool);
}

export type PolicySources = Array<{ origin: string; config: ApprovalsConfig | undefined }>;

function coveringPolicy(
  tool: string,
  sources: PolicySources,
): { origin: string; config: ApprovalsConfig; policy: ApprovalPolicyConfig } | undefined {
  for (const { origin, config } of sources) {
    const policy = config?.policies.find((p) => covers(p, tool));
    if (config && policy) return { origin, config, policy };
  }
  return undefined;
}

/** The webhook of the policy that covers `tool` now (read when a reminder goes out, never carried in history). */
export function webhookFor(tool: string, sources: PolicySources): string | undefined {
  return coveringPolicy(tool, sources)?.policy.remind?.webhookUrl;
}

/**
 * The policy for a call of `tool`: the agent's first covering policy, else its organisation's, else
 * none (the request waits for one decision until the task's `approvalTimeoutMs`, as without policies).
 */
export function resolveApprovalPolicy(tool: string, sources: PolicySources): ResolvedApprovalPolicy | undefined {
  const found = coveringPolicy(tool, sources);
  if (!found) return undefined;
  const { origin, config, policy: p } = found;
  {
    const groups = config.groups ?? {};
    const onExpiry: ResolvedApprovalPolicy['onExpiry'] =
      typeof p.onExpiry === 'object'
        ? {
            then: 'escalate',
            to: expand(p.onExpiry.escalateTo, groups),
            toLabel: label(p.onExpiry.escalateTo),
            toGroups: groupsIn(p.onExpiry.escalateTo),
            extendMs: p.onExpiry.extendMs,
          }
        : { then: p.onExpiry ?? 'ask-again' };
    return {
      name: `${origin} ${p.name ?? (p.tools ? p.tools.join('+') : `class ${p.toolClass}`)}`,
      approvers: expand(p.approvers, groups),
      approversLabel: label(p.approvers),
      approverGroups: groupsIn(p.approvers),
      quorum: p.quorum ?? 1,
      creatorCounts: p.creatorCounts ?? true,
      rejection: p.rejection ?? 'any',
      ...(p.remind
        ? { remindAfterMs: p.remind.afterMs, ...(p.remind.everyMs ? { remindEveryMs: p.remind.everyMs } : {}) }
        : {}),
      webhook: p.remind?.webhookUrl !== undefined,
      ...(p.escalate ? { escalateAfterMs: p.escalate.afterMs } : {}),
      escalateTo: expand(p.escalate?.to ?? [], groups),
      escalateToLabel: label(p.escalate?.to ?? []),
      escalateToGroups: groupsIn(p.escalate?.to ?? []),
      expireAfterMs: p.expireAfterMs,
      onExpiry,
    };
  }
}
