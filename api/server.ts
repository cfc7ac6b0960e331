/**
 * The HTTP API (`/v1`), built on Fastify 5: bearer tokens with scopes, zod validation, an OpenAPI
 * document generated from the same schemas, Server-Sent Events resumable with `Last-Event-ID`, JSON
 * errors `{ error: { code, message } }`, a request size limit, a per-token rate limit and timeouts.
 * Every workflow operation goes through the typed client (`AgentsClient`), like the CLI.
 */
import path from 'node:path';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { sql, type Kysely } from 'kysely';
import type { Registry } from 'prom-client';
import { z } from 'zod';
import { findAgent } from '../activities/store/agents';
import { findTask } from '../activities/store/tasks';
import { usageTotals } from '../activities/llm/usage';
import type { AgentsClient } from '../client';
import type { AgentRow, Database } from '../schema/database';
import { isTerminal, type TaskState } from '../workflows/rules/task-state';
import { ApiError, errorBody, toApiError } from './errors';
import { registerInbox } from './inbox';
import { apiMetrics } from './metrics';
import { buildOpenApi, type RouteDoc } from './openapi';
import * as S from './schemas';
import { tailStream, type StreamEvent } from '../client/streams';
import { ConversationClient, DeliveryRejectedError } from '../client/chat';
import { chatRunWorkflowId } from '../workflows/agent-contract';
import { TaskAdmin, type NotificationRow } from '../client/task-admin';
import { TEXT_STREAM_POLL_ONLY_MS, followTaskText, readTaskEvents, TaskEventHub } from './streams';
import { scopeAllows, verifyToken, type ApiPrincipal, type TokenScope } from './tokens';

/** 1 MiB: an agent's four identity files fit many times over; larger bodies are refused with 413. */
export const DEFAULT_BODY_LIMIT_BYTES = 1024 * 1024;
/** Requests per token per minute (SSE connections count once, when they open). */
export const DEFAULT_RATE_LIMIT_PER_MINUTE = 600;
/** A Temporal query, signal or update that has not answered by then is reported as 504. */
export const DEFAULT_CALL_TIMEOUT_MS = 10_000;
/** The whole request must arrive within this time (slow-loris protection); responses, SSE included, are not limited. */
const REQUEST_TIMEOUT_MS = 30_000;
/** SSE comment sent while nothing happens, so proxies and clients keep the connection open. */
const SSE_KEEPALIVE_MS = 15_000;
/** The rate limit's window. */
const RATE_WINDOW_MS = 60_000;
/**
 * The approvals row is written by an activity just before the workflow registers the request, so a
 * decision can arrive while the workflow does not know it yet: it is retried for this long.
 */
const APPROVAL_SETTLE_MS = 5_000;
const APPROVAL_SETTLE_POLL_MS = 100;
/** Cookie holding the inbox's token (HttpOnly, SameSite=Strict). */
export const INBOX_COOKIE = 'da_token';

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
  /** The Temporal runtime's Prometheus endpoint (Runtime telemetry `bindAddress`), appended to /metrics. */
  temporalMetricsUrl?: string;
  /** Fastify's logger (JSON lines on stdout, or to `stream`); tokens are never logged. Default off. */
  logger?: boolean | { stream: NodeJS.WritableStream };
}

declare module 'fastify' {
  interface FastifyRequest {
    principal?: ApiPrincipal;
  }
}

type Handler<P, Q, B> = (ctx: { params: P; query: Q; body: B; principal: ApiPrincipal; request: FastifyRequest; reply: FastifyReply }) => Promise<unknown>;

export type ApiServer = FastifyInstance & { closeStreams(): Promise<void> };

