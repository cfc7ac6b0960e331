/**
 * The runtime as an MCP server: `/mcp` on the HTTP API speaks the Model Context Protocol's Streamable
 * HTTP transport (`@modelcontextprotocol/sdk`), so an IDE or a desktop assistant can start tasks, follow
 * them, decide approvals, review work and chat with agents. Same bearer tokens and scopes as the REST
 * routes (each tool names the scope it needs; a weaker token's call is refused with the reason), same
 * rate limit, and every operation goes through the same client library and checks as its REST twin,
 * organisations' walls included: a client of one organisation finds no other's agent, task or approval.
 *
 * Stateless: each POST gets a fresh server and transport, answered with JSON. Nothing about an MCP
 * client lives in an API process, so any API process behind a load balancer answers any request, a
 * restarted API loses nothing, and all state stays where it already is (Temporal and PostgreSQL).
 * Server-initiated streams (GET) have nothing to carry here and are answered 405, as the spec allows.
 */
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { ConversationClient, DeliveryRejectedError } from '../client/chat';
import { TASK_STATES, isTerminal } from '../workflows/rules/task-state';
import { ApiError, toApiError } from './errors';
import { agentOfOrgCondition, isPlatform } from './org-walls';
import type { ApiContext } from './route-kit';
import type { DecideApproval } from './routes/approvals';
import { ForkBody, refused as refusedFork } from './routes/evals';
import type { ForkClient } from '../client/forks';
import * as S from './schemas';
import { inServerSpan } from './server-span';
import { scopeAllows, type ApiPrincipal, type TokenScope } from './tokens';

/** The endpoint's path (a desktop client's `url`: `http://host:port/mcp`). */
export const MCP_PATH = '/mcp';
/** Longest a `task_status` call waits for a change: under common HTTP client and proxy timeouts (30-60 s). */
export const MCP_STATUS_WAIT_MAX_SECONDS = 25;
/** How often a waiting `task_status` looks again (the status query is cheap; a person waits on it). */
const MCP_STATUS_POLL_MS = 250;
/** How long `chat` waits for the agent's whole answer before it returns what it has (the answer goes on). */
export const MCP_CHAT_ANSWER_TIMEOUT_MS = 120_000;

const SERVER_INFO = { name: 'durable-agents', version: '1' };
/** The answer to GET and DELETE: a stateless endpoint has no server stream to open and no session to end. */
const NOT_ALLOWED = {
  jsonrpc: '2.0',
  error: {
    code: -32000,
    message:
      'this MCP endpoint is stateless: send each JSON-RPC message with POST (there is no server stream or session to open or end)',
  },
  id: null,
};

/** A tool's answer: the value as JSON text (every client reads it) and as structured content. */
const ok = (value: Record<string, unknown>): CallToolResult => ({
  content: [{ type: 'text', text: JSON.stringify(value, null, 2) }],
  structuredContent: value,
});
const refused = (code: string, message: string): CallToolResult => ({
  content: [{ type: 'text', text: `${code}: ${message}` }],
  isError: true,
});

/**
 * One `tools/call {tool}` span per tool call, as OpenTelemetry's MCP conventions name it (a server span,
 * under the request's HTTP span); a refusal or failure is marked `error.type=tool_error`.
 */
async function inMcpToolSpan(
  tool: string,
  requestId: string | number | undefined,
  run: () => Promise<CallToolResult>,
): Promise<CallToolResult> {
  return trace.getTracer('durable-agents-api').startActiveSpan(
    `tools/call ${tool}`,
    {
      kind: SpanKind.SERVER,
      attributes: {
        'mcp.method.name': 'tools/call',
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': tool,
        ...(requestId !== undefined ? { 'jsonrpc.request.id': String(requestId) } : {}),
      },
    },
    async (span) => {
      try {
        const result = await run();
        if (result.isError) {
          span.setAttribute('error.type', 'tool_error');
          span.setStatus({ code: SpanStatusCode.ERROR });
        }
        return result;
      } finally {
        span.end();
      }
    },
  );
}

