/**
 * The HTTP API (`/v1`), built on Fastify 5: bearer tokens with scopes, zod validation, an OpenAPI
 * document generated from the same schemas, Server-Sent Events resumable with `Last-Event-ID`, JSON
 * errors `{ error: { code, message } }`, a request size limit, a per-token rate limit and timeouts.
 * Every workflow operation goes through the typed client (`AgentsClient`), like the CLI.
 */
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { sql, type Kysely } from 'kysely';
import type { Registry } from 'prom-client';
import { ZodObject, type z } from 'zod';
import { findTask } from '../activities/store/tasks';
import { findTaskInOrg, PLATFORM } from '../activities/store/tenancy';
import type { AgentsClient } from '../client';
import { taskFinished } from '../client/errors';
import type { AgentRow, Database } from '../schema/database';
import { OrgIdSearchAttribute } from '../workflows/contract';
import { isTerminal, type TaskState } from '../workflows/rules/task-state';
import { ApiError, errorBody, toApiError } from './errors';
import { inServerSpan } from './server-span';
import { registerInbox } from './inbox';
import { findSession, requireSameOrigin, SESSION_COOKIE, type InboxSession } from './inbox-sessions';
import type { SsoOptions } from './sso';
import { apiMetrics } from './metrics';
import { registerMcpEndpoint } from './mcp-server';
import { buildOpenApi, type RouteDoc } from './openapi';
import { agentInOrgOr404, agentsInOrg, taskNotFound } from './org-walls';
import type { ApiContext, DefineRoute } from './route-kit';
import { registerAgentRoutes } from './routes/agents';
import { registerApprovalRoutes } from './routes/approvals';
import { registerConversationRoutes } from './routes/conversations';
import { registerOrganisationRoutes } from './routes/organisations';
import { registerTaskRoutes } from './routes/tasks';
import { registerEvalRoutes } from './routes/evals';
import { registerEvalPages } from './evals-page';
import { registerRunViewer } from './run-viewer';
import { fetchTemporalMetrics } from '../worker/telemetry';
import { RunStreams } from './sse';
import { temporalContractDocument } from './temporal-contract';
import { TaskEventHub } from './streams';
import { scopeAllows, verifyToken, type ApiPrincipal, type TokenScope } from './tokens';

