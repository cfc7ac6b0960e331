import {
  context,
  defaultTextMapGetter,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { toApiError } from './errors';

/**
 * Runs a route handler inside an HTTP server span named `{method} {route}` (OpenTelemetry's HTTP
 * conventions), a child of the caller's trace when the request has a `traceparent`. A no-op span
 * unless the process registered a tracer provider.
 */
export async function inServerSpan<T>(
  request: FastifyRequest,
  reply: FastifyReply,
  method: string,
  route: string,
  run: () => Promise<T>,
): Promise<T> {
  const parent = propagation.extract(ROOT_CONTEXT, request.headers, defaultTextMapGetter);
  const span = trace.getTracer('durable-agents-api').startSpan(
    `${method} ${route}`,
    {
      kind: SpanKind.SERVER,
      attributes: {
        'http.request.method': method,
        'http.route': route,
        'url.path': request.url.split('?')[0]!,
        'url.scheme': request.protocol,
      },
    },
    parent,
  );
  try {
    const result = await context.with(trace.setSpan(parent, span), run);
    span.setAttribute('http.response.status_code', reply.statusCode);
    return result;
  } catch (error) {
    const status = toApiError(error).status;
    span.setAttribute('http.response.status_code', status);
    if (status >= 500) {
      span.setStatus({ code: SpanStatusCode.ERROR });
      span.setAttribute('error.type', String(status));
    }
    throw error;
  } finally {
    span.end();
  }
}