/** Registers `/mcp`; `decideApproval` is the REST route's decision path (the same checks and retries). */
export function registerMcpEndpoint(ctx: ApiContext, decideApproval: DecideApproval, forks: ForkClient): void {
  const { app } = ctx;
  const conversations = new ConversationClient(
    ctx.client,
    ctx.databaseUrl ? { connectionString: ctx.databaseUrl } : {},
  );

  app.route({
    method: ['POST', 'GET', 'DELETE'],
    url: MCP_PATH,
    handler: async (request, reply) => {
      if (request.method !== 'POST') {
        // Written past Fastify (as the transport's own answers are): the OpenAPI document describes POST,
        // the one method of a stateless endpoint, and its description names this 405.
        reply.hijack();
        reply.raw
          .writeHead(405, { allow: 'POST', 'content-type': 'application/json' })
          .end(JSON.stringify(NOT_ALLOWED));
        return;
      }
      const server = buildServer(ctx, conversations, decideApproval, forks, request.principal!);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      reply.hijack();
      reply.raw.on('close', () => {
        void transport.close();
        void server.close();
      });
      try {
        await server.connect(transport);
        // The HTTP request is the root of its trace: a task started by a tool call hangs below it.
        await inServerSpan(request, reply, 'POST', MCP_PATH, () =>
          transport.handleRequest(request.raw, reply.raw, request.body),
        );
      } catch (error) {
        // Past the hijack Fastify cannot answer: log under the request id and answer a JSON-RPC error.
        request.log.error({ err: error }, 'the MCP request failed');
        if (!reply.raw.headersSent) {
          reply.raw.writeHead(500, { 'content-type': 'application/json' }).end(
            JSON.stringify({
              jsonrpc: '2.0',
              error: {
                code: -32603,
                message: `the server failed to handle this request; the error is logged with reqId ${request.id}`,
              },
              id: null,
            }),
          );
        } else reply.raw.end();
      }
    },
  });
  // RFC 6750 (and the MCP authorization spec): a 401 names the scheme a client must use.
  app.addHook('onSend', async (request, reply, payload) => {
    if (reply.statusCode === 401 && request.url.split('?')[0] === MCP_PATH)
      void reply.header('www-authenticate', 'Bearer realm="durable-agents", error="invalid_token"');
    return payload;
  });
}