/** 1 MiB: an agent's four identity files fit many times over; larger bodies are refused with 413. */
export const DEFAULT_BODY_LIMIT_BYTES = 1024 * 1024;
/** Requests per token per minute (SSE connections count once, when they open). */
export const DEFAULT_RATE_LIMIT_PER_MINUTE = 600;
/** A Temporal query, signal or update that has not answered by then is reported as 504. */
export const DEFAULT_CALL_TIMEOUT_MS = 10_000;
/** The whole request must arrive within this time (slow-loris protection); responses, SSE included, are not limited. */
const REQUEST_TIMEOUT_MS = 30_000;
/** The rate limit's window. */
const RATE_WINDOW_MS = 60_000;
/** A metrics series labelled with an agent: its id (escaped as the text format escapes it). */
const AGENT_LABEL = /^[^#][^{]*\{(?:[^}]*,)?agent="((?:[^"\\]|\\.)*)"/;
/** Inbox pages a browser may reach before signing in (posts to them still pass the origin check). */
const INBOX_PUBLIC_PATHS = new Set(['/inbox/sign-in', '/inbox/sso', '/inbox/sso/callback']);

export interface ApiOptions {
  client: AgentsClient;
  db: Kysely<Database>;
  /** A PostgreSQL server URL for LISTEN (run streams wake at once); absent: they poll. */
  databaseUrl?: string;
  /** Default workspace folder for agents upserted without one: `<root>/<agentId>`. */
  workspaceRoot: string;
  namespace?: string;
  /** The Temporal Web UI, for links from the inbox (default http://localhost:8233). */
  temporalUiUrl?: string;
  bodyLimitBytes?: number;
  rateLimitPerMinute?: number;
  callTimeoutMs?: number;
  /** Extra Prometheus registries served at /metrics (the in-process worker's telemetry). */
  registries?: Registry[];
  /** The Temporal runtime's Prometheus endpoint (Runtime telemetry `bindAddress`), served at /metrics/temporal. */
  temporalMetricsUrl?: string;
  /**
   * Behind a reverse proxy that terminates TLS: trust its `X-Forwarded-Proto`/`-Host`, so the inbox's
   * origin check and its Secure cookie see the address the browser used. Default off (a direct client
   * could forge them).
   */
  trustProxy?: boolean;
  /** Single sign-on to the inbox through an OpenID Connect provider (api/sso.ts); absent: operator tokens only. */
  sso?: SsoOptions;
  /**
   * Fastify's logger, JSON lines; tokens are never logged. `true`: every request on stdout; `{ stream }`:
   * to that stream (`where` names it in 500 answers; `level` default info). Default (or `false`):
   * failures only (level error) on stderr, so a 500 that says where its error is logged is never a dead end.
   */
  logger?: boolean | { stream: NodeJS.WritableStream; where?: string; level?: 'info' | 'warn' | 'error' };
}

declare module 'fastify' {
  interface FastifyRequest {
    principal?: ApiPrincipal;
    /** The inbox session a browser request came with (absent for a bearer token). */
    inboxSession?: InboxSession;
  }
}

export type ApiServer = FastifyInstance & { closeStreams(): Promise<void> };

export async function buildApi(options: ApiOptions): Promise<ApiServer> {
  const { client, db } = options;
  const callTimeoutMs = options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  const rateLimit = options.rateLimitPerMinute ?? DEFAULT_RATE_LIMIT_PER_MINUTE;
  const uiBase = (options.temporalUiUrl ?? 'http://localhost:8233').replace(/\/$/, '');
  const namespace = options.namespace ?? 'default';
  const given = typeof options.logger === 'object' ? options.logger : undefined;
  const logTo =
    options.logger === true
      ? { stream: process.stdout, where: "the API process's standard output", level: 'info' }
      : {
          stream: given?.stream ?? process.stderr,
          where: given?.where ?? (given ? 'the log stream the API was given' : "the API process's standard error"),
          level: given?.level ?? (given ? 'info' : 'error'),
        };
  const app = Fastify({
    bodyLimit: options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES,
    trustProxy: options.trustProxy ?? false,
    requestTimeout: REQUEST_TIMEOUT_MS,
    logger: {
      stream: logTo.stream,
      level: logTo.level,
      // Only method and URL, with the inbox's token parameter redacted: no headers (Authorization, Cookie).
      // (A token in a URL is refused, but its request is still logged: redacted.)
      serializers: {
        req: (req: { method: string; url: string }) => ({
          method: req.method,
          url: req.url.replace(/([?&]token=)[^&]*/g, '$1[redacted]'),
        }),
      },
    },
    // Ids unique across restarts, so the one a 500 names finds one log line.
    genReqId: () => randomUUID(),
    // Stack traces and internals never reach a client: every error goes through `toApiError`.
    return503OnClosing: true,
    // SSE connections stay open until the client leaves: closing the server must end them.
    forceCloseConnections: true,
  });
  const events = new TaskEventHub(db);
  const runStreams = new RunStreams(app.log);
  const metrics = apiMetrics(db);
  const routes: RouteDoc[] = [];

  // ---- errors --------------------------------------------------------------------------------------
  /** The answer to a failure; an unexpected one is logged first, under the request id the answer names. */
  const failure = (error: unknown, request: FastifyRequest): ApiError => {
    const apiError = toApiError(error, { requestId: request.id, where: logTo.where });
    if (apiError.status >= 500) request.log.error({ err: error }, 'request failed');
    return apiError;
  };
  app.setErrorHandler((error, request, reply) => {
    const apiError = failure(error, request);
    void reply.status(apiError.status).send(errorBody(apiError));
  });
  app.setNotFoundHandler((request, reply) => {
    void reply
      .status(404)
      .send(
        errorBody(
          new ApiError(
            404,
            'route_not_found',
            `no route ${request.method} ${request.url.split('?')[0]}; see /v1/openapi.json`,
          ),
        ),
      );
  });
  // Form posts from the inbox page.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)));
  });

  // ---- auth and rate limit -------------------------------------------------------------------------
  const windows = new Map<string, { start: number; count: number }>();
  app.addHook('onRequest', async (request, reply) => {
    const url = request.url.split('?')[0]!;
    // Every answer: no MIME sniffing, no full URL sent on to other sites (same-origin keeps `Origin` on
    // the inbox's own posts, which `no-referrer` would blank to "null").
    void reply.header('x-content-type-options', 'nosniff').header('referrer-policy', 'same-origin');
    if (url === '/healthz' || url === '/v1/openapi.json' || url === '/v1/temporal-contract.json') return;
    if (/[?&]token=/.test(request.url)) {
      // A URL lands in history, logs and Referer headers: a secret never belongs in one.
      throw new ApiError(
        400,
        'token_in_url',
        'never put a token in a URL: send "Authorization: Bearer <token>", or sign in to the inbox at /inbox/sign-in',
      );
    }
    const inbox = url === '/inbox' || url.startsWith('/inbox/');
    const header = request.headers.authorization;
    let principal: ApiPrincipal | undefined;
    if (header !== undefined) {
      const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
      if (!match) throw new ApiError(401, 'unauthorized', 'the Authorization header must be "Bearer <token>"');
      principal = await verifyToken(db, match[1]!);
      if (!principal) throw new ApiError(401, 'unauthorized', 'that token is unknown or revoked');
    } else if (inbox) {
      // A browser: the cookie is sent by itself, so a post must prove it comes from our own page.
      if (request.method !== 'GET' && request.method !== 'HEAD') requireSameOrigin(request);
      if (INBOX_PUBLIC_PATHS.has(url)) return;
      const sessionId = cookie(request, SESSION_COOKIE);
      const session = sessionId ? await findSession(db, sessionId) : undefined;
      if (!session) {
        if (url === '/inbox' && request.method === 'GET') return reply.redirect('/inbox/sign-in', 303);
        throw new ApiError(401, 'unauthorized', 'sign in at /inbox/sign-in (your session ended or was never opened)');
      }
      request.inboxSession = session;
      principal = session;
    } else {
      throw new ApiError(
        401,
        'unauthorized',
        'send "Authorization: Bearer <token>"; create one with `npm run agents -- token create <name> --scope read|service|operator`',
      );
    }
    request.principal = principal;
    const now = Date.now();
    const window = windows.get(principal.tokenId);
    if (!window || now - window.start >= RATE_WINDOW_MS) windows.set(principal.tokenId, { start: now, count: 1 });
    else if (++window.count > rateLimit) {
      const retryAfter = Math.ceil((window.start + RATE_WINDOW_MS - now) / 1000);
      void reply.header('retry-after', String(retryAfter));
      throw new ApiError(
        429,
        'rate_limited',
        `token "${principal.name}" made more than ${rateLimit} requests this minute; retry in ${retryAfter} s`,
      );
    }
  });

  const requireScope = (principal: ApiPrincipal | undefined, scope: TokenScope): ApiPrincipal => {
    if (!principal) throw new ApiError(401, 'unauthorized', 'a token is required');
    if (!scopeAllows(principal.scope, scope)) {
      throw new ApiError(
        403,
        'forbidden',
        `this needs a token with scope "${scope}"; "${principal.name}" has scope "${principal.scope}"`,
      );
    }
    return principal;
  };

  const route: DefineRoute = (spec) => {
    routes.push({
      method: spec.method,
      url: spec.url,
      scope: spec.scope,
      summary: spec.summary,
      params: spec.params,
      query: spec.query,
      body: spec.body,
      response: spec.response,
      status: spec.status,
      stream: spec.stream,
    });
    app.route({
      method: spec.method,
      url: spec.url,
      // Each call is a server span (continuing a caller's `traceparent`), so a task started here is
      // traced from this request on: the client interceptor puts this span's context in the workflow's headers.
      handler: (request, reply) =>
        inServerSpan(request, reply, spec.method, spec.url, async () => {
          const principal = requireScope(request.principal, spec.scope);
          const params = parse(spec.params, request.params, 'path');
          const query = parse(spec.query, spec.query ? request.query : undefined, 'query');
          if (spec.body && request.body === undefined)
            throw new ApiError(400, 'invalid_request', 'this route needs a JSON body (Content-Type: application/json)');
          const body = parse(spec.body, spec.body ? request.body : undefined, 'body');
          const result = await spec.handler({
            params: params as never,
            query: query as never,
            body: body as never,
            principal,
            request,
            reply,
          });
          if (reply.sent) return reply;
          return reply.status(spec.status ?? 200).send(result);
        }),
    });
  };

  /**
   * Runs Temporal calls with the API's timeout. On timeout the gRPC calls are cancelled too (not left
   * retrying in the background) and the client gets 504.
   */
  const withTimeout = async <T>(what: string, call: () => Promise<T>): Promise<T> => {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), callTimeoutMs);
    try {
      return await client.temporal.connection.withAbortSignal(controller.signal, call);
    } catch (error) {
      if (controller.signal.aborted)
        throw new ApiError(
          504,
          'timeout',
          `${what} did not answer within ${callTimeoutMs} ms; is a worker polling the task queue?`,
        );
      throw error;
    } finally {
      clearTimeout(timer);
    }
  };

  /**
   * The task's row when the principal reaches it. A task whose workflow started but has not written its
   * row yet (its first activity does, a moment after `POST /v1/tasks` answered) counts as pending, so a
   * client's first GET right after the 201 never sees a 404, but only for a principal of the
   * organisation the run names in its `OrgId` search attribute (set by every start of ours): a run
   * without one is the platform's alone until its row says whose it is. A row of another organisation
   * answers exactly as a task that never existed.
   */
  const requireTask = async (taskId: string, principal: ApiPrincipal): Promise<{ state: string }> => {
    const task = await findTaskInOrg(db, taskId, principal.org);
    if (task) return task;
    if (principal.org !== PLATFORM && (await findTask(db, taskId))) throw taskNotFound(taskId);
    const started = await withTimeout('looking up the task workflow', () => client.handle(taskId).describe()).then(
      (d) =>
        d.status.name === 'RUNNING' &&
        (principal.org === PLATFORM || d.typedSearchAttributes.get(OrgIdSearchAttribute) === principal.org),
      (error: unknown) => (error instanceof ApiError ? Promise.reject(error) : false),
    );
    if (!started) throw taskNotFound(taskId);
    return { state: 'pending' };
  };
  /** Signals to a task whose workflow has ended are refused with 409, not lost. */
  const signalTask = async (
    taskId: string,
    principal: ApiPrincipal,
    what: string,
    send: () => Promise<void>,
  ): Promise<{ ok: true }> => {
    const task = await requireTask(taskId, principal);
    if (isTerminal(task.state as TaskState)) throw taskFinished(taskId, task.state, what);
    await withTimeout(what, send);
    return { ok: true };
  };

  // ---- health, metrics, OpenAPI --------------------------------------------------------------------
  app.get('/healthz', async (_request, reply) => {
    const check = async (fn: () => Promise<unknown>) => {
      const started = Date.now();
      try {
        await Promise.race([
          fn(),
          new Promise((_, reject) => setTimeout(() => reject(new Error('no answer within 2 s')), 2_000)),
        ]);
        return { ok: true, latencyMs: Date.now() - started };
      } catch (error) {
        return { ok: false, error: error instanceof Error ? error.message : String(error) };
      }
    };
    const [postgres, temporal] = await Promise.all([
      check(() => sql`select 1`.execute(db)),
      check(() => client.temporal.connection.workflowService.getSystemInfo({})),
    ]);
    const ok = postgres.ok && temporal.ok;
    return reply.status(ok ? 200 : 503).send({ status: ok ? 'ok' : 'degraded', postgres, temporal });
  });

  app.get('/metrics', async (request, reply) => {
    const principal = requireScope(request.principal, 'read');
    const parts = [await metrics.registry.metrics()];
    for (const registry of options.registries ?? []) parts.push(await registry.metrics());
    const text = parts.join('\n');
    return reply
      .header('content-type', metrics.registry.contentType)
      .send(principal.org === PLATFORM ? text : await seriesOfOwnAgents(db, text, principal));
  });
  // The Temporal runtime's own metrics keep the SDK's names (counters without `_total`): served apart,
  // so /metrics passes `promtool check metrics` and a scrape config can treat them on their own.
  app.get('/metrics/temporal', async (request, reply) => {
    requireScope(request.principal, 'read');
    if (!options.temporalMetricsUrl)
      throw new ApiError(
        404,
        'route_not_found',
        'no Temporal runtime metrics here: set TEMPORAL_METRICS_BIND on the process that runs the worker',
      );
    const text = await fetchTemporalMetrics(options.temporalMetricsUrl);
    if (text === undefined)
      throw new ApiError(
        502,
        'upstream_unavailable',
        `the Temporal runtime metrics endpoint ${options.temporalMetricsUrl} does not answer`,
      );
    return reply.header('content-type', 'text/plain; version=0.0.4; charset=utf-8').send(text);
  });

  // The Temporal contract as JSON Schema, for services that drive the workflows with their own SDK. Public like the OpenAPI document.
  app.get('/v1/temporal-contract.json', async () => temporalContractDocument());
  // Public, like any API's published description: it holds no data, and clients are generated from it.
  app.get('/v1/openapi.json', async (request) =>
    buildOpenApi(routes, { serverUrl: `${request.protocol}://${request.host}` }),
  );

  /** The agent's row when the principal reaches it; another organisation's answers as an unknown one. */
  const requireAgent = (agentId: string, principal: ApiPrincipal): Promise<AgentRow> =>
    agentInOrgOr404(db, agentId, principal);
  const context: ApiContext = {
    app,
    client,
    db,
    route,
    runStreams,
    databaseUrl: options.databaseUrl,
    workspaceRoot: options.workspaceRoot,
    withTimeout,
    requireAgent,
    requireTask,
    signalTask,
  };
  registerAgentRoutes(context);
  registerTaskRoutes(context, events);
  registerConversationRoutes(context);
  registerOrganisationRoutes(context);
  const { decideApproval, delegateApproval } = registerApprovalRoutes(context);
  registerInbox(app, {
    db,
    client,
    uiBase,
    namespace,
    requireScope,
    decideApproval,
    delegateApproval,
    withTimeout,
    failure,
    ...(options.sso ? { sso: options.sso } : {}),
  });
  const forks = registerEvalRoutes(context);
  registerMcpEndpoint(context, decideApproval, forks);
  registerEvalPages(app, { forks, db, requireScope });
  registerRunViewer(app, { db, client, uiBase, namespace, requireScope, withTimeout });
  metrics.observe(app);

  const server = app as unknown as ApiServer;
  server.closeStreams = async () => {
    events.close();
    runStreams.closeAll();
  };
  return server;
}

