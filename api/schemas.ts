/**
 * The HTTP API's request and response schemas, in zod: they validate requests and generate
 * `/v1/openapi.json`. Each mirrors a type of the contract (workflows/contract.ts) or of the agent store
 * (activities/store/agents.ts); the `Same<…>` checks at the bottom make the build fail when the two drift.
 */
import { z } from 'zod';
import { AGENT_ID_PATTERN, AgentConfigSchema } from '../activities/store/agents';
import { ORG_NAME_PATTERN } from '../activities/store/organisations';
import { SKILL_NAME_PATTERN } from '../activities/store/skills';
import { MAILBOX_TEXT_MAX_CHARS } from '../workflows/rules/mailbox';
import {
  TASK_PRIORITIES,
  type PendingApproval,
  type RecordedApprovalDecision,
  type TaskStatus,
  type UsageTotals,
} from '../workflows/contract';
import { TASK_MAX_DEPENDENCIES } from '../workflows/rules/task-graph';
import type { StartTaskOptions } from '../client';
import { TASK_STATES } from '../workflows/rules/task-state';
import { TOKEN_SCOPES } from './tokens';

/** Task ids become workflow ids (`task-{id}`) and URL segments: printable, no slashes, bounded. */
const TASK_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
/** A task's title is shown in lists and the Temporal UI summary. */
const TITLE_MAX_CHARS = 500;
/** What a person writes in a comment, feedback or description: generous, but not a file upload. */
const TEXT_MAX_CHARS = 100_000;
/** Identity files are prompt text: 200K characters is far beyond any useful prompt. */
const IDENTITY_FILE_MAX_CHARS = 200_000;
/** One week: longer waits belong in a schedule, not a blocked tool call. */
const APPROVAL_TIMEOUT_MAX_MS = 7 * 24 * 3600 * 1000;

export const TaskIdParams = z
  .object({ taskId: z.string().regex(TASK_ID_PATTERN, 'a task id is 1-128 letters, digits, ".", "_", ":" or "-"') })
  .strict();
export const AgentIdParams = z
  .object({ agentId: z.string().regex(AGENT_ID_PATTERN, "an agent id is 1-63 lowercase letters, digits, '-' or '_'") })
  .strict();
export const RequestIdParams = z.object({ requestId: z.string().min(1).max(300) }).strict();

/** The store's own schema: the API accepts every agent setting the CLI's agent.json does (org, skills, permissions…). */
export { AgentConfigSchema };

const identityFile = z.string().max(IDENTITY_FILE_MAX_CHARS).default('');
export const AgentUpsertBody = z
  .object({
    name: z.string().min(1).max(200),
    description: z.string().max(TEXT_MAX_CHARS).optional(),
    files: z
      .object({ soul: identityFile, agents: identityFile, heartbeat: identityFile, tools: identityFile })
      .strict(),
    config: AgentConfigSchema.optional(),
    /** Absent: `<AGENTS_WORKSPACE_ROOT>/<org>/<agentId>` (see docs/configuration.md for where a folder may lie). */
    workspaceDir: z.string().min(1).optional(),
  })
  .strict()
  .refine((a) => a.files.soul.trim() !== '' || a.files.agents.trim() !== '', {
    message: 'an agent needs SOUL.md or AGENTS.md text (files.soul or files.agents)',
    path: ['files'],
  });

export const AgentSchema = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string(),
  contentHash: z.string(),
  config: AgentConfigSchema,
  workspaceDir: z.string(),
  createdAt: z.string(),
  updatedAt: z.string(),
});
export const AgentWithFilesSchema = AgentSchema.extend({
  files: z.object({ soul: z.string(), agents: z.string(), heartbeat: z.string(), tools: z.string() }),
});