function buildServer(
  ctx: ApiContext,
  conversations: ConversationClient,
  decideApproval: DecideApproval,
  forks: ForkClient,
  principal: ApiPrincipal,
): McpServer {
  const server = new McpServer(SERVER_INFO, {
    instructions:
      'Drive durable-agents: start a task for an agent, follow it with task_status (it can wait for a change), decide the approvals its tool calls wait on, and accept or send back its submitted work. Tools that change something need a token of scope service or operator.',
  });
  const { client, db, withTimeout, requireTask, signalTask } = ctx;

  /** Runs a tool under its scope: a weaker token is refused, errors become the API's codes and words. */
  const tool = <Shape extends z.ZodRawShape>(
    name: string,
    scope: TokenScope,
    description: string,
    shape: Shape,
    annotations: { readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean },
    run: (args: z.infer<z.ZodObject<Shape>>, signal: AbortSignal) => Promise<Record<string, unknown>>,
  ): void => {
    server.registerTool(
      name,
      {
        description: `${description} Needs a token with scope ${scope}.`,
        inputSchema: z.object(shape).strict(),
        annotations: { openWorldHint: false, ...annotations },
      },
      async (args: unknown, extra: { signal: AbortSignal; requestId?: string | number }) =>
        inMcpToolSpan(name, extra.requestId, async () => {
          if (!scopeAllows(principal.scope, scope))
            return refused(
              'forbidden',
              `${name} needs a token with scope "${scope}"; "${principal.name}" has scope "${principal.scope}"`,
            );
          try {
            return ok(await run(args as z.infer<z.ZodObject<Shape>>, extra.signal));
          } catch (error) {
            const apiError = toApiError(error);
            // An unexpected failure says as little as the REST API would: the code, not internals.
            return refused(
              apiError.code,
              apiError.status >= 500
                ? `${name} failed on the server (${apiError.code}); see the API log`
                : apiError.message,
            );
          }
        }),
    );
  };

  const statusOf = async (taskId: string) => {
    await requireTask(taskId, principal);
    return withTimeout('the status query', () => client.getStatus(taskId));
  };

  tool(
    'start_task',
    'service',
    "Start a task for an agent. Returns the task's id; follow it with task_status.",
    {
      agentId: S.StartTaskBody.shape.agentId,
      title: S.StartTaskBody.shape.title,
      description: S.StartTaskBody.shape.description,
      priority: S.StartTaskBody.shape.priority,
      costBudgetUsd: S.StartTaskBody.shape.costBudgetUsd,
    },
    { destructiveHint: false },
    async (args) => {
      // Another organisation's agent is unknown here, as over REST.
      await ctx.requireAgent(args.agentId, principal);
      const started = await withTimeout('starting the task', () =>
        client.startTask({ ...args, description: args.description ?? args.title, createdBy: principal.name }),
      );
      return { taskId: started.taskId, workflowId: started.workflowId };
    },
  );

  tool(
    'task_status',
    'read',
    `A task's live status: state, round, iteration, the approvals it waits on, usage. With waitSeconds (at most ${MCP_STATUS_WAIT_MAX_SECONDS}) it waits until the state changes or an approval becomes pending; with untilStates, until the state is one of them or an approval becomes pending (someone must decide before the task can get there). So a client can follow a task with repeated calls.`,
    {
      taskId: S.TaskIdParams.shape.taskId,
      waitSeconds: z.number().min(0).max(MCP_STATUS_WAIT_MAX_SECONDS).optional(),
      untilStates: z.array(z.enum(TASK_STATES)).min(1).optional(),
    },
    { readOnlyHint: true },
    async (args, signal) => {
      let status = await statusOf(args.taskId);
      const first = `${status.state}|${status.pendingApprovals.map((a) => a.requestId).join(',')}`;
      const pendingAtFirst = new Set(status.pendingApprovals.map((a) => a.requestId));
      const deadline = Date.now() + (args.waitSeconds ?? 0) * 1000;
      // A new pending approval always answers: until someone decides it, no awaited state comes.
      const approvalAsked = () => status.pendingApprovals.some((a) => !pendingAtFirst.has(a.requestId));
      const reached = () =>
        args.untilStates
          ? args.untilStates.includes(status.state) || approvalAsked()
          : `${status.state}|${status.pendingApprovals.map((a) => a.requestId).join(',')}` !== first;
      while (!reached() && !isTerminal(status.state) && Date.now() < deadline && !signal.aborted) {
        await new Promise((r) => setTimeout(r, MCP_STATUS_POLL_MS));
        status = await statusOf(args.taskId);
      }
      return {
        ...status,
        waited: !reached() && Date.now() >= deadline ? 'timed out; call again to keep following' : undefined,
      } as Record<string, unknown>;
    },
  );

  tool(
    'list_approvals',
    'read',
    'The approval requests waiting on a person (a risky tool call an agent asked to make), oldest first; optionally for one task.',
    { taskId: S.TaskIdParams.shape.taskId.optional() },
    { readOnlyHint: true },
    async (args) => {
      if (args.taskId) await requireTask(args.taskId, principal);
      let query = db.selectFrom('approvals').selectAll().where('status', '=', 'pending');
      if (!isPlatform(principal)) query = query.where(agentOfOrgCondition(principal, 'approvals.agent_id'));
      if (args.taskId) query = query.where('task_id', '=', args.taskId);
      const rows = await query.orderBy('requested_at').execute();
      return {
        approvals: rows.map((r) => ({
          requestId: r.id,
          taskId: r.task_id,
          agentId: r.agent_id,
          tool: r.tool,
          summary: r.summary,
          args: r.args,
          requestedAt: r.requested_at.toISOString(),
        })),
      };
    },
  );

  tool(
    'decide_approval',
    'operator',
    'Approve or reject a pending approval request (from list_approvals or task_status). Returns the recorded decision; decidedBy is your token name.',
    {
      requestId: S.RequestIdParams.shape.requestId,
      decision: S.DecideApprovalBody.shape.decision,
      comment: S.DecideApprovalBody.shape.comment,
    },
    { destructiveHint: true, idempotentHint: false },
    async (args) =>
      (await decideApproval(
        args.requestId,
        { decision: args.decision, ...(args.comment !== undefined ? { comment: args.comment } : {}) },
        principal,
      )) as Record<string, unknown>,
  );

  tool(
    'review_task',
    'operator',
    'Decide a task in review: accept its submitted work (the task completes), or revise with feedback (the agent works another round). To reject work outright, use cancel_task.',
    {
      taskId: S.TaskIdParams.shape.taskId,
      decision: z.enum(['accept', 'revise']),
      feedback: z.string().max(100_000).optional(),
    },
    { destructiveHint: true },
    async (args) => {
      if (args.decision === 'revise' && !(args.feedback ?? '').trim())
        throw new ApiError(400, 'invalid_request', 'a revision needs feedback: say what to change');
      const task = await requireTask(args.taskId, principal);
      if (task.state !== 'review')
        throw new ApiError(409, 'not_in_review', `task ${args.taskId} is ${task.state}, not waiting for review`);
      await signalTask(args.taskId, principal, 'a review decision', () =>
        client.review(args.taskId, {
          decision: args.decision,
          ...(args.feedback ? { feedback: args.feedback } : {}),
          decidedBy: principal.name,
        }),
      );
      return { ok: true, taskId: args.taskId, decision: args.decision };
    },
  );

  tool(
    'cancel_task',
    'operator',
    'Cancel a task: an in-flight model call or command stops, and the task ends cancelled.',
    { taskId: S.TaskIdParams.shape.taskId },
    { destructiveHint: true, idempotentHint: true },
    async (args) => {
      await signalTask(args.taskId, principal, 'cancellation', () => client.cancel(args.taskId));
      return { ok: true, taskId: args.taskId };
    },
  );

  tool(
    'fork_task',
    'operator',
    "Fork a recorded task at a step into a new task, with other prompts, model or a changed tool result: calls that match the source's are answered from its records, others run in the fork's own workspace, outside effects are refused. Follow it with task_status; fork_report says call by call what was replayed.",
    {
      sourceTaskId: S.TaskIdParams.shape.taskId,
      at: ForkBody.shape.at,
      round: ForkBody.shape.round,
      overrides: ForkBody.shape.overrides,
      allowTools: ForkBody.shape.allowTools,
      forkTaskId: ForkBody.shape.taskId,
      costBudgetUsd: ForkBody.shape.costBudgetUsd,
    },
    { destructiveHint: false },
    async ({ sourceTaskId, forkTaskId, ...options }) => {
      await requireTask(sourceTaskId, principal);
      const started = await withTimeout('starting the fork', () =>
        forks
          .forkTask(sourceTaskId, {
            ...options,
            ...(forkTaskId ? { taskId: forkTaskId } : {}),
            createdBy: principal.name,
          })
          .catch(refusedFork),
      );
      return { ...started };
    },
  );

  tool(
    'fork_report',
    'read',
    "A fork's tool calls one by one: replayed from the source's records, executed in the fork's workspace, or refused.",
    { taskId: S.TaskIdParams.shape.taskId },
    { readOnlyHint: true },
    async (args) => {
      await requireTask(args.taskId, principal);
      return { ...(await forks.forkReport(args.taskId).catch(refusedFork)) };
    },
  );

  tool(
    'chat',
    'service',
    `Send a chat message to an agent and wait for its answer (at most ${MCP_CHAT_ANSWER_TIMEOUT_MS / 1000} s; a longer answer goes on and can be read later). You chat as your token's name.`,
    { agentId: S.AgentIdParams.shape.agentId, text: S.ChatBody.shape.text },
    { destructiveHint: false },
    async (args, signal) => {
      await ctx.requireAgent(args.agentId, principal);
      const stop = AbortSignal.any([signal, AbortSignal.timeout(MCP_CHAT_ANSWER_TIMEOUT_MS)]);
      let text = '';
      let ended: { stoppedBy?: string; error?: string } | undefined;
      try {
        for await (const event of conversations.chat(args.agentId, args.text, {
          from: { type: 'human', id: principal.name },
          signal: stop,
        })) {
          if (event.type === 'delta') text += event.text;
          else if (event.type === 'rewind') text = text.slice(0, Math.max(0, text.length - event.chars));
          else if (event.type === 'end') {
            ended = {
              ...(event.stoppedBy ? { stoppedBy: event.stoppedBy } : {}),
              ...(event.error ? { error: event.error } : {}),
            };
            break;
          }
        }
      } catch (error) {
        if (error instanceof DeliveryRejectedError) throw new ApiError(400, 'invalid_request', error.message);
        if (!stop.aborted) throw error;
      }
      return { agentId: args.agentId, answer: text, complete: ended !== undefined, ...(ended ?? {}) };
    },
  );

  return server;
}

