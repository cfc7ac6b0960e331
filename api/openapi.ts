/**
 * `/v1/openapi.json`: generated from the routes' zod schemas (zod 4's `z.toJSONSchema`), with every
 * status a route can answer and the error codes behind each. The route modules say what they accept
 * and return; what they can refuse with is listed here, beside the codes the server raises.
 */
import { z } from 'zod';
import { mcpOpenApiPath } from './mcp-server';
import { IDEMPOTENCY_KEY_MAX_CHARS } from './chat-idempotency';
import { ErrorResponse } from './schemas';
import type { TokenScope } from './tokens';

export interface RouteDoc {
  method: string;
  url: string;
  scope: TokenScope;
  summary: string;
  params?: z.ZodType;
  query?: z.ZodType;
  body?: z.ZodType;
  response?: z.ZodType;
  status?: number;
  stream?: boolean;
}

/** `operationId` per operation: stable names for generated clients (`openapi-typescript`, `openapi-fetch`). */
const OPERATION_IDS: Record<string, string> = {
  'POST /v1/tasks/:taskId/fork': 'forkTask',
  'GET /v1/tasks/:taskId/fork-report': 'getForkReport',
  'POST /v1/evals': 'startEval',
  'GET /v1/evals': 'listEvals',
  'GET /v1/evals/:evalId': 'getEval',
  'PUT /v1/agents/:agentId': 'upsertAgent',
  'GET /v1/agents/:agentId': 'getAgent',
  'GET /v1/agents': 'listAgents',
  'GET /v1/agents/:agentId/usage': 'getAgentUsage',
  'GET /v1/notifications': 'listNotifications',
  'POST /v1/notifications/read': 'markNotificationsRead',
  'GET /v1/approvals': 'listApprovals',
  'POST /v1/approvals/:requestId': 'decideApproval',
  'GET /v1/approvals/:requestId/trail': 'getApprovalTrail',
  'POST /v1/approvals/:requestId/delegate': 'delegateApproval',
  'POST /v1/agents/:agentId/chat': 'chat',
  'GET /v1/agents/:agentId/chat/:itemId/stream': 'streamChatAnswer',
  'GET /v1/agents/:agentId/mailbox': 'getMailbox',
  'PUT /v1/organisations/:org': 'upsertOrganisation',
  'GET /v1/organisations/:org': 'getOrganisation',
  'PUT /v1/skills/:name': 'upsertSkill',
  'GET /v1/skills': 'listSkills',
  'GET /v1/agents/:agentId/skills': 'listAgentSkills',
  'POST /v1/announcements': 'createAnnouncement',
  'GET /v1/announcements': 'listAnnouncements',
  'POST /v1/tasks': 'startTask',
  'GET /v1/tasks/:taskId': 'getTaskStatus',
  'GET /v1/tasks/:taskId/usage': 'getTaskUsage',
  'GET /v1/tasks/:taskId/events': 'getTaskEvents',
  'GET /v1/tasks/:taskId/deltas': 'streamTaskText',
  'POST /v1/tasks/:taskId/cancel': 'cancelTask',
  'POST /v1/tasks/:taskId/pause': 'pauseTask',
  'POST /v1/tasks/:taskId/resume': 'resumeTask',
  'POST /v1/tasks/:taskId/comments': 'commentOnTask',
  'GET /v1/tasks/:taskId/budget': 'getTaskBudget',
  'POST /v1/tasks/:taskId/budget': 'decideTaskBudget',
  'POST /v1/tasks/:taskId/review': 'reviewTask',
};

/** The 409 codes of a task route that sends to the task's workflow (signalTask, or a Temporal call that finds no run). */
const TASK_SIGNAL_CONFLICTS = ['task_finished', 'task_not_running'];

/**
 * 409 codes per route: the request is valid but the resource's state refuses it. A route absent here
 * raises none.
 */
const CONFLICTS: Record<string, string[]> = {
  'POST /v1/tasks': ['task_exists'],
  'GET /v1/tasks/:taskId': ['task_not_running'],
  'GET /v1/tasks/:taskId/budget': ['task_not_running'],
  'POST /v1/tasks/:taskId/cancel': TASK_SIGNAL_CONFLICTS,
  'POST /v1/tasks/:taskId/pause': TASK_SIGNAL_CONFLICTS,
  'POST /v1/tasks/:taskId/resume': TASK_SIGNAL_CONFLICTS,
  'POST /v1/tasks/:taskId/comments': TASK_SIGNAL_CONFLICTS,
  'POST /v1/tasks/:taskId/review': ['not_in_review', ...TASK_SIGNAL_CONFLICTS],
  'POST /v1/tasks/:taskId/budget': ['task_finished', 'invalid_budget_decision', 'update_rejected', 'task_not_running'],
  'POST /v1/approvals/:requestId': ['approval_decided', 'update_rejected', 'task_not_running'],
  'POST /v1/approvals/:requestId/delegate': ['approval_decided', 'update_rejected', 'task_not_running'],
};

