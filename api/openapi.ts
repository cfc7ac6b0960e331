/** `/v1/openapi.json`: generated from the routes' zod schemas (zod 4's `z.toJSONSchema`). */
import { z } from 'zod';
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

const jsonSchema = (schema: z.ZodType, io: 'input' | 'output') => z.toJSONSchema(schema, { io, unrepresentable: 'any' });

export function buildOpenApi(routes: readonly RouteDoc[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const error = { content: { 'application/json': { schema: jsonSchema(ErrorResponse, 'output') } } };
  for (const route of routes) {
    const openApiPath = route.url.replace(/:([A-Za-z]+)/g, '{$1}');
    const parameters: unknown[] = [];
    for (const [where, schema] of [['path', route.params], ['query', route.query]] as const) {
      if (!schema) continue;
      const shape = jsonSchema(schema, 'input') as { properties?: Record<string, unknown>; required?: string[] };
      for (const [name, s] of Object.entries(shape.properties ?? {})) {
        parameters.push({ name, in: where, required: where === 'path' || (shape.required ?? []).includes(name), schema: s });
      }
    }
    const ok: Record<string, unknown> = { description: 'OK' };
    if (route.response) ok.content = { 'application/json': { schema: jsonSchema(route.response, 'output') } };
    if (route.stream) (ok.content as Record<string, unknown> | undefined ?? (ok.content = {}) as Record<string, unknown>)['text/event-stream'] = { schema: { type: 'string' } };
    (paths[openApiPath] ??= {})[route.method.toLowerCase()] = {
      summary: route.summary,
      description: `Needs a token with scope \`${route.scope}\` (operator ⊃ service ⊃ read).`,
      security: [{ bearer: [] }],
      parameters,
      ...(route.body ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(route.body, 'input') } } } } : {}),
      responses: {
        [String(route.status ?? 200)]: ok,
        400: { description: 'Invalid input: the message names each field and what is wrong', ...error },
        401: { description: 'No token, or an unknown or revoked one', ...error },
        403: { description: 'The token lacks the scope', ...error },
        404: { description: 'Unknown task, agent, organisation or approval request', ...error },
        413: { description: 'Body over the size limit', ...error },
        429: { description: 'Per-token rate limit; see Retry-After', ...error },
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'durable-agents API', version: '1', description: 'Agents, tasks, approvals, usage, organisations, skills and announcements of durable-agents. Errors are { error: { code, message } }.' },
    components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
    paths,
  };
}