/** The `/mcp` entry of the OpenAPI document (the endpoint is described there like every route). */
export function mcpOpenApiPath(): Record<string, unknown> {
  const error = (description: string) => ({
    description,
    content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
  });
  const jsonRpc = { type: 'object', properties: { jsonrpc: { const: '2.0' } }, required: ['jsonrpc'] };
  const description =
    'The Model Context Protocol over Streamable HTTP (stateless, JSON answers). Tools: start_task, task_status, list_approvals, decide_approval, review_task, cancel_task, fork_task, fork_report, chat. Any valid token may connect; each tool needs the scope it names (read, service or operator). GET and DELETE answer 405: a stateless endpoint has no server stream and no session.';
  return {
    post: {
      operationId: 'mcp',
      summary: 'MCP endpoint (JSON-RPC over Streamable HTTP)',
      description,
      tags: ['service'],
      security: [{ bearer: [] }],
      requestBody: { required: true, content: { 'application/json': { schema: jsonRpc } } },
      responses: {
        200: {
          description: 'A JSON-RPC answer',
          content: { 'application/json': { schema: {} }, 'text/event-stream': { schema: { type: 'string' } } },
        },
        202: { description: 'A notification or response was accepted' },
        400: error('Malformed JSON or JSON-RPC. Codes: `invalid_request`, `malformed_json`'),
        401: error('No token, or an unknown or revoked one (with `WWW-Authenticate: Bearer`). Code: `unauthorized`'),
        406: { description: 'The client must accept application/json and text/event-stream' },
        413: error('Body over the size limit. Code: `payload_too_large`'),
        415: error('A body that is not `application/json`. Code: `unsupported_media_type`'),
        429: error('Per-token rate limit; see `Retry-After`. Code: `rate_limited`'),
        500: error('The server failed; the error is in its log. Code: `internal`'),
        503: { description: 'The server is shutting down' },
      },
    },
  };
}
