/**
 * The Temporal contract in a language-neutral form: zod schemas of the inputs, results, queries,
 * signals and updates that a Python, Go or Java service uses to drive tasks and agents with its own
 * Temporal SDK, checked against the TypeScript contract types (`tsc` fails when they drift), and the
 * JSON Schema document generated from them (committed as docs/temporal-contract.schema.json, served
 * at `/v1/temporal-contract.json`).
 *
 * Covered: the two workflows a client starts (`taskWorkflow`, `agentWorkflow`). The child workflows
 * (rounds, chat runs, sub-agents, reflection) and the scheduled ones are started by this product only.
 */
import path from 'node:path';
import { z } from 'zod';
import type { AgentWorkflowInput, DeliverInput, DeliverResult, MailboxView } from '../workflows/agent-contract';
import {
  DEFAULT_NAMESPACE,
  DEFAULT_TASK_QUEUE,
  TASK_PRIORITIES,
  type ApprovalDecision,
  type RecordedApprovalDecision,
  type ReviewDecision,
  type TaskApprovalDecision,
  type TaskCarry,
  type ForkInput,
  type TaskComment,
  type TaskStatus,
  type TaskWorkflowInput,
  type TaskWorkflowResult,
} from '../workflows/contract';
import { TASK_STATES } from '../workflows/rules/task-state';
import type { BudgetDecision, BudgetReport, RecordedBudgetDecision } from '../workflows/subagent-contract';
import type { ApprovalDelegationRequest, RecordedApprovalDelegation } from '../workflows/approval-contract';
import {
  BudgetReportSchema,
  RecordedApprovalSchema,
  RecordedBudgetDecisionSchema,
  TaskStatusSchema,
  UsageTotalsSchema,
} from './schemas';

const MAILBOX_ITEM_KINDS = ['chat', 'message', 'comment', 'mention', 'notification', 'task'] as const;
const MAILBOX_PRIORITY_NAMES = ['critical', 'high', 'normal', 'low', 'background'] as const;
const MAILBOX_ITEM_STATUSES = ['queued', 'processing', 'completed', 'merged', 'deferred', 'dropped'] as const;
const MAILBOX_TRIAGE_DECISIONS = ['pick', 'continue', 'preempt', 'merge', 'wait'] as const;

export const TaskWorkflowInputSchema = z
  .object({
    taskId: z
      .string()
      .optional()
      .describe('The task id; the workflow id is `task-{taskId}`. Absent (a Schedule): derived from the workflow id'),
    agentId: z
      .string()
      .describe('An existing agent; an unknown one fails the workflow with the non-retryable `UnknownAgent` error'),
    title: z
      .string()
      .optional()
      .describe('Needed to create the task; may be left out when the task row already exists'),
    description: z.string().optional(),
    priority: z.enum(TASK_PRIORITIES).optional(),
    createdBy: z.string().optional(),
    approvalTimeoutMs: z.number().optional().describe('How long an approval request waits before it times out'),
    costBudgetUsd: z.number().optional().describe("A cost budget for the task's whole tree of sub-agents"),
    carry: z.custom<TaskCarry>().optional().describe('Internal: state carried across continue-as-new. Never set it'),
    restart: z
      .object({ kind: z.enum(['retry', 'rerun']), afterRound: z.number() })
      .optional()
      .describe('Internal: set by `task retry` / `task rerun`'),
    fork: z
      .custom<ForkInput>()
      .optional()
      .describe(
        'A fork of a recorded task: { sourceTaskId, round?, atStep, overrides?, allowTools? } (docs/fork-and-eval.md); set the ForkOf search attribute too',
      ),
  })
  // The workflow refuses any other field (TASK_INPUT_FIELDS in workflows/rules/task-input.ts).
  .strict()
  .describe('taskWorkflow input');

export const TaskWorkflowResultSchema = z.object({
  taskId: z.string(),
  state: z.enum(TASK_STATES),
  rounds: z.number(),
  usage: UsageTotalsSchema,
  submission: z.string().optional(),
  error: z.string().optional(),
});