const taskIdField = TaskIdParams.shape.taskId;
/** Everything `AgentsClient.startTask` takes except `createdBy` (the token's name). */
export const StartTaskBody = z
  .object({
    agentId: z
      .string({ error: 'a task needs agentId, the id of an existing agent' })
      .regex(AGENT_ID_PATTERN, "an agent id is 1-63 lowercase letters, digits, '-' or '_'"),
    title: z
      .string({ error: 'a task needs a title' })
      .trim()
      .min(1, 'a task needs a title')
      .max(TITLE_MAX_CHARS, `a title is at most ${TITLE_MAX_CHARS} characters`),
    description: z.string().max(TEXT_MAX_CHARS).optional(),
    taskId: taskIdField.optional(),
    priority: z.enum(TASK_PRIORITIES, { error: `priority must be one of ${TASK_PRIORITIES.join(', ')}` }).optional(),
    approvalTimeoutMs: z.number().int().positive().max(APPROVAL_TIMEOUT_MAX_MS).optional(),
    costBudgetUsd: z
      .number({ error: 'costBudgetUsd must be a positive number of US dollars' })
      .positive('costBudgetUsd must be a positive number of US dollars')
      .optional(),
    parentTaskId: taskIdField.optional(),
    dependsOn: z
      .array(taskIdField)
      .max(TASK_MAX_DEPENDENCIES, `a task may depend on at most ${TASK_MAX_DEPENDENCIES} tasks`)
      .optional(),
  })
  .strict();
export const StartTaskResponse = z.object({ taskId: z.string(), workflowId: z.string() });

export const UsageTotalsSchema = z.object({
  inputTokens: z.number(),
  outputTokens: z.number(),
  cacheReadTokens: z.number(),
  cacheWriteTokens: z.number(),
  costUsd: z.number(),
});
export const UsageResponse = UsageTotalsSchema.extend({ calls: z.number() });
export const UsageQuery = z
  .object({
    since: z.iso
      .datetime({ offset: true, message: 'since must be an ISO 8601 date-time, e.g. 2026-12-01T00:00:00Z' })
      .optional(),
  })
  .strict();

const ApprovalVoteSchema = z.object({ by: z.string(), atMs: z.number(), comment: z.string().optional() });
/** A policy as a request was opened with it (see activities/approvals/policy.ts). */
export const ResolvedApprovalPolicySchema = z.object({
  name: z.string(),
  approvers: z.array(z.string()),
  approversLabel: z.string(),
  quorum: z.number(),
  creatorCounts: z.boolean(),
  rejection: z.enum(['any', 'quorum']),
  remindAfterMs: z.number().optional(),
  remindEveryMs: z.number().optional(),
  webhook: z.boolean(),
  escalateAfterMs: z.number().optional(),
  escalateTo: z.array(z.string()),
  escalateToLabel: z.string(),
  expireAfterMs: z.number(),
  onExpiry: z.union([
    z.object({ then: z.literal('ask-again') }),
    z.object({ then: z.literal('block') }),
    z.object({ then: z.literal('escalate'), to: z.array(z.string()), toLabel: z.string(), extendMs: z.number() }),
  ]),
});
/** An approval wait under a policy: votes, delegations, reminders, escalation so far. */
export const ApprovalWaitStateSchema = z.object({
  requestId: z.string(),
  policy: ResolvedApprovalPolicySchema,
  creator: z.string().optional(),
  requestedAtMs: z.number(),
  approvals: z.array(ApprovalVoteSchema),
  rejections: z.array(ApprovalVoteSchema),
  delegations: z.array(
    z.object({ from: z.string(), to: z.string(), atMs: z.number(), comment: z.string().optional() }),
  ),
  remindersSent: z.number(),
  escalated: z.boolean(),
  extended: z.boolean(),
  outcome: z.enum(['approved', 'rejected', 'expired']).optional(),
});
export const PendingApprovalSchema = z.object({
  requestId: z.string(),
  tool: z.string(),
  summary: z.string(),
  requestedAt: z.string(),
  wait: ApprovalWaitStateSchema.optional(),
});
export const BudgetReportSchema = z.object({
  limitUsd: z.number().nullable(),
  spentUsd: z.number(),
  held: z.boolean(),
  nodes: z.array(
    z.object({
      workflowId: z.string(),
      spentUsd: z.number(),
      limitUsd: z.number().nullable(),
      state: z.enum(['running', 'held', 'completed', 'failed', 'stopped']),
    }),
  ),
});
export const TaskStatusSchema = z.object({
  taskId: z.string(),
  agentId: z.string(),
  state: z.enum(TASK_STATES),
  round: z.number(),
  iteration: z.number(),
  phase: z.enum([
    'starting',
    'thinking',
    'running-tool',
    'awaiting-approval',
    'awaiting-review',
    'awaiting-budget',
    'paused',
    'reflecting',
    'finished',
  ]),
  pendingApprovals: z.array(PendingApprovalSchema),
  usage: UsageTotalsSchema,
  lastError: z.string().optional(),
  submission: z.string().optional(),
  budget: BudgetReportSchema.optional(),
  roundUsage: UsageTotalsSchema.optional(),
});

