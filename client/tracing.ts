/**
 * The Temporal client's tracing interceptor: a workflow started, signalled, updated or queried from
 * this process carries the caller's trace context (an HTTP request's span, say) in its headers, so
 * the workflow's spans join the caller's trace. Without a registered tracer provider it adds nothing.
 */
import type { ClientInterceptors } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry';

export function tracingClientInterceptors(): ClientInterceptors {
  return { workflow: [new OpenTelemetryWorkflowClientInterceptor()] };
}
