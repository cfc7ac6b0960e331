/**
 * The I/O of approvals under a policy: opening a request (its row, the policy that applies, the first
 * trail entry and the notification to its approvers), and each later event of the wait (reminders,
 * escalations, decisions, delegations, expiry) as a trail row, the request's recorded wait state, and
 * for reminders and escalations a notification plus the policy's webhook. Every write is keyed by the
 * workflow event it records, so a retried activity, or a worker that died mid-wait, asks nobody twice.
 */
import { recordApprovalRequest } from '../store/approvals';
import { createHash } from 'node:crypto';
import { Context } from '@temporalio/activity';
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import {
  allowedApprovers,
  initialWaitState,
  waitingForLine,
  type ApprovalWaitState,
  type ResolvedApprovalPolicy,
} from '../../workflows/rules/approval-wait-rules';
import { storableText } from '../security/binary';
import { agentConfig, findAgent } from '../store/agents';
import { storeNotification } from '../store/notifications';
import {
  ApprovalsConfigSchema,
  resolveApprovalPolicy,
  webhookFor,
  type ApprovalsConfig,
  type PolicySources,
} from './policy';

/** A webhook that does not answer in this time is given up on for this event (the notification stays). */
export const APPROVAL_WEBHOOK_TIMEOUT_MS = 5_000;

export type ApprovalEventKind =
  'asked' | 'reminded' | 'escalated' | 'approved' | 'rejected' | 'delegated' | 'extended' | 'expired' | 'timed_out';

export interface OpenApprovalRequestInput {
  requestId: string;
  agentId: string;
  taskId?: string;
  workflowId: string;
  sessionId: string;
  attempt: number;
  turn: number;
  toolCallId: string;
  tool: string;
  summary: string;
  reason: string;
}

export interface ApprovalEventInput {
  requestId: string;
  agentId: string;
  taskId?: string;
  kind: ApprovalEventKind;
  actor?: string;
  targets?: string[];
  comment?: string;
  /** Unique per workflow event (request id, kind, ordinal). */
  eventKey: string;
  /** The wait's state after the event (absent without a policy). */
  state?: ApprovalWaitState;
  /** The workflow clock when the event happened (the waiting line is rendered for this time). */
  atMs: number;
  /** For reminders and escalations: the request's summary, for the notification. */
  summary?: string;
}