/** Routes without path parameters that still name something (in the body or a filter) that may not exist. */
const NOT_FOUND_WITHOUT_PARAMS = new Set([
  'POST /v1/tasks',
  'POST /v1/announcements',
  'GET /v1/announcements',
  'POST /v1/notifications/read',
  'GET /v1/notifications',
  'GET /v1/skills',
  'GET /v1/approvals',
  'POST /v1/evals',
]);

/**
 * Routes that call Temporal under the API's timeout (504 when it passes): every task route (a task
 * whose row is not written yet is looked up in Temporal), the approval decision, chat and the mailbox.
 */
const CALLS_TEMPORAL = (key: string): boolean =>
  key.includes('/v1/tasks/') ||
  key === 'POST /v1/tasks' ||
  key === 'POST /v1/approvals/:requestId' ||
  key === 'POST /v1/approvals/:requestId/delegate' ||
  key.startsWith('POST /v1/agents/:agentId/chat') ||
  key === 'GET /v1/agents/:agentId/mailbox' ||
  key === 'POST /v1/evals';

/** What each error status means for every route that can answer it. */
const ERROR_MEANING: Record<number, string> = {
  400: 'Invalid input (path, query, body or `Last-Event-ID`): the message names each field and what is wrong. Codes: `invalid_request`, `malformed_json`',
  401: 'No token, or an unknown or revoked one. Code: `unauthorized`',
  403: 'The token lacks the scope, or the operation concerns every organisation (a shared skill, an announcement to everyone) and needs the platform token. Code: `forbidden`',
  404: "The agent, task, organisation, skill, mailbox item, notification, eval or approval request named in the path, body or filter does not exist, or is another organisation's (answered exactly alike). Codes: `agent_not_found`, `task_not_found`, `organisation_not_found`, `item_not_found`, `approval_not_found`, `notification_not_found`, `eval_not_found`",
  413: 'Body over the size limit. Code: `payload_too_large`',
  415: 'A body that is not `application/json`. Code: `unsupported_media_type`',
  429: 'Per-token rate limit; see `Retry-After`. Code: `rate_limited`',
  500: 'The server failed; the error is in its log, never in the answer. Code: `internal`',
  503: 'The server is shutting down',
  504: 'Temporal did not answer within the API call timeout (is a worker polling the task queue?). Code: `timeout`',
};

/** What any route, even one that takes no input, answers to a request HTTP itself cannot parse. */
const MALFORMED_REQUEST = 'A malformed request (an invalid URL encoding, say). Code: `invalid_request`';

/**
 * The formats JSON Schema 2020-12 defines. zod also writes its own string checks as formats
 * (`startsWith` as `format: "starts_with"`, beside a `pattern` that says the same), which strict
 * validators such as Ajv reject as unknown; those are dropped and the pattern carries the rule.
 */
const STANDARD_FORMATS = new Set([
  'date-time',
  'date',
  'time',
  'duration',
  'email',
  'idn-email',
  'hostname',
  'idn-hostname',
  'ipv4',
  'ipv6',
  'uri',
  'uri-reference',
  'iri',
  'iri-reference',
  'uuid',
  'uri-template',
  'json-pointer',
  'relative-json-pointer',
  'regex',
]);

const jsonSchema = (schema: z.ZodType, io: 'input' | 'output') => {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, {
    io,
    unrepresentable: 'any',
    override: ({ jsonSchema: out }) => {
      if (typeof out.format === 'string' && !STANDARD_FORMATS.has(out.format)) delete out.format;
    },
  }) as Record<string, unknown>;
  return rest;
};

const errorRef = { $ref: '#/components/schemas/Error' };
const errorResponse = (description: string) => ({ description, content: { 'application/json': { schema: errorRef } } });

/** The `Last-Event-ID` header every resumable stream takes. */
const LAST_EVENT_ID = {
  name: 'Last-Event-ID',
  in: 'header',
  required: false,
  description:
    'Resume after this event: the `id` (a sequence number) of the last event received. An EventSource sends it by itself on reconnect.',
  schema: { type: 'string', pattern: '^[0-9]{1,15}$' },
};

