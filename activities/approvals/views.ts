/**
 * Read views of approval requests for the API, the inbox and the CLI: the pending requests with what
 * each waits for, a person's own queue, and a request's audit trail. They read what the workflow
 * recorded through its activities (the request's wait state and the trail), so they need no query
 * to a running workflow; the line is rendered for the reader's clock.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { inQueueOf, waitingForLine, type ApprovalWaitState } from '../../workflows/rules/approval-wait-rules';

/** One listing returns at most this many pending requests (oldest first). */
export const APPROVAL_LIST_MAX = 500;

export interface PendingApprovalView {
  requestId: string;
  taskId: string | null;
  agentId: string;
  workflowId: string;
  tool: string;
  summary: string;
  args: unknown;
  requestedAt: Date;
  /** The policy's name, null without one. */
  policy: string | null;
  /** "1 of 2 approvals; escalates to @oncall in 14 min; expires in 58 min"; null without a policy. */
  waitingFor: string | null;
  /** Who may decide now and has not (empty without a policy: anyone with the operator scope). */
  waitingOn: string[];
}

export interface ApprovalTrailEvent {
  kind: string;
  actor: string | null;
  targets: string[];
  comment: string | null;
  at: Date;
}

/**
 * Pending requests, oldest first; `forPerson`: only those in that person's own queue; `org`: only that
 * organisation's (filtered before the list's bound, so another organisation's backlog cannot push
 * this one's requests out of it).
 */
export async function pendingApprovalViews(
  db: Kysely<Database>,
  options: { forPerson?: string; agentId?: string; org?: string; nowMs?: number } = {},
): Promise<PendingApprovalView[]> {
  const nowMs = options.nowMs ?? Date.now();
  let query = db
    .selectFrom('approvals')
    .selectAll('approvals')
    .where('approvals.status', '=', 'pending')
    .orderBy('approvals.requested_at')
    .limit(APPROVAL_LIST_MAX);
  if (options.agentId) query = query.where('approvals.agent_id', '=', options.agentId);
  if (options.org !== undefined)
    query = query.where((eb) =>
      eb.exists(
        eb
          .selectFrom('agents')
          .select('agents.id')
          .whereRef('agents.id', '=', 'approvals.agent_id')
          .where('agents.org', '=', options.org!),
      ),
    );
  const rows = await query.execute();
  const views = rows.map((r): PendingApprovalView => {
    const wait = r.wait_state as ApprovalWaitState | null;
    return {
      requestId: r.id,
      taskId: r.task_id,
      agentId: r.agent_id,
      workflowId: r.workflow_id,
      tool: r.tool,
      summary: r.summary,
      args: r.args,
      requestedAt: r.requested_at,
      policy: wait?.policy.name ?? null,
      waitingFor: wait ? waitingForLine(wait, nowMs) : null,
      waitingOn: wait ? waitingOn(wait, nowMs) : [],
    };
  });
  if (options.forPerson === undefined) return views;
  const who = options.forPerson;
  return views.filter((v) => v.waitingOn.includes(who));
}

function waitingOn(wait: ApprovalWaitState, nowMs: number): string[] {
  const people = new Set([
    ...wait.policy.approvers,
    ...wait.policy.escalateTo,
    ...wait.delegations.map((d) => d.to),
    ...(wait.policy.onExpiry.then === 'escalate' ? wait.policy.onExpiry.to : []),
  ]);
  return [...people].filter((p) => inQueueOf(wait, p, nowMs));
}

/** A request's trail, oldest first; undefined when there is no such request. */
export async function approvalTrail(
  db: Kysely<Database>,
  requestId: string,
): Promise<
  | { status: string; summary: string; taskId: string | null; waitingFor: string | null; events: ApprovalTrailEvent[] }
  | undefined
> {
  const row = await db
    .selectFrom('approvals')
    .select(['status', 'summary', 'task_id', 'wait_state', 'decided_by', 'decided_at', 'requested_at', 'comment'])
    .where('id', '=', requestId)
    .executeTakeFirst();
  if (!row) return undefined;
  const events = await db
    .selectFrom('approval_events')
    .select(['kind', 'actor', 'targets', 'comment', 'created_at'])
    .where('request_id', '=', requestId)
    .orderBy('id')
    .execute();
  const wait = row.wait_state as ApprovalWaitState | null;
  return {
    status: row.status,
    summary: row.summary,
    taskId: row.task_id,
    waitingFor: wait && row.status === 'pending' ? waitingForLine(wait, Date.now()) : null,
    events: events.map((e) => ({
      kind: e.kind,
      actor: e.actor,
      targets: e.targets,
      comment: e.comment,
      at: e.created_at,
    })),
  };
}

/** One trail line for people: "12:03:10 escalated → olga", "12:04:00 approved by olga: ship it". */
export function trailLine(e: ApprovalTrailEvent): string {
  const time = e.at.toISOString().slice(11, 19);
  const who = e.actor ? ` by ${e.actor}` : '';
  const to = e.targets.length ? ` → ${e.targets.join(', ')}` : '';
  return `${time} ${e.kind}${who}${to}${e.comment ? `: ${e.comment}` : ''}`;
}
