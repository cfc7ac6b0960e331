/** `/v1/approvals` and `/v1/notifications`: what waits on a person, and what agents told people. */
import { WorkflowUpdateFailedError } from '@temporalio/client';
import type { z } from 'zod';
import { TaskAdmin, type NotificationRow } from '../../client/task-admin';
import { ApiError } from '../errors';
import type { ApiContext } from '../route-kit';
import * as S from '../schemas';
import { approverGroupsOf, type ApiPrincipal } from '../tokens';
import { approvalTrail, pendingApprovalViews } from '../../activities/approvals/views';
import { NOTIFICATIONS_LIST_MAX } from '../../activities/store/notifications';
import { agentOfOrgCondition, approvalInOrgOr404, approvalNotFound, isPlatform } from '../org-walls';
import { PLATFORM } from '../../activities/store/tenancy';

/**
 * The approvals row is written by an activity just before the workflow registers the request, so a
 * decision can arrive while the workflow does not know it yet: it is retried for this long.
 */
const APPROVAL_SETTLE_MS = 5_000;
const APPROVAL_SETTLE_POLL_MS = 100;

export type DecideApproval = (
  requestId: string,
  body: z.infer<typeof S.DecideApprovalBody>,
  principal: ApiPrincipal,
) => Promise<unknown>;
export type DelegateApproval = (
  requestId: string,
  body: z.infer<typeof S.DelegateApprovalBody>,
  principal: ApiPrincipal,
) => Promise<unknown>;