/**
 * The metrics an organisation's principal reads: the deployment's aggregates, without the series that
 * name another organisation's agent (`agent="…"`, the per-agent spend).
 */
async function seriesOfOwnAgents(db: Kysely<Database>, text: string, principal: ApiPrincipal): Promise<string> {
  const lines = text.split('\n');
  const named = lines.flatMap((line) => {
    const match = AGENT_LABEL.exec(line);
    return match ? [match[1]!] : [];
  });
  const own = await agentsInOrg(db, named, principal);
  return lines
    .filter((line) => {
      const match = AGENT_LABEL.exec(line);
      return !match || own.has(match[1]!);
    })
    .join('\n');
}

function parse<T extends z.ZodType | undefined>(
  schema: T,
  value: unknown,
  where: string,
): T extends z.ZodType ? z.infer<T> : undefined {
  if (!schema) return undefined as never;
  const result = schema.safeParse(value ?? {});
  if (!result.success) {
    const issues = result.error.issues
      .map((i) => `${[where, ...i.path].join('.')}: ${issueMessage(i, schema)}`)
      .join('; ');
    throw new ApiError(400, 'invalid_request', issues);
  }
  return result.data as never;
}

/** zod's words, except for an unknown field: which one, and the fields this route takes. */
function issueMessage(issue: z.core.$ZodIssue, schema: z.ZodType): string {
  if (issue.code !== 'unrecognized_keys') return issue.message;
  const names = issue.keys.map((k) => JSON.stringify(k)).join(', ');
  const shape =
    issue.path.length === 0 && schema instanceof ZodObject ? Object.keys((schema as ZodObject).shape) : undefined;
  return `unknown field${issue.keys.length > 1 ? 's' : ''} ${names}${shape ? `; this route takes ${shape.join(', ')}` : ''}`;
}

function cookie(request: FastifyRequest, name: string): string | undefined {
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const [key, ...rest] = part.trim().split('=');
    if (key === name) return decodeURIComponent(rest.join('='));
  }
  return undefined;
}