export const ApprovalDecisionSchema = z.object({
  requestId: z.string(),
  decision: z.enum(['approved', 'rejected']),
  comment: z.string().optional(),
  decidedBy: z.string().optional(),
  decidedByGroups: z
    .array(z.string())
    .optional()
    .describe("The approver's groups, as the caller vouches; a policy's `@group` lets its members decide"),
});
export const ReviewDecisionSchema = z.object({
  decision: z.enum(['accept', 'revise']),
  feedback: z.string().optional(),
  decidedBy: z.string().optional(),
});
export const TaskCommentSchema = z.object({
  text: z.string(),
  from: z.string().optional(),
  kind: z.literal('message').optional(),
});
export const PauseSchema = z.object({ reason: z.string().optional() });
export const TaskApprovalDecisionSchema = z.object({
  decision: z.enum(['approve', 'reject']),
  decidedBy: z.string().optional(),
  comment: z.string().optional(),
});
export const ApprovalDelegationSchema = z.object({
  requestId: z.string(),
  from: z.string(),
  fromGroups: z.array(z.string()).optional().describe('The groups of who hands it on, as the caller vouches'),
  to: z.string(),
  comment: z.string().optional(),
});
export const RecordedApprovalDelegationSchema = ApprovalDelegationSchema.extend({
  delegatedAt: z.string(),
  waitingFor: z.string(),
});
export const BudgetDecisionSchema = z.object({
  decision: z.enum(['raise', 'stop']),
  newLimitUsd: z.number().optional(),
  decidedBy: z.string().optional(),
});