export const TaskEventSchema = z.object({
  seq: z.number(),
  type: z.string(),
  data: z.record(z.string(), z.unknown()),
  createdAt: z.string(),
});
export const EventsQuery = z.object({ after: z.coerce.number().int().nonnegative().optional() }).strict();
export const EventsResponse = z.object({ events: z.array(TaskEventSchema) });

export const CommentBody = z
  .object({ text: z.string().trim().min(1, 'a comment needs text').max(TEXT_MAX_CHARS) })
  .strict();
export const PauseBody = z.object({ reason: z.string().max(TEXT_MAX_CHARS).optional() }).strict();
export const BudgetDecisionBody = z
  .object({
    decision: z.enum(['raise', 'stop']),
    newLimitUsd: z.number().positive().finite().optional(),
  })
  .strict()
  .refine((b) => b.decision === 'stop' || b.newLimitUsd !== undefined, {
    message: 'a raise needs newLimitUsd (the new limit in USD, above what the task has spent)',
    path: ['newLimitUsd'],
  });
export const RecordedBudgetDecisionSchema = z.object({
  decision: z.enum(['raise', 'stop']),
  newLimitUsd: z.number().optional(),
  decidedBy: z.string().optional(),
  spentUsd: z.number(),
  decidedAt: z.string(),
});
export const ReviewBody = z
  .object({ decision: z.enum(['accept', 'revise']), feedback: z.string().max(TEXT_MAX_CHARS).optional() })
  .strict()
  .refine((r) => r.decision === 'accept' || (r.feedback ?? '').trim() !== '', {
    message: 'a revision needs feedback: say what to change',
    path: ['feedback'],
  });
export const DecideApprovalBody = z
  .object({ decision: z.enum(['approved', 'rejected']), comment: z.string().max(TEXT_MAX_CHARS).optional() })
  .strict();
export const RecordedApprovalSchema = z.object({
  requestId: z.string(),
  decision: z.enum(['approved', 'rejected']),
  comment: z.string().optional(),
  decidedBy: z.string().optional(),
  decidedByGroups: z.array(z.string()).optional(),
  tool: z.string(),
  decidedAt: z.string(),
  waitingFor: z.string().optional(),
});
export const ApprovalListItem = z.object({
  requestId: z.string(),
  taskId: z.string().nullable(),
  agentId: z.string(),
  workflowId: z.string(),
  tool: z.string(),
  summary: z.string(),
  args: z.unknown(),
  requestedAt: z.string(),
  policy: z.string().nullable().describe('The approval policy the request follows; null without one'),
  waitingFor: z
    .string()
    .nullable()
    .describe('What the request waits for, e.g. "1 of 2 approvals; escalates to @oncall in 14 min; expires in 58 min"'),
  waitingOn: z.array(z.string()).describe('Who may decide now and has not (empty without a policy)'),
});
export const ApprovalsQuery = z.object({ for: z.string().trim().min(1).max(200).optional() }).strict();
export const ApprovalTrailResponse = z.object({
  requestId: z.string(),
  status: z.string(),
  summary: z.string(),
  taskId: z.string().nullable(),
  waitingFor: z.string().nullable(),
  events: z.array(
    z.object({
      kind: z.string(),
      actor: z.string().nullable(),
      targets: z.array(z.string()),
      comment: z.string().nullable(),
      at: z.string(),
    }),
  ),
});
export const DelegateApprovalBody = z
  .object({
    to: z.string().trim().min(1, 'name the colleague who gets the request').max(200),
    comment: z.string().max(TEXT_MAX_CHARS).optional(),
  })
  .strict();
