/**
 * What every traced process shares (the worker, the API, the CLI): the span exporter chosen by the
 * standard `OTEL_EXPORTER_OTLP_*` variables, the W3C trace-context propagator and the global tracer
 * provider (so Temporal's interceptors carry one trace from the HTTP request through the workflow to
 * each activity, LLM call and tool call), and a span processor that keeps attribute values within
 * OpenTelemetry's types.
 */
import { context, propagation, trace, type Attributes, type AttributeValue, type Context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type ReadableSpan,
  type Span,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { Resource } from '@opentelemetry/resources';
import { choiceFromEnv, ConfigurationError, switchFromEnv, urlFromEnv } from '../activities/env-values';

/** The OTLP protocol when none is configured: the specification's default for exporters. */
export const DEFAULT_OTLP_PROTOCOL = 'http/protobuf' as const;

/**
 * Whether the environment asks for traces (an OTLP endpoint for traces, or for all signals). Every
 * process asks this at start, so the variables it reads are checked here: an endpoint that is not a
 * URL, an exporter other than `otlp` or `none`, a `OTEL_SDK_DISABLED` other than `true` or `false`.
 */
export function tracingRequested(env: NodeJS.ProcessEnv = process.env): boolean {
  const endpoint = urlFromEnv('OTEL_EXPORTER_OTLP_ENDPOINT', env);
  const tracesEndpoint = urlFromEnv('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', env);
  const exporter = choiceFromEnv('OTEL_TRACES_EXPORTER', ['otlp', 'none'], env);
  const disabled = switchFromEnv('OTEL_SDK_DISABLED', ['true', 'false'], env);
  otlpHeadersFromEnv('OTEL_EXPORTER_OTLP_HEADERS', env);
  otlpProtocolFromEnv(env);
  return Boolean(endpoint || tracesEndpoint) && exporter !== 'none' && disabled !== true;
}

/** The OTLP protocols bundled here; gRPC is not, and asking for it is an error, not a silent switch. */
const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const;

/** `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`, else `http/protobuf`. */
function otlpProtocolFromEnv(env: NodeJS.ProcessEnv): (typeof OTLP_PROTOCOLS)[number] {
  return (
    choiceFromEnv('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', OTLP_PROTOCOLS, env) ??
    choiceFromEnv('OTEL_EXPORTER_OTLP_PROTOCOL', OTLP_PROTOCOLS, env) ??
    DEFAULT_OTLP_PROTOCOL
  );
}

/**
 * `key1=value1,key2=value2` (the OTEL_EXPORTER_OTLP_*_HEADERS format), values URL-decoded; a pair
 * without `=` or a name is refused, with the values masked in the message (they are often tokens).
 */
export function otlpHeadersFromEnv(
  name: string,
  env: NodeJS.ProcessEnv = process.env,
): Record<string, string> | undefined {
  const text = env[name];
  if (!text?.trim()) return undefined;
  const headers: Record<string, string> = {};
  for (const pair of text.split(',')) {
    if (pair.trim() === '') continue;
    const cut = pair.indexOf('=');
    let value: string | undefined;
    try {
      value = cut > 0 ? decodeURIComponent(pair.slice(cut + 1).trim()) : undefined;
    } catch {
      value = undefined;
    }
    const key = cut > 0 ? pair.slice(0, cut).trim() : '';
    if (!key || value === undefined)
      throw new ConfigurationError(
        name,
        text.replace(/=[^,]*/g, '=…'),
        'comma-separated name=value pairs, values URL-encoded, such as Authorization=Bearer%20abc',
      );
    headers[key] = value;
  }
  return Object.keys(headers).length > 0 ? headers : undefined;
}

/**
 * The OTLP span exporter for `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`
 * (default `http/protobuf`; `http/json` too). The exporters read the endpoint, headers, timeout and
 * compression variables themselves. gRPC is not bundled: asking for it is an error, not a silent switch.
 */
export function otlpTraceExporterFromEnv(env: NodeJS.ProcessEnv = process.env): SpanExporter {
  return otlpProtocolFromEnv(env) === 'http/json' ? new OtlpJsonExporter() : new OtlpProtobufExporter();
}

let registered = false;

/**
 * Makes `provider` the process's tracer provider and installs the W3C trace-context (and baggage)
 * propagator and an async-hooks context manager. Without the propagator, the trace context that
 * Temporal's interceptors put in activity headers is not read back, and every activity starts a
 * trace of its own. The first provider wins; later calls (a second worker in a test) only return.
 */
export function registerTracing(provider: BasicTracerProvider): void {
  if (registered) return;
  registered = true;
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(
    new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
  );
  trace.setGlobalTracerProvider(provider);
}

/**
 * A tracer provider for a process that is not the worker (the API, the CLI), exporting by OTLP as the
 * environment says, registered globally; undefined when the environment asks for no traces.
 */
export function startProcessTracing(
  serviceName: string,
  env: NodeJS.ProcessEnv = process.env,
): { shutdown(): Promise<void> } | undefined {
  if (!tracingRequested(env)) return undefined;
  const resource = new Resource({ 'service.name': env.OTEL_SERVICE_NAME ?? serviceName });
  const provider = new BasicTracerProvider({
    resource,
    spanProcessors: [new FlatAttributesSpanProcessor(new BatchSpanProcessor(otlpTraceExporterFromEnv(env)))],
  });
  registerTracing(provider);
  return { shutdown: () => provider.shutdown() };
}

/**
 * Passes spans on with attribute values OpenTelemetry accepts: a primitive, or an array of one
 * primitive type. A nested object becomes dotted keys (`a.b.c`); an array of objects or of mixed
 * types becomes its JSON text. Collectors drop or mangle anything else.
 */
export class FlatAttributesSpanProcessor implements SpanProcessor {
  constructor(private readonly next: SpanProcessor) {}

  onStart(span: Span, parentContext: Context): void {
    this.next.onStart(span, parentContext);
  }

  onEnd(span: ReadableSpan): void {
    const attributes = flattenAttributes(span.attributes as Record<string, unknown>);
    this.next.onEnd(
      attributes === span.attributes
        ? span
        : (Object.create(span, { attributes: { value: attributes, enumerable: true } }) as ReadableSpan),
    );
  }

  forceFlush(): Promise<void> {
    return this.next.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.next.shutdown();
  }
}

/** The attributes with every value an OpenTelemetry `AttributeValue`; the same object when nothing needed changing. */
export function flattenAttributes(attributes: Record<string, unknown>): Attributes {
  if (Object.values(attributes).every(isAttributeValue)) return attributes as Attributes;
  const flat: Attributes = {};
  const put = (key: string, value: unknown): void => {
    if (value === undefined || value === null) return;
    if (isAttributeValue(value)) flat[key] = value;
    else if (typeof value === 'object' && !Array.isArray(value))
      for (const [k, v] of Object.entries(value)) put(`${key}.${k}`, v);
    else flat[key] = JSON.stringify(value);
  };
  for (const [key, value] of Object.entries(attributes)) put(key, value);
  return flat;
}

function isAttributeValue(value: unknown): value is AttributeValue {
  const t = typeof value;
  if (t === 'string' || t === 'number' || t === 'boolean') return true;
  if (!Array.isArray(value)) return false;
  const types = new Set(value.filter((v) => v !== null && v !== undefined).map((v) => typeof v));
  return types.size === 0 || (types.size === 1 && ['string', 'number', 'boolean'].includes([...types][0]!));
}
