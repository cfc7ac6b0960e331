/**
 * The approvals inbox: one server-rendered page for the people who decide. A person signs in at
 * `/inbox/sign-in` (an operator token typed into the form; a token never goes in a URL) and gets a
 * short-lived server-side session (see inbox-sessions.ts). Decisions are plain form posts, each
 * carrying the session's form token and checked for our own `Origin`, that go through the same
 * operations as the JSON API (the `decideApproval` update, the `reviewDecision` signal), recorded
 * under the signed-in name. A machine may still call these routes with `Authorization: Bearer`.
 * A person of one organisation sees and decides only that organisation's approvals and reviews.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sql, type Kysely } from 'kysely';
import type { AgentsClient } from '../client';
import type { Database } from '../schema/database';
import { roundWorkflowId, taskWorkflowId } from '../workflows/contract';
import { findTaskInOrg, PLATFORM } from '../activities/store/tenancy';
import { ApiError } from './errors';
import {
  clearSessionCookie,
  closeSession,
  openSession,
  requireFormToken,
  SESSION_COOKIE,
  setSessionCookie,
  type InboxSession,
} from './inbox-sessions';
import { agentOfOrgCondition, taskNotFound } from './org-walls';
import { registerSso, type SsoOptions } from './sso';
import { INBOX_RUN_PREFIX } from './run-viewer';
import { approverGroupsOf, verifyToken, type ApiPrincipal, type TokenScope } from './tokens';
import { approvalTrail, trailLine } from '../activities/approvals/views';
import { inQueueOf, waitingForLine, type ApprovalWaitState } from '../workflows/rules/approval-wait-rules';

/** The agent's words before a call are shown up to this length (the rest is in the Temporal UI). */
const WORDS_MAX_CHARS = 1_500;
/** Items shown per section; older ones wait on the next page load. */
const INBOX_ITEMS_MAX = 100;

interface InboxDeps {
  db: Kysely<Database>;
  client: AgentsClient;
  uiBase: string;
  namespace: string;
  requireScope(principal: ApiPrincipal | undefined, scope: TokenScope): ApiPrincipal;
  decideApproval(
    requestId: string,
    body: { decision: 'approved' | 'rejected'; comment?: string },
    principal: ApiPrincipal,
  ): Promise<unknown>;
  /** Hands a request under a policy to a colleague (see routes/approvals.ts). */
  delegateApproval(
    requestId: string,
    body: { to: string; comment?: string },
    principal: ApiPrincipal,
  ): Promise<unknown>;
  withTimeout<T>(what: string, call: () => Promise<T>): Promise<T>;
  /** The answer to a failure, logged first when unexpected (the page then says where). */
  failure(error: unknown, request: FastifyRequest): ApiError;
  /** Single sign-on through an OpenID provider, when configured. */
  sso?: SsoOptions;
}

const escape = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** Where a form post returns: the page it came from, with its agent filter. */
const back = (form: Record<string, string>): string =>
  form.agent && /^[a-z0-9_-]{1,63}$/.test(form.agent) ? `/inbox?agent=${form.agent}&` : '/inbox?';