export async function buildApi(options: ApiOptions): Promise<ApiServer> {
  const { client, db } = options;
  const callTimeoutMs = options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  const rateLimit = options.rateLimitPerMinute ?? DEFAULT_RATE_LIMIT_PER_MINUTE;
  const uiBase = (options.temporalUiUrl ?? 'http://localhost:8233').replace(/\/$/, '');
  const namespace = options.namespace ?? 'default';
  const app = Fastify({
    bodyLimit: options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES,
    requestTimeout: REQUEST_TIMEOUT_MS,
    logger: options.logger
      ? {
          ...(typeof options.logger === 'object' ? { stream: options.logger.stream } : {}),
          // Only method and URL, with the inbox's token parameter redacted: no headers (Authorization, Cookie).
          serializers: { req: (req: { method: string; url: string }) => ({ method: req.method, url: req.url.replace(/([?&]token=)[^&]*/g, '$1[redacted]') }) },
        }
      : false,
    // Stack traces and internals never reach a client: every error goes through `toApiError`.
    return503OnClosing: true,
    // SSE connections stay open until the client leaves: closing the server must end them.
    forceCloseConnections: true,
  });
  const events = new TaskEventHub(db);
  const admin = new TaskAdmin(client.temporal, db);
  const conversations = new ConversationClient(client, options.databaseUrl ? { connectionString: options.databaseUrl } : {});
  /** Follows a run stream (a chat answer) to its `end` event. */
  const followRun = async (streamId: string, afterSeq: number, deliver: (e: StreamEvent) => void, signal: AbortSignal): Promise<void> => {
    for await (const e of tailStream(streamSource, streamId, { afterSeq, signal, ...(options.databaseUrl ? {} : { pollIntervalMs: TEXT_STREAM_POLL_ONLY_MS }) })) {
      deliver(e);
      if (e.kind === 'end') return;
    }
  };
  const streamSource = { db, ...(options.databaseUrl ? { connectionString: options.databaseUrl } : {}) };
  const openStreams = new Set<AbortController>();
  const metrics = apiMetrics(db);
  const routes: RouteDoc[] = [];

  // ---- errors --------------------------------------------------------------------------------------
  app.setErrorHandler((error, request, reply) => {
    const apiError = toApiError(error);
    if (apiError.status >= 500) request.log.error({ err: error }, 'request failed');
    void reply.status(apiError.status).send(errorBody(apiError));
  });
  app.setNotFoundHandler((request, reply) => {
    void reply.status(404).send(errorBody(new ApiError(404, 'route_not_found', `no route ${request.method} ${request.url.split('?')[0]}; see /v1/openapi.json`)));
  });
  // Form posts from the inbox page.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)));
  });

  // ---- auth and rate limit -------------------------------------------------------------------------
  const windows = new Map<string, { start: number; count: number }>();
  app.addHook('onRequest', async (request, reply) => {
    const url = request.url.split('?')[0]!;
    if (url === '/healthz') return;
    if (url === '/inbox' && request.method === 'GET') {
      const token = (request.query as Record<string, string | undefined>).token;
      if (token) {
        // Move the token from the URL (history, logs, Referer) into an HttpOnly cookie.
        const principal = await verifyToken(db, token);
        if (!principal) throw new ApiError(401, 'unauthorized', 'that token is unknown or revoked');
        void reply
          .header('set-cookie', `${INBOX_COOKIE}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/`)
          .redirect('/inbox', 303);
        return reply;
      }
    }
    const header = request.headers.authorization;
    let token: string | undefined;
    if (header !== undefined) {
      const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
      if (!match) throw new ApiError(401, 'unauthorized', 'the Authorization header must be "Bearer <token>"');
      token = match[1];
    } else if (url.startsWith('/inbox')) {
      token = cookie(request, INBOX_COOKIE);
    }
    if (!token) {
      if (url.startsWith('/inbox')) throw new ApiError(401, 'unauthorized', 'open /inbox?token=<operator token> once; the page keeps it in a cookie');
      throw new ApiError(401, 'unauthorized', 'send "Authorization: Bearer <token>"; create one with `npm run agents -- token create <name> --scope read|service|operator`');
    }
    const principal = await verifyToken(db, token);
    if (!principal) throw new ApiError(401, 'unauthorized', 'that token is unknown or revoked');
    request.principal = principal;
    const now = Date.now();
    const window = windows.get(principal.tokenId);
    if (!window || now - window.start >= RATE_WINDOW_MS) windows.set(principal.tokenId, { start: now, count: 1 });
    else if (++window.count > rateLimit) {
      const retryAfter = Math.ceil((window.start + RATE_WINDOW_MS - now) / 1000);
      void reply.header('retry-after', String(retryAfter));
      throw new ApiError(429, 'rate_limited', `token "${principal.name}" made more than ${rateLimit} requests this minute; retry in ${retryAfter} s`);
    }
  });

  const requireScope = (principal: ApiPrincipal | undefined, scope: TokenScope): ApiPrincipal => {
    if (!principal) throw new ApiError(401, 'unauthorized', 'a token is required');
    if (!scopeAllows(principal.scope, scope)) {
      throw new ApiError(403, 'forbidden', `this needs a token with scope "${scope}"; "${principal.name}" has scope "${principal.scope}"`);
    }
    return principal;
  };

  function route<P extends z.ZodType = z.ZodUndefined, Q extends z.ZodType = z.ZodUndefined, B extends z.ZodType = z.ZodUndefined>(spec: {
    method: 'GET' | 'POST' | 'PUT';
    url: string;
    scope: TokenScope;
    summary: string;
    params?: P;
    query?: Q;
    body?: B;
    response?: z.ZodType;
    status?: number;
    stream?: boolean;
    handler: Handler<z.infer<P>, z.infer<Q>, z.infer<B>>;
  }): void {
    routes.push({ method: spec.method, url: spec.url, scope: spec.scope, summary: spec.summary, params: spec.params, query: spec.query, body: spec.body, response: spec.response, status: spec.status, stream: spec.stream });
    app.route({
      method: spec.method,
      url: spec.url,
      handler: async (request, reply) => {
        const principal = requireScope(request.principal, spec.scope);
        const params = parse(spec.params, request.params, 'path');
        const query = parse(spec.query, spec.query ? request.query : undefined, 'query');
        if (spec.body && request.body === undefined) throw new ApiError(400, 'invalid_request', 'this route needs a JSON body (Content-Type: application/json)');
        const body = parse(spec.body, spec.body ? request.body : undefined, 'body');
        const result = await spec.handler({ params: params as never, query: query as never, body: body as never, principal, request, reply });
        if (reply.sent) return reply;
        return reply.status(spec.status ?? 200).send(result);
      },
    });
  }

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
      if (controller.signal.aborted) throw new ApiError(504, 'timeout', `${what} did not answer within ${callTimeoutMs} ms; is a worker polling the task queue?`);
      throw error;
    } finally {
      clearTimeout(timer);
    }
  };

  /**
   * The task's row; a task whose workflow started but has not written its row yet (its first activity
   * does, a moment after `POST /v1/tasks` answered) counts as pending, so a client's first GET right
   * after the 201 never sees a 404.
   */
  const requireTask = async (taskId: string): Promise<{ state: string }> => {
    const task = await findTask(db, taskId);
    if (task) return task;
    const started = await withTimeout('looking up the task workflow', () => client.handle(taskId).describe()).then(
      (d) => d.status.name === 'RUNNING',
      (error: unknown) => (error instanceof ApiError ? Promise.reject(error) : false),
    );
    if (!started) throw new ApiError(404, 'task_not_found', `no task ${JSON.stringify(taskId)}`);
    return { state: 'pending' };
  };
  /** Signals to a task whose workflow has ended are refused with 409, not lost. */
  const signalTask = async (taskId: string, what: string, send: () => Promise<void>): Promise<{ ok: true }> => {
    const task = await requireTask(taskId);
    if (isTerminal(task.state as TaskState)) throw new ApiError(409, 'task_finished', `task ${taskId} is ${task.state}; it no longer takes ${what}`);
    await withTimeout(what, send);
    return { ok: true };
  };

  // ---- health, metrics, OpenAPI --------------------------------------------------------------------
  app.get('/healthz', async (_request, reply) => {
    const check = async (fn: () => Promise<unknown>) => {
      const started = Date.now();
      try {
        await Promise.race([fn(), new Promise((_, reject) => setTimeout(() => reject(new Error('no answer within 2 s')), 2_000))]);
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
    requireScope(request.principal, 'read');
    const parts = [await metrics.registry.metrics()];
    for (const registry of options.registries ?? []) parts.push(await registry.metrics());
    if (options.temporalMetricsUrl) {
      parts.push(await fetch(options.temporalMetricsUrl, { signal: AbortSignal.timeout(2_000) }).then((r) => r.text()).catch(() => '# temporal runtime metrics unavailable\n'));
    }
    return reply.header('content-type', metrics.registry.contentType).send(parts.join('\n'));
  });

  app.get('/v1/openapi.json', async (request) => {
    requireScope(request.principal, 'read');
    return buildOpenApi(routes);
  });

  // ---- agents ---------------------------------------------------------------------------------------
  route({
    method: 'PUT',
    url: '/v1/agents/:agentId',
    scope: 'operator',
    summary: 'Create or replace an agent (identity files, config, workspace)',
    params: S.AgentIdParams,
    body: S.AgentUpsertBody,
    response: S.AgentSchema,
    handler: async ({ params, body }) => {
      await client.upsertAgent({
        id: params.agentId,
        name: body.name,
        description: body.description,
        files: body.files,
        config: body.config,
        workspaceDir: path.resolve(body.workspaceDir ?? path.join(options.workspaceRoot, params.agentId)),
      });
      return agentJson((await findAgent(db, params.agentId))!);
    },
  });
  route({
    method: 'GET',
    url: '/v1/agents/:agentId',
    scope: 'read',
    summary: 'An agent with its identity files',
    params: S.AgentIdParams,
    response: S.AgentWithFilesSchema,
    handler: async ({ params }) => {
      const agent = await findAgent(db, params.agentId);
      if (!agent) throw new ApiError(404, 'agent_not_found', `no agent ${JSON.stringify(params.agentId)}`);
      return { ...agentJson(agent), files: { soul: agent.soul_md, agents: agent.agents_md, heartbeat: agent.heartbeat_md, tools: agent.tools_md } };
    },
  });
  route({
    method: 'GET',
    url: '/v1/agents',
    scope: 'read',
    summary: 'Every agent',
    response: z.object({ agents: z.array(S.AgentSchema) }),
    handler: async () => ({ agents: (await db.selectFrom('agents').selectAll().orderBy('id').execute()).map(agentJson) }),
  });
  route({
    method: 'GET',
    url: '/v1/agents/:agentId/usage',
    scope: 'read',
    summary: "An agent's LLM tokens, cost and call count (optionally since an instant)",
    params: S.AgentIdParams,
    query: S.UsageQuery,
    response: S.UsageResponse,
    handler: async ({ params, query }) => {
      if (!(await findAgent(db, params.agentId))) throw new ApiError(404, 'agent_not_found', `no agent ${JSON.stringify(params.agentId)}`);
      return client.agentUsage(params.agentId, { since: query.since ? new Date(query.since) : undefined });
    },
  });

  // ---- tasks ----------------------------------------------------------------------------------------
  route({
    method: 'POST',
    url: '/v1/tasks',
    scope: 'service',
    summary: 'Start a task (workflow task-{taskId}); createdBy is the token name',
    body: S.StartTaskBody,
    response: S.StartTaskResponse,
    status: 201,
    handler: async ({ body, principal }) => {
      if (body.taskId && (await findTask(db, body.taskId))) throw new ApiError(409, 'task_exists', `task ${body.taskId} already exists; omit taskId for a fresh one`);
      const { taskId, workflowId } = await withTimeout('starting the task', () =>
        client.startTask({ ...body, description: body.description ?? body.title, createdBy: principal.name }),
      );
      return { taskId, workflowId };
    },
  });
  route({
    method: 'GET',
    url: '/v1/tasks/:taskId',
    scope: 'read',
    summary: 'Live status (the workflow `status` query; the stored row once the workflow is gone)',
    params: S.TaskIdParams,
    response: S.TaskStatusSchema,
    handler: async ({ params }) => {
      await requireTask(params.taskId);
      return withTimeout('the status query', () => client.getStatus(params.taskId));
    },
  });
  route({
    method: 'GET',
    url: '/v1/tasks/:taskId/usage',
    scope: 'read',
    summary: "A task's LLM tokens, cost and call count",
    params: S.TaskIdParams,
    response: S.UsageResponse,
    handler: async ({ params }) => {
      await requireTask(params.taskId);
      return usageTotals(db, { taskId: params.taskId });
    },
  });
  route({
    method: 'GET',
    url: '/v1/tasks/:taskId/events',
    scope: 'read',
    summary:
      'The task timeline. JSON by default (`?after=<seq>`); with `Accept: text/event-stream`, Server-Sent Events whose ids are the sequence numbers, resumable with `Last-Event-ID`, ending with an `end` event once the task is finished',
    params: S.TaskIdParams,
    query: S.EventsQuery,
    response: S.EventsResponse,
    stream: true,
    handler: async ({ params, query, request, reply }) => {
      const task = await requireTask(params.taskId);
      const lastEventId = request.headers['last-event-id'];
      const after = lastEventId !== undefined ? parseSeq(String(lastEventId)) : (query.after ?? 0);
      if (!(request.headers.accept ?? '').includes('text/event-stream')) {
        return { events: await readTaskEvents(db, params.taskId, after) };
      }
      const sse = openSse(request, reply);
      let finished = isTerminal(task.state as TaskState);
      const unsubscribe = await events.subscribe(params.taskId, after, (event) => {
        sse.send({ id: String(event.seq), data: event });
        if (event.type === 'state-changed' && isTerminal(event.data.state as TaskState)) finished = true;
      });
      sse.onClose(unsubscribe);
      // A finished task's stream ends once its backlog is sent (and once the terminal event arrives).
      const ender = setInterval(() => {
        if (finished) {
          clearInterval(ender);
          sse.end();
        }
      }, 100);
      sse.onClose(() => clearInterval(ender));
      return reply;
    },
  });
  route({
    method: 'GET',
    url: '/v1/tasks/:taskId/deltas',
    scope: 'read',
    summary:
      "The LLM's text as it streams (Server-Sent Events), read from the task's stored run stream: each event's id is its sequence number in the stream, so `Last-Event-ID` resumes with no gap and no duplicate on any API process. Events: `delta` (`text`), `step-start`, `step-end`, `rewind` (an attempt that died mid-stream: drop the text of the deltas `data.fromSeq`..`data.toSeq`, the retry writes it again), then `end` once the task is finished",
    params: S.TaskIdParams,
    stream: true,
    handler: async ({ params, request, reply }) => {
      await requireTask(params.taskId);
      const lastEventId = request.headers['last-event-id'];
      const after = lastEventId !== undefined ? parseSeq(String(lastEventId)) : 0;
      const sse = openSse(request, reply);
      pipeRunStream(sse, (deliver, signal) => followTaskText(streamSource, params.taskId, after, deliver, signal));
      return reply;
    },
  });
  route({
    method: 'POST',
    url: '/v1/tasks/:taskId/cancel',
    scope: 'operator',
    summary: 'Cancel the task (stops an in-flight LLM stream or command; the task ends cancelled)',
    params: S.TaskIdParams,
    response: S.AcceptedResponse,
    status: 202,
    handler: async ({ params }) => signalTask(params.taskId, 'cancellation', () => client.cancel(params.taskId)),
  });
  route({
    method: 'POST',
    url: '/v1/tasks/:taskId/pause',
    scope: 'operator',
    summary: 'Pause the task (→ blocked) after its current step',
    params: S.TaskIdParams,
    body: S.PauseBody,
    response: S.AcceptedResponse,
    status: 202,
    handler: async ({ params, body }) => signalTask(params.taskId, 'a pause', () => client.pause(params.taskId, body.reason)),
  });
  route({
    method: 'POST',
    url: '/v1/tasks/:taskId/resume',
    scope: 'operator',
    summary: 'Resume a paused task (same round and session)',
    params: S.TaskIdParams,
    response: S.AcceptedResponse,
    status: 202,
    handler: async ({ params }) => signalTask(params.taskId, 'a resume', () => client.resume(params.taskId)),
  });
  route({
    method: 'POST',
    url: '/v1/tasks/:taskId/comments',
    scope: 'service',
    summary: "A comment merged into the agent's next LLM turn (from = the token name)",
    params: S.TaskIdParams,
    body: S.CommentBody,
    response: S.AcceptedResponse,
    status: 202,
    handler: async ({ params, body, principal }) => signalTask(params.taskId, 'comments', () => client.comment(params.taskId, body.text, principal.name)),
  });
  route({
    method: 'POST',
    url: '/v1/tasks/:taskId/review',
    scope: 'operator',
    summary: 'Accept the submitted work or ask for a revision (decidedBy = the token name)',
    params: S.TaskIdParams,
    body: S.ReviewBody,
    response: S.AcceptedResponse,
    status: 202,
    handler: async ({ params, body, principal }) => {
      const task = await requireTask(params.taskId);
      if (task.state !== 'review') throw new ApiError(409, 'not_in_review', `task ${params.taskId} is ${task.state}, not waiting for review`);
      return signalTask(params.taskId, 'a review decision', () => client.review(params.taskId, { ...body, decidedBy: principal.name }));
    },
  });

  // ---- approvals ------------------------------------------------------------------------------------
  route({
    method: 'POST',
    url: '/v1/agents/:agentId/chat',
    scope: 'service',
    summary:
      "Send a chat message to the agent's mailbox and stream the answer (Server-Sent Events): first an `item` event `{ itemId, status, channel }`, then the chat run's stream (`step-start`, `delta` with `text`, `rewind`, `step-end`, `end`), ids = sequence numbers. Resume with `GET /v1/agents/{agentId}/chat/{itemId}/stream` and `Last-Event-ID`. `from` defaults to the token's name as a human; the channel to that sender's direct channel",
    params: S.AgentIdParams,
    body: S.ChatBody,
    stream: true,
    handler: async ({ params, body, principal, request, reply }) => {
      if (!(await findAgent(db, params.agentId))) throw new ApiError(404, 'agent_not_found', `no agent ${JSON.stringify(params.agentId)}`);
      const delivered = await withTimeout('delivering the chat message', () =>
        conversations.deliver(params.agentId, { kind: 'chat', from: body.from ?? { type: 'human', id: principal.name }, text: body.text, ...(body.channel ? { channel: body.channel } : {}) }),
      ).catch((error: unknown) => {
        if (error instanceof DeliveryRejectedError) throw new ApiError(400, 'invalid_request', error.message);
        throw error;
      });
      const sse = openSse(request, reply);
      sse.send({ event: 'item', data: delivered });
      pipeRunStream(sse, (deliver, signal) => followRun(chatRunWorkflowId(params.agentId, delivered.mergedInto ?? delivered.itemId), 0, deliver, signal));
      return reply;
    },
  });
  route({
    method: 'GET',
    url: '/v1/agents/:agentId/chat/:itemId/stream',
    scope: 'read',
    summary: 'The answer to a chat message as Server-Sent Events (the chat run stream), from the start or after `Last-Event-ID`, with no gap and no duplicate on any API process; ends with `end`. A merged message follows the item it was merged into',
    params: S.ChatItemParams,
    stream: true,
    handler: async ({ params, request, reply }) => {
      if (!(await findAgent(db, params.agentId))) throw new ApiError(404, 'agent_not_found', `no agent ${JSON.stringify(params.agentId)}`);
      const item = await db.selectFrom('mailbox_items').select(['id', 'merged_into']).where('id', '=', params.itemId).where('agent_id', '=', params.agentId).executeTakeFirst();
      if (!item) throw new ApiError(404, 'item_not_found', `agent ${params.agentId} has no mailbox item ${JSON.stringify(params.itemId)}`);
      const lastEventId = request.headers['last-event-id'];
      const after = lastEventId !== undefined ? parseSeq(String(lastEventId)) : 0;
      const sse = openSse(request, reply);
      pipeRunStream(sse, (deliver, signal) => followRun(chatRunWorkflowId(params.agentId, item.merged_into ?? item.id), after, deliver, signal));
      return reply;
    },
  });
  route({
    method: 'GET',
    url: '/v1/agents/:agentId/mailbox',
    scope: 'read',
    summary: "The agent's mailbox (the agent workflow's `mailbox` query): items with their triage state and result, what it is focused on, counters. An agent that never received anything has an empty, idle mailbox",
    params: S.AgentIdParams,
    response: S.MailboxResponse,
    handler: async ({ params }) => {
      if (!(await findAgent(db, params.agentId))) throw new ApiError(404, 'agent_not_found', `no agent ${JSON.stringify(params.agentId)}`);
      return withTimeout('the mailbox query', () => conversations.mailbox(params.agentId)).catch((error: unknown) => {
        if (error instanceof WorkflowNotFoundError) return { agentId: params.agentId, attention: 'idle', items: [], counters: { delivered: 0, completed: 0, merged: 0, preempted: 0 } };
        throw error;
      });
    },
  });
  route({
    method: 'GET',
    url: '/v1/notifications',
    scope: 'read',
    summary: 'The notification inbox (what agents told people with `notify_user`, and questions nobody waits on), newest first, at most 200; `?agentId=` for one agent, `?unread=true` for unread only',
    query: S.NotificationsQuery,
    response: S.NotificationsResponse,
    handler: async ({ query }) => {
      if (query.agentId && !(await findAgent(db, query.agentId))) throw new ApiError(404, 'agent_not_found', `no agent ${JSON.stringify(query.agentId)}`);
      const rows = await admin.notifications({ ...(query.agentId ? { agentId: query.agentId } : {}), unreadOnly: query.unread === 'true' });
      return { notifications: rows.map(notificationJson) };
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
      const found = await db.selectFrom('notifications').select('id').where('id', 'in', ids).execute();
      const missing = ids.filter((id) => !found.some((r) => r.id === id));
      if (missing.length) throw new ApiError(404, 'notification_not_found', `no notification ${missing.slice(0, 5).map((id) => JSON.stringify(id)).join(', ')}${missing.length > 5 ? ` and ${missing.length - 5} more` : ''}; nothing was marked`);
      return { marked: await admin.markRead(ids, principal.name) };
    },
  });
  route({
    method: 'GET',
    url: '/v1/approvals',
    scope: 'read',
    summary: 'Pending approval requests across all tasks, oldest first',
    response: S.ApprovalsResponse,
    handler: async () => {
      const rows = await db.selectFrom('approvals').selectAll().where('status', '=', 'pending').orderBy('requested_at').execute();
      return {
        approvals: rows.map((r) => ({ requestId: r.id, taskId: r.task_id, agentId: r.agent_id, workflowId: r.workflow_id, tool: r.tool, summary: r.summary, args: r.args, requestedAt: r.requested_at.toISOString() })),
      };
    },
  });
  route({
    method: 'POST',
    url: '/v1/approvals/:requestId',
    scope: 'operator',
    summary: 'Approve or reject a pending request through the validated `decideApproval` update; returns the recorded decision (decidedBy = the token name)',
    params: S.RequestIdParams,
    body: S.DecideApprovalBody,
    response: S.RecordedApprovalSchema,
    handler: async ({ params, body, principal }) => decideApproval(params.requestId, body, principal),
  });

  async function decideApproval(requestId: string, body: z.infer<typeof S.DecideApprovalBody>, principal: ApiPrincipal) {
    const row = await db.selectFrom('approvals').select(['task_id', 'status']).where('id', '=', requestId).executeTakeFirst();
    if (!row || !row.task_id) throw new ApiError(404, 'approval_not_found', `no approval request ${JSON.stringify(requestId)}`);
    if (row.status !== 'pending') throw new ApiError(409, 'approval_decided', `approval request ${requestId} is already ${row.status}`);
    const taskId = row.task_id;
    const settleBy = Date.now() + APPROVAL_SETTLE_MS;
    for (;;) {
      try {
        return await withTimeout('the decideApproval update', () => client.decideApproval(taskId, { requestId, decision: body.decision, comment: body.comment, decidedBy: principal.name }));
      } catch (error) {
        const cause = error instanceof WorkflowUpdateFailedError ? ((error.cause as { message?: string } | undefined)?.message ?? '') : '';
        if (!cause.startsWith(`no pending approval request ${requestId}`) || Date.now() > settleBy) throw error;
        const now = await db.selectFrom('approvals').select('status').where('id', '=', requestId).executeTakeFirst();
        if (now?.status !== 'pending') throw error;
        await new Promise((r) => setTimeout(r, APPROVAL_SETTLE_POLL_MS));
      }
    }
  }

  /** Sends a run stream's events as SSE (id = sequence number, event = kind) until it ends or the client leaves. */
  function pipeRunStream(sse: Sse, follow: (deliver: (e: StreamEvent) => void, signal: AbortSignal) => Promise<unknown>): void {
    const stop = new AbortController();
    openStreams.add(stop);
    sse.onClose(() => stop.abort());
    let ended = false;
    follow((e) => {
      ended = e.kind === 'end';
      sse.send({ id: String(e.seq), event: e.kind, data: runStreamEventJson(e) });
    }, stop.signal)
      .then(() => !stop.signal.aborted && sse.end(!ended))
      .catch((error: unknown) => {
        app.log.error({ err: error }, 'run stream failed');
        sse.end();
      })
      .finally(() => openStreams.delete(stop));
  }

  registerInbox(app, { db, client, uiBase, namespace, requireScope, decideApproval, withTimeout });
  metrics.observe(app);

  const server = app as unknown as ApiServer;
  server.closeStreams = async () => {
    events.close();
    for (const stream of openStreams) stream.abort();
  };
  return server;
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

function agentJson(agent: AgentRow) {
  return {
    id: agent.id,
    name: agent.name,
    description: agent.description,
    contentHash: agent.content_hash,
    config: agent.config as z.infer<typeof S.AgentConfigSchema>,
    workspaceDir: agent.workspace_dir,
    createdAt: agent.created_at.toISOString(),
    updatedAt: agent.updated_at.toISOString(),
  };
}

function parse<T extends z.ZodType | undefined>(schema: T, value: unknown, where: string): T extends z.ZodType ? z.infer<T> : undefined {
  if (!schema) return undefined as never;
  const result = schema.safeParse(value ?? {});
  if (!result.success) {
    const issues = result.error.issues.map((i) => `${[where, ...i.path].join('.')}: ${i.message}`).join('; ');
    throw new ApiError(400, 'invalid_request', issues);
  }
  return result.data as never;
}

function parseSeq(value: string): number {
  if (!/^\d{1,15}$/.test(value)) throw new ApiError(400, 'invalid_request', `Last-Event-ID must be an event sequence number; got ${JSON.stringify(value.slice(0, 40))}`);
  return Number(value);
}

function cookie(request: FastifyRequest, name: string): string | undefined {
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const [key, ...rest] = part.trim().split('=');
    if (key === name) return decodeURIComponent(rest.join('='));
  }
  return undefined;
}

/** Takes over the response for Server-Sent Events. */
/** A run stream event as sent to clients (the stream id is the URL's business). */
function runStreamEventJson(e: StreamEvent) {
  return {
    seq: e.seq,
    kind: e.kind,
    ...(e.stepKey !== undefined ? { stepKey: e.stepKey } : {}),
    attempt: e.attempt,
    part: e.part,
    ...(e.text !== undefined && e.text !== null ? { text: e.text } : {}),
    ...(e.data ? { data: e.data } : {}),
    createdAt: e.createdAt.toISOString(),
  };
}

type Sse = ReturnType<typeof openSse>;

function openSse(request: FastifyRequest, reply: FastifyReply) {
  void reply.hijack();
  const res = reply.raw;
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache, no-transform', connection: 'keep-alive', 'x-accel-buffering': 'no' });
  res.write('retry: 1000\n\n');
  const closers: Array<() => void> = [];
  let open = true;
  const keepalive = setInterval(() => res.write(': keepalive\n\n'), SSE_KEEPALIVE_MS);
  const close = () => {
    if (!open) return;
    open = false;
    clearInterval(keepalive);
    for (const fn of closers) fn();
  };
  request.raw.on('close', close);
  res.on('close', close);
  return {
    send(message: { id?: string; event?: string; data: unknown }) {
      if (!open) return;
      let frame = '';
      if (message.id !== undefined) frame += `id: ${message.id}\n`;
      if (message.event !== undefined) frame += `event: ${message.event}\n`;
      frame += `data: ${JSON.stringify(message.data)}\n\n`;
      res.write(frame);
    },
    /** Ends the response, after an `end` event unless the stream sent its own. */
    end(withEndEvent = true) {
      if (!open) return;
      if (withEndEvent) res.write('event: end\ndata: {}\n\n');
      res.end();
      close();
    },
    onClose(fn: () => void) {
      if (open) closers.push(fn);
      else fn();
    },
  };
}