export const AgentWorkflowInputSchema = z.object({
  agentId: z.string(),
  carry: z
    .object({ delivered: z.number(), completed: z.number(), merged: z.number(), preempted: z.number() })
    .optional()
    .describe('Internal: counters carried across continue-as-new'),
});
const MailboxItemKindSchema = z.enum(MAILBOX_ITEM_KINDS);
export const DeliverInputSchema = z.object({
  kind: MailboxItemKindSchema,
  from: z.object({ type: z.enum(['human', 'agent', 'system']), id: z.string() }),
  channel: z.string().optional(),
  text: z.string(),
  replyTo: z.string().optional(),
  thread: z.string().optional(),
  taskId: z.string().optional(),
  priority: z.enum(MAILBOX_PRIORITY_NAMES).optional(),
  idempotencyKey: z
    .string()
    .optional()
    .describe(
      "A later delivery to the same agent with the same key stores nothing and answers with the first one's item (replayed)",
    ),
});
export const DeliverResultSchema = z.object({
  itemId: z.string(),
  status: z.enum(['queued', 'merged']),
  mergedInto: z.string().optional(),
  channel: z.string(),
  replayed: z
    .boolean()
    .optional()
    .describe('An earlier delivery with the same idempotencyKey stored this item; this one stored nothing'),
});
export const MailboxViewSchema = z.object({
  agentId: z.string(),
  attention: z.enum(['idle', 'focused']),
  focus: z.object({ itemId: z.string(), kind: MailboxItemKindSchema, since: z.string() }).optional(),
  items: z.array(
    z.object({
      itemId: z.string(),
      kind: MailboxItemKindSchema,
      from: z.object({ type: z.string(), id: z.string() }),
      channel: z.string(),
      priority: z.number(),
      status: z.enum(MAILBOX_ITEM_STATUSES),
      decision: z.enum(MAILBOX_TRIAGE_DECISIONS),
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

// ---- drift checks: a schema that no longer matches its contract type fails `tsc` ----------------
/** Equal types with the same keys (an optional key missing on one side counts as drift). */
type Exact<A, B> = [A] extends [B]
  ? [B] extends [A]
    ? [keyof A] extends [keyof B]
      ? [keyof B] extends [keyof A]
        ? true
        : false
      : false
    : false
  : false;
const drift: [
  Exact<z.infer<typeof TaskWorkflowInputSchema>, TaskWorkflowInput>,
  Exact<z.infer<typeof TaskWorkflowResultSchema>, TaskWorkflowResult>,
  Exact<z.infer<typeof TaskStatusSchema>, TaskStatus>,
  Exact<z.infer<typeof ApprovalDecisionSchema>, ApprovalDecision>,
  Exact<z.infer<typeof RecordedApprovalSchema>, RecordedApprovalDecision>,
  Exact<z.infer<typeof ReviewDecisionSchema>, ReviewDecision>,
  Exact<z.infer<typeof TaskCommentSchema>, TaskComment>,
  Exact<z.infer<typeof TaskApprovalDecisionSchema>, TaskApprovalDecision>,
  Exact<z.infer<typeof BudgetDecisionSchema>, BudgetDecision>,
  Exact<z.infer<typeof RecordedBudgetDecisionSchema>, RecordedBudgetDecision>,
  Exact<z.infer<typeof BudgetReportSchema>, BudgetReport>,
  Exact<z.infer<typeof AgentWorkflowInputSchema>, AgentWorkflowInput>,
  Exact<z.infer<typeof DeliverInputSchema>, DeliverInput>,
  Exact<z.infer<typeof DeliverResultSchema>, DeliverResult>,
  Exact<z.infer<typeof MailboxViewSchema>, MailboxView>,
  Exact<z.infer<typeof ApprovalDelegationSchema>, ApprovalDelegationRequest>,
  Exact<z.infer<typeof RecordedApprovalDelegationSchema>, RecordedApprovalDelegation>,
] = [true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true];
void drift;

/** Each message of the contract: its name on the wire, and the schemas of its arguments and result. */
const TASK_WORKFLOW = {
  workflowType: 'taskWorkflow',
  workflowId: 'task-{taskId}',
  input: TaskWorkflowInputSchema,
  result: TaskWorkflowResultSchema,
  queries: { status: { result: TaskStatusSchema }, budget: { result: BudgetReportSchema } },
  signals: {
    approvalDecision: { args: [ApprovalDecisionSchema] },
    reviewDecision: { args: [ReviewDecisionSchema] },
    comment: { args: [TaskCommentSchema] },
    pause: { args: [PauseSchema] },
    resume: { args: [] },
    taskApproval: { args: [TaskApprovalDecisionSchema] },
    dependenciesChanged: { args: [] },
    budgetDecision: { args: [BudgetDecisionSchema] },
  },
  updates: {
    decideApproval: { args: [ApprovalDecisionSchema], result: RecordedApprovalSchema },
    decideBudget: { args: [BudgetDecisionSchema], result: RecordedBudgetDecisionSchema },
    delegateApproval: { args: [ApprovalDelegationSchema], result: RecordedApprovalDelegationSchema },
  },
};
const AGENT_WORKFLOW = {
  workflowType: 'agentWorkflow',
  workflowId: 'agent-{agentId}',
  input: AgentWorkflowInputSchema,
  result: z.null().describe('Runs until cancelled (continue-as-new keeps its history small)'),
  queries: { mailbox: { result: MailboxViewSchema } },
  signals: {},
  updates: { deliver: { args: [DeliverInputSchema], result: DeliverResultSchema } },
};

const toJson = (schema: z.ZodType, io: 'input' | 'output') => {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, {
    io,
    unrepresentable: 'any',
    target: 'draft-2020-12',
  }) as Record<string, unknown>;
  return rest;
};

type Definition = typeof TASK_WORKFLOW | typeof AGENT_WORKFLOW;

function describeWorkflow(w: Definition) {
  const messages = <T extends Record<string, { args?: z.ZodType[]; result?: z.ZodType }>>(entries: T) =>
    Object.fromEntries(
      Object.entries(entries).map(([name, m]) => [
        name,
        {
          ...(m.args ? { args: m.args.map((a) => toJson(a, 'input')) } : {}),
          ...(m.result ? { result: toJson(m.result, 'output') } : {}),
        },
      ]),
    );
  return {
    workflowType: w.workflowType,
    workflowId: w.workflowId,
    input: toJson(w.input, 'input'),
    result: toJson(w.result, 'output'),
    queries: messages(w.queries),
    signals: messages(w.signals),
    updates: messages(w.updates),
  };
}

/** The contract as one JSON document: every message's JSON Schema (draft 2020-12), by workflow. */
export function temporalContractDocument(): Record<string, unknown> {
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    $id: 'urn:durable-agents:temporal-contract',
    title: 'durable-agents Temporal contract',
    description:
      'What a Temporal client in any language sends to and receives from the durable-agents workflows, as JSON Schema. Payloads use Temporal\'s default JSON converter. Start a task with the workflow id `task-{taskId}` on the task queue below; to make a repeated start join the running execution, set the id conflict policy USE_EXISTING (a default start raises "already started").',
    taskQueue: DEFAULT_TASK_QUEUE,
    namespace: DEFAULT_NAMESPACE,
    enums: { TaskState: [...TASK_STATES], TaskPhase: TaskStatusSchema.shape.phase.options },
    workflows: { taskWorkflow: describeWorkflow(TASK_WORKFLOW), agentWorkflow: describeWorkflow(AGENT_WORKFLOW) },
  };
}

/** Where the committed copy lives (regenerate with `npm run contract:schema`). */
export const TEMPORAL_CONTRACT_FILE = path.resolve(__dirname, '../docs/temporal-contract.schema.json');

/** The document as committed: two-space JSON with a final newline. */
export function renderTemporalContract(): string {
  return `${JSON.stringify(temporalContractDocument(), null, 2)}\n`;
}