/** The `Idempotency-Key` header of the routes that take one (api/chat-idempotency.ts). */
const IDEMPOTENCY_KEY = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    "Makes a retry safe: a request retried with the same key (same agent, same token name) starts nothing new and answers with the first one's item (`replayed: true`). A UUID per message, say.",
  schema: { type: 'string', pattern: `^[\\x21-\\x7e]{1,${IDEMPOTENCY_KEY_MAX_CHARS}}$` },
};
const TAKES_IDEMPOTENCY_KEY = new Set(['POST /v1/agents/:agentId/chat']);
/** 422 codes per route: a valid request that contradicts an earlier one. */
const UNPROCESSABLE: Record<string, string[]> = { 'POST /v1/agents/:agentId/chat': ['idempotency_key_reused'] };

export interface OpenApiOptions {
  /** The API's own URL, for `servers` (the request's origin when served). */
  serverUrl: string;
}

export function buildOpenApi(routes: readonly RouteDoc[], options: OpenApiOptions): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const key = `${route.method} ${route.url}`;
    const operationId = OPERATION_IDS[key];
    if (!operationId) throw new Error(`api/openapi.ts has no operationId for ${key}; add one to OPERATION_IDS`);
    const openApiPath = route.url.replace(/:([A-Za-z]+)/g, '{$1}');
    const parameters: unknown[] = [];
    for (const [where, schema] of [
      ['path', route.params],
      ['query', route.query],
    ] as const) {
      if (!schema) continue;
      const shape = jsonSchema(schema, 'input') as {
        properties?: Record<string, { description?: string }>;
        required?: string[];
      };
      for (const [name, s] of Object.entries(shape.properties ?? {})) {
        const { description, ...rest } = s;
        parameters.push({
          name,
          in: where,
          required: where === 'path' || (shape.required ?? []).includes(name),
          ...(description ? { description } : {}),
          schema: rest,
        });
      }
    }
    if (route.stream && route.method === 'GET') parameters.push(LAST_EVENT_ID);
    if (TAKES_IDEMPOTENCY_KEY.has(key)) parameters.push(IDEMPOTENCY_KEY, LAST_EVENT_ID);
    const ok: Record<string, unknown> = { description: 'OK' };
    const content: Record<string, unknown> = {};
    if (route.response) content['application/json'] = { schema: jsonSchema(route.response, 'output') };
    if (route.stream) {
      content['text/event-stream'] = {
        schema: {
          type: 'string',
          description:
            'Server-Sent Events: `id` = sequence number, `event` = kind, `data` = the event as JSON; an `end` event closes a finished stream',
        },
      };
    }
    if (Object.keys(content).length > 0) ok.content = content;
    const responses: Record<string, unknown> = { [String(route.status ?? 200)]: ok };
    if (route.stream && route.method === 'GET')
      responses['204'] = {
        description: 'The stream has ended and the client already has all of it (an EventSource stops reconnecting)',
      };
    const statuses = [400, 401, 403];
    if (route.params || NOT_FOUND_WITHOUT_PARAMS.has(key)) statuses.push(404);
    const conflicts = CONFLICTS[key];
    if (route.body) statuses.push(413, 415);
    statuses.push(429, 500, 503);
    if (CALLS_TEMPORAL(key)) statuses.push(504);
    for (const status of statuses.sort((a, b) => a - b))
      responses[String(status)] = errorResponse(ERROR_MEANING[status]!);
    if (conflicts)
      responses['409'] = errorResponse(
        `The resource's state refuses this. Codes: ${conflicts.map((c) => `\`${c}\``).join(', ')}`,
      );
    const unprocessable = UNPROCESSABLE[key];
    if (unprocessable)
      responses['422'] = errorResponse(
        `The request contradicts an earlier one. Codes: ${unprocessable.map((c) => `\`${c}\``).join(', ')}`,
      );
    (paths[openApiPath] ??= {})[route.method.toLowerCase()] = {
      operationId,
      summary: firstSentence(route.summary),
      description: `${route.summary}.\n\nNeeds a token with scope \`${route.scope}\` (operator ⊃ service ⊃ read).`,
      tags: [tagOf(route.url)],
      security: [{ bearer: [] }],
      ...(parameters.length > 0 ? { parameters } : {}),
      ...(route.body
        ? {
            requestBody: {
              required: true,
              content: { 'application/json': { schema: jsonSchema(route.body, 'input') } },
            },
          }
        : {}),
      responses: Object.fromEntries(Object.entries(responses).sort(([a], [b]) => Number(a) - Number(b))),
    };
  }
  paths['/mcp'] = mcpOpenApiPath();
  paths['/v1/openapi.json'] = {
    get: {
      operationId: 'getOpenApi',
      summary: 'This document',
      description: 'This OpenAPI document. Public: no token needed.',
      tags: ['service'],
      security: [],
      responses: {
        200: { description: 'OK', content: { 'application/json': { schema: { type: 'object' } } } },
        400: errorResponse(MALFORMED_REQUEST),
      },
    },
  };
  paths['/v1/temporal-contract.json'] = {
    get: {
      operationId: 'getTemporalContract',
      summary: 'The Temporal contract as JSON Schema',
      description:
        'The inputs, results, queries, signals and updates of `taskWorkflow` and `agentWorkflow`, as JSON Schema (draft 2020-12), for services that use a Temporal SDK directly (the same document as docs/temporal-contract.schema.json). Public: no token needed.',
      tags: ['service'],
      security: [],
      responses: {
        200: { description: 'OK', content: { 'application/json': { schema: { type: 'object' } } } },
        400: errorResponse(MALFORMED_REQUEST),
      },
    },
  };
  paths['/healthz'] = {
    get: {
      operationId: 'getHealth',
      summary: 'Health of the API and what it depends on',
      description: 'PostgreSQL and Temporal, each with its latency or error. Public: no token needed.',
      tags: ['service'],
      security: [],
      responses: {
        200: {
          description: 'Both dependencies answer',
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Health' } } },
        },
        400: errorResponse(MALFORMED_REQUEST),
        503: {
          description: 'A dependency does not answer',
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Health' } } },
        },
      },
    },
  };
  paths['/metrics'] = {
    get: {
      operationId: 'getMetrics',
      summary: 'Prometheus metrics',
      description: 'The Prometheus text format. Needs a token with scope `read`.',
      tags: ['service'],
      security: [{ bearer: [] }],
      responses: {
        200: { description: 'OK', content: { 'text/plain': { schema: { type: 'string' } } } },
        401: errorResponse(ERROR_MEANING[401]!),
        403: errorResponse(ERROR_MEANING[403]!),
        429: errorResponse(ERROR_MEANING[429]!),
      },
    },
  };
  paths['/metrics/temporal'] = {
    get: {
      operationId: 'getTemporalRuntimeMetrics',
      summary: "The Temporal runtime's own Prometheus metrics",
      description:
        "The worker's Temporal SDK metrics (its naming: counters without `_total`), from `TEMPORAL_METRICS_BIND`. Needs a token with scope `read`.",
      tags: ['service'],
      security: [{ bearer: [] }],
      responses: {
        200: { description: 'OK', content: { 'text/plain': { schema: { type: 'string' } } } },
        401: errorResponse(ERROR_MEANING[401]!),
        403: errorResponse(ERROR_MEANING[403]!),
        404: errorResponse('This process has no Temporal runtime metrics endpoint configured. Code: `route_not_found`'),
        429: errorResponse(ERROR_MEANING[429]!),
        502: errorResponse('The runtime metrics endpoint does not answer. Code: `upstream_unavailable`'),
      },
    },
  };
  const dependency = {
    type: 'object',
    properties: { ok: { type: 'boolean' }, latencyMs: { type: 'number' }, error: { type: 'string' } },
    required: ['ok'],
  };
  return {
    openapi: '3.1.0',
    info: {
      title: 'durable-agents API',
      version: '1',
      description:
        'Agents, tasks, approvals, usage, organisations, skills and announcements of durable-agents. Errors are `{ error: { code, message } }`; each status lists its codes.',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    servers: [{ url: options.serverUrl, description: 'This API' }],
    tags: TAGS.map(([name, description]) => ({ name, description })),
    components: {
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'A token from `npm run agents -- token create <name> --scope read|service|operator`',
        },
      },
      schemas: {
        Error: jsonSchema(ErrorResponse, 'output'),
        Health: {
          type: 'object',
          properties: {
            status: { type: 'string', enum: ['ok', 'degraded'] },
            postgres: dependency,
            temporal: dependency,
          },
          required: ['status', 'postgres', 'temporal'],
        },
      },
    },
    paths,
  };
}

const TAGS: Array<[string, string]> = [
  ['agents', 'Agents: definitions, usage, chat and mailbox'],
  ['tasks', 'Tasks: start, status, streams, decisions'],
  ['approvals', 'Approval requests and notifications for humans'],
  ['organisations', 'Organisations, skills and announcements'],
  ['service', 'The API itself: health, metrics, this document'],
];

function tagOf(url: string): string {
  if (url.startsWith('/v1/tasks')) return 'tasks';
  if (url.startsWith('/v1/approvals') || url.startsWith('/v1/notifications')) return 'approvals';
  if (
    url.startsWith('/v1/organisations') ||
    url.startsWith('/v1/skills') ||
    url.startsWith('/v1/announcements') ||
    url.endsWith('/skills')
  )
    return 'organisations';
  return 'agents';
}

/** The summary's first sentence (the rest stays in the description), without a trailing colon. */
function firstSentence(summary: string): string {
  const cut = summary.search(/[.:;(](\s|$)/);
  return (cut > 0 ? summary.slice(0, cut) : summary).trim().slice(0, 120);
}
