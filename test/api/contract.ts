/**
 * The API's contract check, run by every API test file: each response the tests provoke is checked
 * against the OpenAPI document the server publishes (its status must be declared for the route, its
 * content type too, and a JSON body must validate against the schema, with Ajv). The test API records
 * responses as they are sent and checks them when it closes, so an undeclared status or a body that
 * drifted from its schema fails the file that provoked it.
 */
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';

export interface RecordedResponse {
  method: string;
  /** The matched route's pattern (`/v1/tasks/:taskId`); undefined for a path no route matches. */
  route: string | undefined;
  status: number;
  contentType: string;
  body: string;
}

/** Records every response the API sends through Fastify (hijacked SSE streams are checked by their own tests). */
export function recordResponses(app: FastifyInstance): RecordedResponse[] {
  const recorded: RecordedResponse[] = [];
  app.addHook('onSend', async (request, reply, payload) => {
    recorded.push({
      method: request.method,
      route: request.routeOptions.url,
      status: reply.statusCode,
      contentType: String(reply.getHeader('content-type') ?? ''),
      body: typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('utf8') : '',
    });
    return payload;
  });
  return recorded;
}

/**
 * Paths outside the API description: the inbox's HTML pages, the run viewer's (`/runs/:taskId`), and
 * requests no route matched (answered 404 `route_not_found`).
 */
const OUTSIDE_THE_SPEC = (r: RecordedResponse) =>
  r.route === undefined || r.route.startsWith('/inbox') || r.route.startsWith('/runs/');

/** Every way the recorded responses break the published spec; empty when they all conform. */
export function contractViolations(spec: OpenApi, responses: readonly RecordedResponse[]): string[] {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema({ $id: 'urn:durable-agents:openapi', components: spec.components ?? {} });
  const validators = new Map<unknown, ReturnType<typeof ajv.compile>>();
  const violations = new Set<string>();
  for (const r of responses) {
    if (OUTSIDE_THE_SPEC(r)) continue;
    const where = `${r.method} ${r.route} → ${r.status}`;
    const operation = spec.paths[r.route!.replace(/:([A-Za-z]+)/g, '{$1}')]?.[r.method.toLowerCase()];
    if (!operation) {
      violations.add(`${where}: the route is not in the spec`);
      continue;
    }
    const declared = operation.responses[String(r.status)];
    if (!declared) {
      violations.add(`${where}: status not declared (declared: ${Object.keys(operation.responses).join(', ')})`);
      continue;
    }
    if (!declared.content) {
      if (r.body !== '') violations.add(`${where}: a body where the spec declares none`);
      continue;
    }
    const mediaType = r.contentType.split(';')[0]!.trim();
    const media = declared.content[mediaType];
    if (!media) {
      violations.add(
        `${where}: content type ${mediaType || '(none)'} not declared (declared: ${Object.keys(declared.content).join(', ')})`,
      );
      continue;
    }
    if (mediaType !== 'application/json' || !media.schema) continue;
    let validate = validators.get(media.schema);
    if (!validate) {
      validate = ajv.compile(withRefsInto(media.schema, 'urn:durable-agents:openapi') as object);
      validators.set(media.schema, validate);
    }
    let body: unknown;
    try {
      body = JSON.parse(r.body);
    } catch {
      violations.add(`${where}: the body is not JSON`);
      continue;
    }
    if (!validate(body)) violations.add(`${where}: ${ajv.errorsText(validate.errors)} (body ${r.body.slice(0, 300)})`);
  }
  return [...violations];
}

/** Fetches the spec the API at `url` serves and throws with every violation, if any. */
export async function checkContract(url: string, responses: readonly RecordedResponse[]): Promise<void> {
  const spec = (await (await fetch(`${url}/v1/openapi.json`)).json()) as OpenApi;
  const violations = contractViolations(spec, responses);
  if (violations.length > 0)
    throw new Error(`responses that break the OpenAPI document:\n  ${violations.join('\n  ')}`);
}

export interface OpenApi {
  paths: Record<
    string,
    Record<string, { responses: Record<string, { content?: Record<string, { schema?: unknown }> }> }>
  >;
  components?: Record<string, unknown>;
}

/** The schema with its `#/components/...` references pointed at the document that holds the components. */
function withRefsInto(schema: unknown, documentId: string): unknown {
  if (Array.isArray(schema)) return schema.map((s) => withRefsInto(s, documentId));
  if (!schema || typeof schema !== 'object') return schema;
  return Object.fromEntries(
    Object.entries(schema).map(([k, v]) => [
      k,
      k === '$ref' && typeof v === 'string' && v.startsWith('#/components/')
        ? `${documentId}${v}`
        : withRefsInto(v, documentId),
    ]),
  );
}