/** Registers the routes; returns the approval decision and delegation paths, which the inbox page shares. */
export function registerApprovalRoutes({ route, client, db, withTimeout, requireAgent }: ApiContext): {
  decideApproval: DecideApproval;
  delegateApproval: DelegateApproval;
} {
  const admin = new TaskAdmin(client.temporal, db);
  route({
    method: 'GET',
    url: '/v1/notifications',
    scope: 'read',
    summary:
      'The notification inbox (what agents told people with `notify_user`, and questions nobody waits on), newest first, at most 200; `?agentId=` for one agent, `?unread=true` for unread only',
    query: S.NotificationsQuery,
    response: S.NotificationsResponse,
    handler: async ({ query, principal }) => {
      if (query.agentId) await requireAgent(query.agentId, principal);
      if (query.agentId || isPlatform(principal)) {
        const rows = await admin.notifications({
          ...(query.agentId ? { agentId: query.agentId } : {}),
          unreadOnly: query.unread === 'true',
        });
        return { notifications: rows.map(notificationJson) };
      }
      // The same listing, inside the caller's organisation (the store's cap applies after the wall).
      let rows = db
        .selectFrom('notifications')
        .selectAll()
        .where(agentOfOrgCondition(principal, 'notifications.agent_id'))
        .orderBy('created_at', 'desc')
        .orderBy('id')
        .limit(NOTIFICATIONS_LIST_MAX);
      if (query.unread === 'true') rows = rows.where('read_at', 'is', null);
      return { notifications: (await rows.execute()).map(notificationJson) };
    },
  });
  route({
    method: 'POST',
    url: '/v1/notifications/read',
    scope: 'service',
    summary:
      'Mark notifications read (readBy = the token name; one already read keeps its first reader). Scope `service`: a relay that delivers notifications to people (chat, mail) marks what it delivered. Answers how many were unread; 404 names ids that do not exist',
    body: S.MarkReadBody,
    response: S.MarkReadResponse,
    handler: async ({ body, principal }) => {
      const ids = [...new Set(body.ids)];
      let within = db.selectFrom('notifications').select('id').where('id', 'in', ids);
      if (!isPlatform(principal)) within = within.where(agentOfOrgCondition(principal, 'notifications.agent_id'));
      const found = await within.execute();
      const missing = ids.filter((id) => !found.some((r) => r.id === id));
      if (missing.length)
        throw new ApiError(
          404,
          'notification_not_found',
          `no notification ${missing
            .slice(0, 5)
            .map((id) => JSON.stringify(id))
            .join(', ')}${missing.length > 5 ? ` and ${missing.length - 5} more` : ''}; nothing was marked`,
        );
      return { marked: await admin.markRead(ids, principal.name) };
    },
  });
  route({
    method: 'GET',
    url: '/v1/approvals',
    scope: 'read',
    summary:
      "Pending approval requests across all tasks, oldest first, each with what it waits for under its policy (`waitingFor`, `waitingOn`); `?for=<name>`: that person's own queue (the requests they may decide now and have not)",
    query: S.ApprovalsQuery,
    response: S.ApprovalsResponse,
    handler: async ({ query, principal }) => {
      const views = await pendingApprovalViews(db, {
        ...(query.for ? { forPerson: query.for } : {}),
        ...(principal.org === PLATFORM ? {} : { org: principal.org }),
      });
      return { approvals: views.map((v) => ({ ...v, requestedAt: v.requestedAt.toISOString() })) };
    },
  });
  route({
    method: 'GET',
    url: '/v1/approvals/:requestId/trail',
    scope: 'read',
    summary:
      "A request's audit trail, oldest first: who was asked, reminded, escalated to, each decision, delegations, expiry",
    params: S.RequestIdParams,
    response: S.ApprovalTrailResponse,
    handler: async ({ params, principal }) => {
      await approvalInOrgOr404(db, params.requestId, principal);
      const trail = await approvalTrail(db, params.requestId);
      if (!trail)
        throw new ApiError(404, 'approval_not_found', `no approval request ${JSON.stringify(params.requestId)}`);
      return {
        requestId: params.requestId,
        ...trail,
        events: trail.events.map((e) => ({ ...e, at: e.at.toISOString() })),
      };
    },
  });
  route({
    method: 'POST',
    url: '/v1/approvals/:requestId/delegate',
    scope: 'operator',
    summary:
      'Hand a pending request under a policy to a colleague (from = the token name), through the validated `delegateApproval` update; the colleague then decides as if asked',
    params: S.RequestIdParams,
    body: S.DelegateApprovalBody,
    response: S.RecordedDelegationSchema,
    handler: async ({ params, body, principal }) => delegateApproval(params.requestId, body, principal),
  });
  route({
    method: 'POST',
    url: '/v1/approvals/:requestId',
    scope: 'operator',
    summary:
      'Approve or reject a pending request through the validated `decideApproval` update; returns the recorded decision (decidedBy = the token name)',
    params: S.RequestIdParams,
    body: S.DecideApprovalBody,
    response: S.RecordedApprovalSchema,
    handler: async ({ params, body, principal }) => decideApproval(params.requestId, body, principal),
  });

  async function decideApproval(
    requestId: string,
    body: z.infer<typeof S.DecideApprovalBody>,
    principal: ApiPrincipal,
  ) {
    const row = await approvalInOrgOr404(db, requestId, principal);
    if (!row.task_id) throw approvalNotFound(requestId);
    if (row.status !== 'pending')
      throw new ApiError(409, 'approval_decided', `approval request ${requestId} is already ${row.status}`);
    const taskId = row.task_id;
    const settleBy = Date.now() + APPROVAL_SETTLE_MS;
    for (;;) {
      try {
        return await withTimeout('the decideApproval update', () =>
          client.decideApproval(taskId, {
            requestId,
            decision: body.decision,
            comment: body.comment,
            decidedBy: principal.name,
            decidedByGroups: approverGroupsOf(principal),
          }),
        );
      } catch (error) {
        const cause =
          error instanceof WorkflowUpdateFailedError
            ? ((error.cause as { message?: string } | undefined)?.message ?? '')
            : '';
        if (!cause.startsWith(`no pending approval request ${requestId}`) || Date.now() > settleBy) throw error;
        const now = await db.selectFrom('approvals').select('status').where('id', '=', requestId).executeTakeFirst();
        if (now?.status !== 'pending') throw error;
        await new Promise((r) => setTimeout(r, APPROVAL_SETTLE_POLL_MS));
      }
    }
  }

  async function delegateApproval(
    requestId: string,
    body: z.infer<typeof S.DelegateApprovalBody>,
    principal: ApiPrincipal,
  ) {
    const row = await approvalInOrgOr404(db, requestId, principal);
    if (!row.task_id) throw approvalNotFound(requestId);
    if (row.status !== 'pending')
      throw new ApiError(409, 'approval_decided', `approval request ${requestId} is already ${row.status}`);
    const taskId = row.task_id;
    return withTimeout('the delegateApproval update', () =>
      client.delegateApproval(taskId, {
        requestId,
        from: principal.name,
        fromGroups: approverGroupsOf(principal),
        to: body.to,
        ...(body.comment ? { comment: body.comment } : {}),
      }),
    );
  }

  return { decideApproval, delegateApproval };
}

function notificationJson(n: NotificationRow) {
  return {
    id: n.id,
    agentId: n.agent_id,
    taskId: n.task_id,
    kind: n.kind,
    title: n.title,
    body: n.body,
    priority: n.priority,
    options: n.options,
    createdAt: n.created_at.toISOString(),
    readAt: n.read_at ? n.read_at.toISOString() : null,
    readBy: n.read_by,
  };
}