export const RecordedDelegationSchema = z.object({
  requestId: z.string(),
  from: z.string(),
  to: z.string(),
  comment: z.string().optional(),
  delegatedAt: z.string(),
  waitingFor: z.string(),
});
export const ApprovalsResponse = z.object({ approvals: z.array(ApprovalListItem) });
/** Ids marked read in one request; a relay marks what it delivered in batches of at most this many. */
export const NOTIFICATIONS_MARK_MAX = 500;
export const NotificationsQuery = z
  .object({
    agentId: z.string().regex(AGENT_ID_PATTERN, "an agent id is 1-63 lowercase letters, digits, '-' or '_'").optional(),
    unread: z.enum(['true', 'false'], { message: 'unread must be true or false' }).optional(),
  })
  .strict();
export const NotificationSchema = z.object({
  id: z.string(),
  agentId: z.string(),
  taskId: z.string().nullable(),
  kind: z.enum(['notification', 'approval_request']),
  title: z.string(),
  body: z.string(),
  priority: z.enum(['low', 'normal', 'high', 'urgent']),
  options: z.array(z.string()).nullable(),
  createdAt: z.string(),
  readAt: z.string().nullable(),
  readBy: z.string().nullable(),
});
export const NotificationsResponse = z.object({ notifications: z.array(NotificationSchema) });
export const MarkReadBody = z
  .object({
    ids: z
      .array(z.string().min(1).max(300))
      .min(1, 'name at least one notification id')
      .max(NOTIFICATIONS_MARK_MAX, `at most ${NOTIFICATIONS_MARK_MAX} ids per request`),
  })
  .strict();
export const MarkReadResponse = z.object({ marked: z.number().int() });
export const ChatItemParams = z
  .object({ agentId: AgentIdParams.shape.agentId, itemId: z.string().min(1).max(300) })
  .strict();
export const ChatBody = z
  .object({
    text: z
      .string()
      .trim()
      .min(1, 'a chat message needs text')
      .max(MAILBOX_TEXT_MAX_CHARS, `a chat message is at most ${MAILBOX_TEXT_MAX_CHARS} characters`),
    channel: z.string().min(1).max(300).optional(),
    from: z
      .object({ type: z.enum(['human', 'agent', 'system']), id: z.string().min(1).max(300) })
      .strict()
      .optional(),
  })
  .strict();
export const MailboxResponse = z.object({
  agentId: z.string(),
  attention: z.enum(['idle', 'focused']),
  focus: z.object({ itemId: z.string(), kind: z.string(), since: z.string() }).optional(),
  items: z.array(
    z.object({
      itemId: z.string(),
      kind: z.string(),
      from: z.object({ type: z.string(), id: z.string() }),
      channel: z.string(),
      priority: z.number(),
      status: z.string(),
      decision: z.string(),
      reason: z.string(),
      preview: z.string(),
      mergedCount: z.number(),
      receivedAt: z.string(),
      thread: z.string(),
      replyTo: z.string().optional(),
      result: z.string().optional(),
      runId: z.string().optional(),
    }),
  ),
  counters: z.object({ delivered: z.number(), completed: z.number(), merged: z.number(), preempted: z.number() }),
});
// ---- organisations, skills, announcements ---------------------------------------------------------
// Shapes only: the limits (document sizes, handles, skill names, counts) are the store's own checks
// (`organisationProblems`, `skillProblems`), shared with the folder readers and answered as 400s.

