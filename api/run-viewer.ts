/**
 * The run viewer: one read-only page per task with every round, LLM call and tool call, the spend of
 * its budget tree against the budget, and for a fork what differs from its source.
 *
 * Where it is served, and why two paths: `/runs/<taskId>` is the address the contract publishes
 * (`runViewerPath`, linked from each round's details in the Temporal UI); it answers a bearer token.
 * A browser carries no token there, and the inbox's session cookie is scoped to `/inbox`, so a browser
 * that opens `/runs/<taskId>` is sent to `/inbox/runs/<taskId>`, the same page behind the inbox's
 * sign-in (a token's session or single sign-on), and from there to the sign-in page when it has none.
 * Both answer another organisation's task exactly as an unknown id: 404 `task_not_found`.
 */
import { defaultPayloadConverter } from '@temporalio/common';
// The header Temporal's OpenTelemetry interceptor puts the starter's trace context in.
import { TRACE_HEADER } from '@temporalio/interceptors-opentelemetry/lib/instrumentation';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import { loadRunRecords } from '../activities/store/run-records';
import { findTaskInOrg } from '../activities/store/tenancy';
import type { AgentsClient } from '../client';
import type { Database } from '../schema/database';
import { runViewerPath, taskWorkflowId, type TaskWorkflowInput } from '../workflows/contract';
import { isTerminal, type TaskState } from '../workflows/rules/task-state';
import { ApiError } from './errors';
import { taskNotFound } from './org-walls';
import { buildRunView, type BudgetFacts } from './run-viewer-model';
import { runPage } from './run-viewer-page';
import type { ApiPrincipal, TokenScope } from './tokens';

/** The page behind the inbox's sign-in (where its session cookie is sent). */
export const INBOX_RUN_PREFIX = '/inbox/runs/';

export interface RunViewerDeps {
  db: Kysely<Database>;
  client: AgentsClient;
  /** The Temporal Web UI (the inbox's option), for links to the task's workflows. */
  uiBase: string;
  namespace: string;
  requireScope(principal: ApiPrincipal | undefined, scope: TokenScope): ApiPrincipal;
  withTimeout<T>(what: string, call: () => Promise<T>): Promise<T>;
}

export function registerRunViewer(app: FastifyInstance, deps: RunViewerDeps): void {
  const workflowLink = (workflowId: string) =>
    `${deps.uiBase}/namespaces/${encodeURIComponent(deps.namespace)}/workflows/${encodeURIComponent(workflowId)}`;

  const show = async (request: FastifyRequest, reply: FastifyReply, inbox: boolean): Promise<FastifyReply> => {
    const principal = deps.requireScope(request.principal, 'read');
    const { taskId } = request.params as { taskId: string };
    const task = await findTaskInOrg(deps.db, taskId, principal.org);
    if (!task) throw taskNotFound(taskId);
    const [records, start] = await Promise.all([loadRunRecords(deps.db, task), workflowStart(deps, taskId)]);
    const running = !isTerminal(task.state as TaskState);
    const budget: BudgetFacts | undefined = running
      ? await deps.withTimeout('the task budget query', () => deps.client.getBudget(taskId)).catch(() => undefined)
      : start?.costBudgetUsd !== undefined
        ? { limitUsd: start.costBudgetUsd, nodes: [] }
        : undefined;
    const view = buildRunView(records, budget);
    const html = runPage(
      task,
      view,
      {
        workflow: workflowLink,
        run: (id) => (inbox ? `${INBOX_RUN_PREFIX}${encodeURIComponent(id)}` : runViewerPath(id)),
      },
      { forks: records.forks, ...(start?.traceId ? { traceId: start.traceId } : {}) },
    );
    return sendPage(reply, html);
  };

  // Encapsulated, so its error handler (the browser's redirects) is this page's alone.
  void app.register(async (scope) => {
    scope.setErrorHandler((error: FastifyError, request, reply) => {
      const browser = request.method === 'GET' && request.headers.authorization === undefined;
      if (browser && error instanceof ApiError && error.status === 401) {
        const { taskId } = request.params as { taskId?: string };
        const inbox = request.url.startsWith(INBOX_RUN_PREFIX);
        // No session for the inbox's path: sign in first (the inbox then opens; the link works after).
        return reply.redirect(
          inbox || taskId === undefined ? '/inbox/sign-in' : `${INBOX_RUN_PREFIX}${encodeURIComponent(taskId)}`,
          303,
        );
      }
      throw error; // the server's own handler answers as for every route
    });
    scope.get('/runs/:taskId', (request, reply) => show(request, reply, false));
    scope.get(`${INBOX_RUN_PREFIX}:taskId`, (request, reply) => show(request, reply, true));
  });
}

/**
 * What the task workflow was started with: its trace context (present when the starting client
 * traced) and its cost budget (the limit of a finished task, whose workflow no longer answers a
 * query cheaply). Undefined when Temporal does not have the run (or does not answer in time).
 */
async function workflowStart(
  deps: RunViewerDeps,
  taskId: string,
): Promise<{ traceId?: string; costBudgetUsd?: number } | undefined> {
  try {
    const response = await deps.withTimeout("reading the task workflow's start", () =>
      deps.client.temporal.workflowService.getWorkflowExecutionHistory({
        namespace: deps.namespace,
        execution: { workflowId: taskWorkflowId(taskId) },
        maximumPageSize: 1,
      }),
    );
    const started = response.history?.events?.[0]?.workflowExecutionStartedEventAttributes;
    if (!started) return undefined;
    const header = started.header?.fields?.[TRACE_HEADER];
    const carrier = header ? defaultPayloadConverter.fromPayload<Record<string, string>>(header) : undefined;
    const traceId = /^[\da-f]{2}-([\da-f]{32})-[\da-f]{16}-[\da-f]{2}$/.exec(carrier?.traceparent ?? '')?.[1];
    const payload = started.input?.payloads?.[0];
    const input = payload ? defaultPayloadConverter.fromPayload<Partial<TaskWorkflowInput>>(payload) : undefined;
    return {
      ...(traceId ? { traceId } : {}),
      ...(typeof input?.costBudgetUsd === 'number' ? { costBudgetUsd: input.costBudgetUsd } : {}),
    };
  } catch {
    return undefined;
  }
}

/** As the inbox's pages: not cached, never framed, our own inline style only, no script at all. */
function sendPage(reply: FastifyReply, html: string): FastifyReply {
  return reply
    .header('content-type', 'text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('x-frame-options', 'DENY')
    .header(
      'content-security-policy',
      "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    )
    .send(html);
}