export function registerInbox(app: FastifyInstance, deps: InboxDeps): void {
  const { db } = deps;
  const runLink = (workflowId: string) =>
    `${deps.uiBase}/namespaces/${encodeURIComponent(deps.namespace)}/workflows/${encodeURIComponent(workflowId)}`;
  /** The task's run viewer behind the inbox's sign-in (the session cookie is scoped to `/inbox`). */
  const callsLink = (taskId: string) => `${INBOX_RUN_PREFIX}${encodeURIComponent(taskId)}`;

  /** The signed-in operator; a browser's post must also carry its session's form token. */
  const decider = (request: FastifyRequest, form: Record<string, string>): ApiPrincipal => {
    const principal = deps.requireScope(request.principal, 'operator');
    if (request.inboxSession) requireFormToken(request.inboxSession, form);
    return principal;
  };

  const withSso = deps.sso !== undefined;
  if (deps.sso)
    registerSso(app, db, deps.sso, (reply, status, problem) =>
      sendPage(reply.status(status), signInPage(problem, withSso)),
    );

  app.get('/inbox/sign-in', async (_request, reply) => sendPage(reply, signInPage(undefined, withSso)));

  app.post('/inbox/sign-in', async (request, reply) => {
    const form = (request.body ?? {}) as Record<string, string>;
    const principal = form.token ? await verifyToken(db, form.token.trim()) : undefined;
    if (!principal) return sendPage(reply.status(401), signInPage('That token is unknown or revoked.', withSso));
    if (principal.scope !== 'operator')
      return sendPage(
        reply.status(403),
        signInPage(`The inbox needs an operator token; "${principal.name}" has scope "${principal.scope}".`, withSso),
      );
    const session = await openSession(db, {
      name: principal.name,
      scope: principal.scope,
      org: principal.org,
      tokenId: principal.tokenId,
    });
    setSessionCookie(request, reply, session.id);
    return reply.redirect('/inbox', 303);
  });

  app.post('/inbox/sign-out', async (request, reply) => {
    const form = (request.body ?? {}) as Record<string, string>;
    decider(request, form);
    const id = cookieValue(request, SESSION_COOKIE);
    if (id) await closeSession(db, id);
    clearSessionCookie(request, reply);
    return reply.redirect('/inbox/sign-in', 303);
  });

  app.get('/inbox', async (request, reply) => {
    const principal = deps.requireScope(request.principal, 'operator');
    const { notice, problem, agent } = request.query as Record<string, string | undefined>;
    return sendPage(reply, await renderInbox(principal, request.inboxSession, notice, problem, agent));
  });

  app.post('/inbox/approvals/:requestId', async (request, reply) => {
    const { requestId } = request.params as { requestId: string };
    const form = (request.body ?? {}) as Record<string, string>;
    const principal = decider(request, form);
    if (form.decision !== 'approved' && form.decision !== 'rejected')
      throw new ApiError(400, 'invalid_request', 'decision must be approved or rejected');
    try {
      await deps.decideApproval(
        requestId,
        { decision: form.decision, comment: form.comment?.trim() || undefined },
        principal,
      );
    } catch (error) {
      return reply.redirect(
        `${back(form)}problem=${encodeURIComponent(`Not recorded: ${deps.failure(error, request).message}`)}`,
        303,
      );
    }
    return reply.redirect(
      `${back(form)}notice=${encodeURIComponent(`${form.decision === 'approved' ? 'Approved' : 'Rejected'}: the task continues.`)}`,
      303,
    );
  });

  app.post('/inbox/approvals/:requestId/delegate', async (request, reply) => {
    const { requestId } = request.params as { requestId: string };
    const form = (request.body ?? {}) as Record<string, string>;
    const principal = decider(request, form);
    const to = form.to?.trim();
    if (!to)
      return reply.redirect(
        `${back(form)}problem=${encodeURIComponent('Not handed on: name the colleague who gets the request.')}`,
        303,
      );
    try {
      await deps.delegateApproval(requestId, { to, comment: form.comment?.trim() || undefined }, principal);
    } catch (error) {
      return reply.redirect(
        `${back(form)}problem=${encodeURIComponent(`Not handed on: ${deps.failure(error, request).message}`)}`,
        303,
      );
    }
    return reply.redirect(`${back(form)}notice=${encodeURIComponent(`Handed to ${to}.`)}`, 303);
  });

  app.post('/inbox/reviews/:taskId', async (request, reply) => {
    const { taskId } = request.params as { taskId: string };
    const form = (request.body ?? {}) as Record<string, string>;
    const principal = decider(request, form);
    if (form.decision !== 'accept' && form.decision !== 'revise')
      throw new ApiError(400, 'invalid_request', 'decision must be accept or revise');
    const decision = form.decision;
    const feedback = form.feedback?.trim();
    if (form.decision === 'revise' && !feedback)
      throw new ApiError(400, 'invalid_request', 'a revision needs feedback: say what to change');
    // Another organisation's task is unknown here, as everywhere.
    const task = await findTaskInOrg(db, taskId, principal.org);
    if (!task) throw taskNotFound(taskId);
    if (task.state !== 'review')
      throw new ApiError(409, 'not_in_review', `task ${taskId} is ${task.state}, not waiting for review`);
    try {
      await deps.withTimeout('the review signal', () =>
        deps.client.review(taskId, { decision, feedback, decidedBy: principal.name }),
      );
    } catch (error) {
      return reply.redirect(
        `${back(form)}problem=${encodeURIComponent(`Not recorded: ${deps.failure(error, request).message}`)}`,
        303,
      );
    }
    return reply.redirect(
      `${back(form)}notice=${encodeURIComponent(form.decision === 'accept' ? 'Accepted.' : 'Sent back for revision.')}`,
      303,
    );
  });

  async function renderInbox(
    principal: ApiPrincipal,
    session: InboxSession | undefined,
    notice: string | undefined,
    problem: string | undefined,
    agent: string | undefined,
  ): Promise<string> {
    const csrf = session ? `<input type="hidden" name="csrf" value="${escape(session.csrfToken)}">` : '';
    let approvalsQuery = db
      .selectFrom('approvals')
      .leftJoin('tasks', 'tasks.id', 'approvals.task_id')
      .select([
        'approvals.id',
        'approvals.task_id',
        'approvals.agent_id',
        'approvals.workflow_id',
        'approvals.tool',
        'approvals.args',
        'approvals.summary',
        'approvals.requested_at',
        'approvals.wait_state',
        'tasks.title',
      ])
      .where('approvals.status', '=', 'pending')
      .orderBy('approvals.requested_at')
      .limit(INBOX_ITEMS_MAX);
    let reviewsQuery = db
      .selectFrom('tasks')
      .select(['id', 'agent_id', 'title', 'round', 'result_summary', 'updated_at'])
      .where('state', '=', 'review')
      .orderBy('updated_at')
      .limit(INBOX_ITEMS_MAX);
    // A person of one organisation sees only its approvals and reviews (the platform's sees all).
    if (principal.org !== PLATFORM) {
      approvalsQuery = approvalsQuery.where(agentOfOrgCondition(principal, 'approvals.agent_id'));
      reviewsQuery = reviewsQuery.where('org', '=', principal.org);
    }
    // `?agent=<id>`: one agent's items only.
    if (agent) {
      approvalsQuery = approvalsQuery.where('approvals.agent_id', '=', agent);
      reviewsQuery = reviewsQuery.where('agent_id', '=', agent);
    }
    const [approvals, reviews] = await Promise.all([approvalsQuery.execute(), reviewsQuery.execute()]);

    const now = Date.now();
    const waitOf = (a: { wait_state: unknown }) => (a.wait_state as ApprovalWaitState | null) ?? undefined;
    const mine = approvals.filter((a) => {
      const wait = waitOf(a);
      return wait !== undefined && inQueueOf(wait, principal.name, now, approverGroupsOf(principal));
    });
    const approvalCards = await Promise.all(
      approvals.map(async (a) => {
        const [reason, words, trail] = await Promise.all([
          approvalReason(a.task_id, a.id),
          wordsBeforeCall(a.id),
          waitOf(a) ? approvalTrail(db, a.id) : undefined,
        ]);
        const wait = waitOf(a);
        const hidden = `${csrf}${agent ? `<input type="hidden" name="agent" value="${escape(agent)}">` : ''}`;
        const args = a.args as Record<string, unknown> | null;
        const command =
          typeof args?.command === 'string'
            ? args.command
            : Array.isArray(args?.command)
              ? (args.command as string[]).join(' ')
              : JSON.stringify(args ?? {}, null, 2);
        // The run that asked is the round whose session is in the request id (`task_{taskId}_r{round}:{toolCallId}`).
        const session = /^task_(.+)_r(\d+):[^:]+$/.exec(a.id);
        const round = session ? roundWorkflowId(session[1]!, Number(session[2])) : undefined;
        return `
<article class="card" data-request-id="${escape(a.id)}">
  <header><span class="tool">${escape(a.tool)}</span> <span class="age" title="${a.requested_at.toISOString()}">waiting ${escape(age(now - a.requested_at.getTime()))}</span></header>
  <h3>${escape(a.title ?? a.task_id ?? '')} <small>· agent ${escape(a.agent_id)}</small></h3>
  <pre class="command">${escape(command)}</pre>
  ${reason ? `<p class="reason"><b>Why it needs you:</b> ${escape(reason)}</p>` : ''}
  ${words ? `<blockquote class="words"><b>The agent said:</b> ${escape(words)}</blockquote>` : ''}
  ${wait ? `<p class="waiting"><b>Waits for:</b> ${escape(waitingForLine(wait, now))}</p>` : ''}
  <form method="post" action="/inbox/approvals/${encodeURIComponent(a.id)}">${hidden}
    <input name="comment" placeholder="Comment for the agent (optional)" aria-label="comment">
    <button name="decision" value="approved" class="approve">Approve</button>
    <button name="decision" value="rejected" class="reject">Reject</button>
  </form>
  ${
    wait
      ? `<form method="post" class="delegate" action="/inbox/approvals/${encodeURIComponent(a.id)}/delegate">${hidden}
    <input name="to" placeholder="Hand to a colleague (name)" aria-label="delegate to">
    <input name="comment" placeholder="Why (optional)" aria-label="delegation comment">
    <button class="link-button">Hand on</button>
  </form>`
      : ''
  }
  ${trail ? `<details class="trail"><summary>Trail (${trail.events.length})</summary><ol>${trail.events.map((e) => `<li>${escape(trailLine(e))}</li>`).join('')}</ol></details>` : ''}
  <a class="run" href="${escape(runLink(round ?? a.workflow_id))}" target="_blank" rel="noopener">Open the run in Temporal</a>${
    a.task_id ? ` · <a class="calls" href="${escape(callsLink(a.task_id))}">every call so far</a>` : ''
  }
</article>`;
      }),
    );
    const reviewCards = reviews.map(
      (t) => `
<article class="card" data-task-id="${escape(t.id)}">
  <header><span class="tool">review</span> <span class="age">waiting ${escape(age(now - t.updated_at.getTime()))}</span></header>
  <h3>${escape(t.title)} <small>· agent ${escape(t.agent_id)} · round ${t.round}</small></h3>
  <blockquote class="words"><b>Submission:</b> ${escape(t.result_summary ?? '(no summary)')}</blockquote>
  <form method="post" action="/inbox/reviews/${encodeURIComponent(t.id)}">${csrf}${agent ? `<input type="hidden" name="agent" value="${escape(agent)}">` : ''}
    <input name="feedback" placeholder="Feedback (needed to revise)" aria-label="feedback">
    <button name="decision" value="accept" class="approve">Accept</button>
    <button name="decision" value="revise" class="reject">Revise</button>
  </form>
  <a class="run" href="${escape(runLink(taskWorkflowId(t.id)))}" target="_blank" rel="noopener">Open the task in Temporal</a> ·
  <a class="run" href="${escape(runLink(roundWorkflowId(t.id, t.round)))}" target="_blank" rel="noopener">its last round</a> ·
  <a class="calls" href="${escape(callsLink(t.id))}">every call</a>
</article>`,
    );
    return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Inbox (${approvals.length + reviews.length}) · durable-agents</title>
<style>${PAGE_STYLE}
</style></head>
<body><main>
<h1>Inbox</h1><p class="who">Signed in as ${escape(principal.name)}. Decisions are recorded under this name.${
      session
        ? ` <form class="inline" method="post" action="/inbox/sign-out">${csrf}<button class="link">Sign out</button></form>`
        : ''
    }</p>
${notice ? `<p class="notice" role="status">${escape(notice)}</p>` : ''}
${problem ? `<p class="notice problem" role="alert">${escape(problem)}</p>` : ''}
<h2>Your queue (${mine.length})</h2>
${
  mine.length
    ? `<ul class="queue">${mine.map((a) => `<li data-request-id="${escape(a.id)}">${escape(a.summary)} <small>· ${escape(waitingForLine(waitOf(a)!, now))}</small></li>`).join('')}</ul>`
    : '<p class="empty">Nothing waits for you by name.</p>'
}
<h2>Waiting for approval (${approvals.length})</h2>
${approvalCards.join('\n') || '<p class="empty">Nothing waits for approval.</p>'}
<h2>Waiting for review (${reviews.length})</h2>
${reviewCards.join('\n') || '<p class="empty">No task waits for review.</p>'}
</main></body></html>`;
  }

  async function approvalReason(taskId: string | null, requestId: string): Promise<string | undefined> {
    if (!taskId) return undefined;
    const row = await db
      .selectFrom('task_events')
      .select('data')
      .where('task_id', '=', taskId)
      .where('type', '=', 'approval-requested')
      .where(sql<boolean>`data->>'requestId' = ${requestId}`)
      .executeTakeFirst();
    const reason = row?.data.reason;
    return typeof reason === 'string' ? reason : undefined;
  }

  /** The text of the assistant message that made the call (request ids are `{sessionId}:{toolCallId}`). */
  async function wordsBeforeCall(requestId: string): Promise<string | undefined> {
    const cut = requestId.lastIndexOf(':');
    if (cut <= 0) return undefined;
    const sessionId = requestId.slice(0, cut);
    const toolCallId = requestId.slice(cut + 1);
    const message = await db
      .selectFrom('messages')
      .select('content')
      .where('session_id', '=', sessionId)
      .where('role', '=', 'assistant')
      .where(sql<boolean>`content @> ${JSON.stringify([{ type: 'tool_use', id: toolCallId }])}::jsonb`)
      .executeTakeFirst();
    const text = (message?.content as Array<{ type?: string; text?: string }> | undefined)
      ?.flatMap((b) => (b.type === 'text' && b.text ? [b.text] : []))
      .join('\n')
      .trim();
    if (!text) return undefined;
    return text.length > WORDS_MAX_CHARS ? `${text.slice(0, WORDS_MAX_CHARS)}…` : text;
  }
}

const PAGE_STYLE = `
body{font:15px/1.45 system-ui,sans-serif;margin:0;background:#f5f6f8;color:#1d2330}
main{max-width:860px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 10px}
.who{color:#667;margin:0 0 16px} .notice{background:#e6f4ea;border:1px solid #b7dfc2;padding:8px 12px;border-radius:6px}
.problem{background:#fdecea;border-color:#f3b9b4}
.card{background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:14px 16px;margin:0 0 12px}
.card header{display:flex;justify-content:space-between;color:#667;font-size:13px}
.tool{font-weight:600;color:#3451b2;text-transform:uppercase;letter-spacing:.03em}
h3{font-size:16px;margin:6px 0} h3 small{color:#667;font-weight:400}
pre.command{background:#1d2330;color:#e8ecf3;padding:10px 12px;border-radius:6px;white-space:pre-wrap;word-break:break-word}
blockquote{margin:8px 0;padding:6px 12px;border-left:3px solid #c9cfdb;color:#333;white-space:pre-wrap}
form{display:flex;gap:8px;margin:10px 0 6px} input{flex:1;padding:7px 9px;border:1px solid #c9cfdb;border-radius:6px}
button{padding:7px 14px;border:0;border-radius:6px;cursor:pointer;font-weight:600}
.approve{background:#1f883d;color:#fff} .reject{background:#cf222e;color:#fff}
a.run,a.calls{font-size:13px;color:#3451b2} .empty{color:#667}
.waiting{margin:6px 0;color:#7a4b00} .trail{font-size:13px;color:#445} .trail ol{margin:4px 0;padding-left:20px}
.link-button{background:#eef1f6;color:#1d2330} .queue li{margin:4px 0}
.inline{display:inline;margin:0} button.link{background:none;color:#3451b2;padding:0;font-weight:400;text-decoration:underline}
.signin{max-width:420px} .signin input{width:100%;box-sizing:border-box;margin:6px 0 12px}
`;

/** The sign-in page: single sign-on when configured, and a token typed into a form (posted, so it never reaches a URL or history). */
function signInPage(problem?: string, sso = false): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in · durable-agents inbox</title><style>${PAGE_STYLE}</style></head>
<body><main class="signin">
<h1>Sign in to the inbox</h1>
${problem ? `<p class="notice problem" role="alert">${escape(problem)}</p>` : ''}
${sso ? '<p><a class="sso approve" href="/inbox/sso" style="display:inline-block;padding:7px 14px;border-radius:6px;text-decoration:none">Sign in with single sign-on</a></p><p class="who">Or with an operator token:</p>' : ''}
<form method="post" action="/inbox/sign-in" style="display:block">
  <label for="token">Operator token</label>
  <input id="token" name="token" type="password" autocomplete="off" required>
  <button class="approve" type="submit">Sign in</button>
</form>
<p class="who">Create one with <code>npm run agents -- token create &lt;your name&gt; --scope operator</code>. The session ends after 30 minutes unused.</p>
</main></body></html>`;
}

/**
 * Every inbox page: not cached, never framed (clickjacking), and a content policy that allows our own
 * inline style and form posts to ourselves only.
 */
function sendPage(reply: FastifyReply, html: string): FastifyReply {
  return reply
    .header('content-type', 'text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('x-frame-options', 'DENY')
    .header(
      'content-security-policy',
      "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    )
    .send(html);
}

function cookieValue(request: FastifyRequest, name: string): string | undefined {
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const [key, ...rest] = part.trim().split('=');
    if (key === name) return rest.join('=');
  }
  return undefined;
}

function age(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.round(s / 60)} min`;
  if (s < 86_400) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86_400)} d`;
}