const ORG_NAME_MESSAGE = "an organisation name is 1-63 lowercase letters, digits, '-' or '_'";
export const OrgParams = z.object({ org: z.string().regex(ORG_NAME_PATTERN, ORG_NAME_MESSAGE) }).strict();
export const SkillNameParams = z
  .object({ name: z.string().regex(SKILL_NAME_PATTERN, "a skill name is 1-64 lowercase letters, digits, '-' or '_'") })
  .strict();
const SkillBody = z.object({ description: z.string(), category: z.string().optional(), body: z.string() }).strict();
export const SharedSkillBody = SkillBody;
export const OrganisationUpsertBody = z
  .object({
    context: z.string().optional(),
    announcements: z.string().optional(),
    /** `name` absent: the profile's first `# Heading`, else the handle. */
    users: z
      .array(z.object({ handle: z.string(), name: z.string().optional(), profile: z.string() }).strict())
      .optional(),
    skills: z.array(SkillBody.extend({ name: z.string() }).strict()).optional(),
  })
  .strict();
const SkillListingSchema = z.object({ name: z.string(), description: z.string(), category: z.string() });
export const OrganisationSchema = z.object({
  name: z.string(),
  context: z.string(),
  announcements: z.string(),
  users: z.array(z.object({ handle: z.string(), name: z.string() })),
  skills: z.array(SkillListingSchema),
  updatedAt: z.string(),
});
export const SkillSchema = SkillListingSchema.extend({ scope: z.string() });
export const SkillsQuery = z.object({ org: z.string().regex(ORG_NAME_PATTERN, ORG_NAME_MESSAGE).optional() }).strict();
export const SkillsResponse = z.object({ skills: z.array(SkillSchema) });
export const AgentSkillsResponse = z.object({ skills: z.array(SkillSchema.extend({ bound: z.boolean() })) });
export const AnnouncementBody = z
  .object({
    text: z.string(),
    org: z.string().regex(ORG_NAME_PATTERN, ORG_NAME_MESSAGE).optional(),
    expiresAt: z.iso
      .datetime({ offset: true, message: 'expiresAt must be an ISO 8601 date-time, e.g. 2026-12-01T18:00:00Z' })
      .optional(),
  })
  .strict();
export const AnnouncementIdResponse = z.object({ id: z.string() });
export const AnnouncementsQuery = SkillsQuery;
export const AnnouncementsResponse = z.object({
  announcements: z.array(
    z.object({
      id: z.string(),
      text: z.string(),
      org: z.string().nullable(),
      createdAt: z.string(),
      expiresAt: z.string().nullable(),
    }),
  ),
});

export const AcceptedResponse = z.object({ ok: z.literal(true) });
export const CommentResponse = z.object({ ok: z.literal(true), itemId: z.string(), mentioned: z.array(z.string()) });
export const ErrorResponse = z.object({ error: z.object({ code: z.string(), message: z.string() }) });
export const TokenScopeSchema = z.enum(TOKEN_SCOPES);

// ---- drift checks: a schema that no longer matches its contract type fails `tsc` --------------------
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const drift: [
  Same<z.infer<typeof UsageTotalsSchema>, UsageTotals>,
  Same<z.infer<typeof PendingApprovalSchema>, PendingApproval>,
  Same<z.infer<typeof TaskStatusSchema>, TaskStatus>,
  Same<z.infer<typeof RecordedApprovalSchema>, RecordedApprovalDecision>,
  // The HTTP API takes everything the client's startTask does (createdBy is the token's name).
  Same<keyof z.infer<typeof StartTaskBody>, Exclude<keyof StartTaskOptions, 'createdBy'>>,
] = [true, true, true, true, true];
void drift;