export function createApprovalActivities(deps: { db: Kysely<Database> }) {
  const { db } = deps;
  return {
    /**
     * Records an approval request (idempotent by request id) with the call's arguments, and resolves
     * the policy that applies (the agent's, else its organisation's). Returns the policy so the
     * workflow carries it: a policy edited while a request waits does not change that request.
     */
    async openApprovalRequest(
      input: OpenApprovalRequestInput,
    ): Promise<{ requestedAt: string; policy?: ResolvedApprovalPolicy; creator?: string }> {
      const policy = resolveApprovalPolicy(input.tool, await policySources(input.agentId));
      const task = input.taskId
        ? await db.selectFrom('tasks').select('created_by').where('id', '=', input.taskId).executeTakeFirst()
        : undefined;
      const creator = task?.created_by ?? undefined;
      const { requestedAt, requestedAtMs } = await recordApprovalRequest(db, input, policy);
      if (policy) {
        // The request's clock starts when the row was first written: a retry keeps the first time.
        const state = initialWaitState(input.requestId, policy, requestedAtMs, creator);
        await recordEvent({
          requestId: input.requestId,
          agentId: input.agentId,
          taskId: input.taskId,
          kind: 'asked',
          targets: allowedApprovers(state, state.requestedAtMs),
          eventKey: `${input.requestId}:asked`,
          state,
          atMs: state.requestedAtMs,
          summary: input.summary,
        });
      }
      return { requestedAt, ...(policy ? { policy } : {}), ...(creator ? { creator } : {}) };
    },

    /** One event of a wait: a trail row, the recorded wait state, and who must be told. Idempotent by `eventKey`. */
    async recordApprovalEvent(input: ApprovalEventInput): Promise<void> {
      await recordEvent(input);
    },
  };

  /** The agent's approval configuration, then its organisation's. */
  async function policySources(agentId: string): Promise<PolicySources> {
    const agent = await findAgent(db, agentId);
    const config = agent ? agentConfig(agent) : {};
    const org = config.org
      ? await db.selectFrom('organisations').select('approvals').where('name', '=', config.org).executeTakeFirst()
      : undefined;
    const orgApprovals = org?.approvals ? ApprovalsConfigSchema.safeParse(org.approvals) : undefined;
    return [
      { origin: `agent ${agentId}`, config: config.approvals as ApprovalsConfig | undefined },
      {
        origin: `organisation ${config.org ?? ''}`.trim(),
        config: orgApprovals?.success ? orgApprovals.data : undefined,
      },
    ];
  }

  async function recordEvent(input: ApprovalEventInput): Promise<void> {
    const inserted = await db
      .insertInto('approval_events')
      .values({
        request_id: input.requestId,
        task_id: input.taskId ?? null,
        kind: input.kind,
        actor: input.actor === undefined ? null : storableText(input.actor),
        targets: JSON.stringify((input.targets ?? []).map((t) => storableText(t))),
        comment: input.comment === undefined ? null : storableText(input.comment),
        event_key: input.eventKey,
      })
      .onConflict((oc) => oc.column('event_key').doNothing())
      .returning('id')
      .executeTakeFirst();
    if (input.state)
      await db
        .updateTable('approvals')
        .set({ wait_state: JSON.stringify(input.state) })
        .where('id', '=', input.requestId)
        .execute();
    const tells =
      input.kind === 'asked' || input.kind === 'reminded' || input.kind === 'escalated' || input.kind === 'extended';
    if (!tells || !input.state || (input.targets ?? []).length === 0) return;
    const line = waitingForLine(input.state, input.atMs);
    const verbs: Partial<Record<ApprovalEventKind, string>> = {
      asked: 'Approval needed',
      reminded: 'Reminder: approval needed',
      escalated: 'Escalated: approval needed',
      extended: 'Last call: approval needed',
    };
    const verb = verbs[input.kind]!;
    const body = `${verb} from ${(input.targets ?? []).join(', ')}: ${input.summary ?? input.requestId}\n${line}\nRequest ${input.requestId} (policy ${input.state.policy.name}).`;
    const id = `ntf_${createHash('sha256').update(input.eventKey).digest('hex').slice(0, 24)}`;
    await storeNotification(db, id, {
      agentId: input.agentId,
      ...(input.taskId ? { taskId: input.taskId } : {}),
      kind: 'approval_request',
      title: `${verb}: ${input.summary ?? input.requestId}`,
      body,
      priority: input.kind === 'asked' ? 'normal' : 'high',
    });
    // The webhook is told once per event: only the attempt that wrote the trail row posts it.
    if (!input.state.policy.webhook || !inserted || input.kind === 'asked') return;
    const request = await db
      .selectFrom('approvals')
      .select('tool')
      .where('id', '=', input.requestId)
      .executeTakeFirst();
    const webhook = request ? webhookFor(request.tool, await policySources(input.agentId)) : undefined;
    if (webhook)
      await postWebhook(webhook, {
        event: `approval.${input.kind}`,
        requestId: input.requestId,
        taskId: input.taskId ?? null,
        to: input.targets,
        summary: input.summary ?? null,
        waitingFor: line,
      });
  }
}

/** Best effort: a failing receiver is logged; the notification in the inbox is the record. */
async function postWebhook(url: string, payload: Record<string, unknown>): Promise<void> {
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(payload),
      signal: AbortSignal.timeout(APPROVAL_WEBHOOK_TIMEOUT_MS),
      redirect: 'error',
    });
    if (!response.ok) Context.current().log.warn('approval webhook refused the event', { status: response.status });
  } catch (error) {
    Context.current().log.warn('approval webhook failed', { error: String(error) });
  }
}
