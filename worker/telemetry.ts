/**
 * Telemetry for the worker, off unless switched on by the environment (see `telemetryFromEnv`):
 *
 * - Traces (OpenTelemetry, exported by OTLP): workflow and activity spans through Temporal's
 *   interceptors (`@temporalio/interceptors-opentelemetry` 1.24 on OpenTelemetry's v1 packages), and a
 *   span per LLM call with the GenAI semantic conventions (model, input, output and cached tokens) plus
 *   its cost, made by wrapping the router: no provider or LLM-step code changes.
 * - Metrics (Prometheus, prom-client): tokens and cost by provider and model, LLM latency, tool
 *   denials, and the circuit breaker's state. The API serves them at /metrics when the worker runs in
 *   its process; a standalone worker serves them on METRICS_PORT. The Temporal runtime's own metrics
 *   come from its Prometheus endpoint (`TEMPORAL_METRICS_BIND`, see `runtimeTelemetryOptions`).
 */
import { createServer, type Server } from 'node:http';
import { context, SpanKind, SpanStatusCode, trace, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Resource } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { ActivityInboundCallsInterceptor, Next, WorkerOptions } from '@temporalio/worker';
import { makeWorkflowExporter, OpenTelemetryActivityInboundInterceptor, OpenTelemetryActivityOutboundInterceptor } from '@temporalio/interceptors-opentelemetry';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ChatRouter } from '../activities/llm-step';
import { costUsd } from '../activities/llm/cost';
import type { CircuitBreaker } from '../activities/llm/circuit-breaker';

/** The workflow-side interceptors, bundled into the workflow code (a pre-built bundle must include them). */
export const WORKFLOW_INTERCEPTOR_MODULE = require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors');

/** LLM latency buckets (seconds): from a cached short answer to a long streamed one. */
const LLM_LATENCY_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160];
/** The breaker gauge's values, in order of severity. */
const BREAKER_STATE_VALUE = { closed: 0, half_open: 1, open: 2 } as const;
/** Tool results that start so were refused by governance without asking anyone. */
const DENIAL_PREFIX = 'Denied by policy';

export interface TelemetryOptions {
  /** Where spans go; absent: no tracing (metrics only). */
  spanProcessor?: SpanProcessor;
  /** Collect Prometheus metrics (default true). */
  metrics?: boolean;
  serviceName?: string;
}

export class Telemetry {
  readonly resource: Resource;
  readonly tracer?: Tracer;
  readonly registry = new Registry();
  private readonly provider?: BasicTracerProvider;
  private readonly spanProcessor?: SpanProcessor;
  private readonly metricsOn: boolean;
  private readonly tokens: Counter<'provider' | 'model' | 'kind'>;
  private readonly cost: Counter<'provider' | 'model'>;
  private readonly latency: Histogram<'provider' | 'model' | 'outcome'>;
  private readonly denials: Counter<'tool'>;
  private readonly breakers = new Set<{ breaker: CircuitBreaker; candidates: () => Array<{ provider: string; model: string }> }>();

  constructor(options: TelemetryOptions) {
    this.resource = new Resource({ 'service.name': options.serviceName ?? 'durable-agents-worker' });
    this.metricsOn = options.metrics ?? true;
    if (options.spanProcessor) {
      this.spanProcessor = options.spanProcessor;
      this.provider = new BasicTracerProvider({ resource: this.resource, spanProcessors: [options.spanProcessor] });
      this.tracer = this.provider.getTracer('durable-agents');
      // Spans nest across awaits only with a context manager; a second registration is refused harmlessly.
      context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    }
    const registers = [this.registry];
    this.tokens = new Counter({ name: 'durable_agents_llm_tokens_total', help: 'LLM tokens by provider, model and kind (input, output, cache_read, cache_write)', labelNames: ['provider', 'model', 'kind'], registers });
    this.cost = new Counter({ name: 'durable_agents_llm_cost_usd_total', help: 'LLM spend in USD at list prices', labelNames: ['provider', 'model'], registers });
    this.latency = new Histogram({ name: 'durable_agents_llm_call_seconds', help: 'LLM call latency, routing and fallbacks included', labelNames: ['provider', 'model', 'outcome'], buckets: LLM_LATENCY_BUCKETS, registers });
    this.denials = new Counter({ name: 'durable_agents_tool_denials_total', help: 'Tool calls refused by governance without asking anyone', labelNames: ['tool'], registers });
    const breakers = this.breakers;
    new Gauge({
      name: 'durable_agents_llm_breaker_state',
      help: 'Circuit breaker per provider and model: 0 closed, 1 half-open, 2 open',
      labelNames: ['provider', 'model'],
      registers,
      collect() {
        for (const { breaker, candidates } of breakers) {
          for (const c of candidates()) this.set({ provider: c.provider, model: c.model }, BREAKER_STATE_VALUE[breaker.snapshot(c.provider, c.model).state]);
        }
      },
    });
  }

  /**
   * Worker options that add the interceptors and the workflow span sink (merged by `createAgentWorker`).
   * With a pre-built bundle the workflow interceptors must already be in it (`WORKFLOW_INTERCEPTOR_MODULE`).
   */
  workerOptions(options: { prebuiltBundle?: boolean } = {}): Pick<WorkerOptions, 'interceptors' | 'sinks'> {
    const activity: NonNullable<NonNullable<WorkerOptions['interceptors']>['activity']> = [];
    if (this.tracer) {
      const tracer = this.tracer;
      activity.push((ctx) => ({ inbound: new OpenTelemetryActivityInboundInterceptor(ctx, { tracer }), outbound: new OpenTelemetryActivityOutboundInterceptor(ctx) }));
    }
    if (this.metricsOn) {
      activity.push((ctx) => ({ inbound: new ToolDenialCounter(ctx.info.activityType, this.denials) }));
    }
    return {
      interceptors: { activity, ...(this.tracer && !options.prebuiltBundle ? { workflowModules: [WORKFLOW_INTERCEPTOR_MODULE] } : {}) },
      ...(this.spanProcessor ? { sinks: { exporter: makeWorkflowExporter(this.spanProcessor, this.resource) } } : {}),
    };
  }

  /** The router with a span (when tracing) and metrics around each call; errors pass through unchanged. */
  instrumentRouter(router: ChatRouter): ChatRouter {
    const withBreaker = router as ChatRouter & { breaker?: CircuitBreaker; tiers?: Record<string, Array<{ provider: string; model: string }>> };
    if (this.metricsOn && withBreaker.breaker && withBreaker.tiers) {
      const tiers = withBreaker.tiers;
      this.breakers.add({ breaker: withBreaker.breaker, candidates: () => Object.values(tiers).flat() });
    }
    return {
      candidates: (target) => router.candidates(target),
      chat: async (request, target, callbacks) => {
        const requested = router.candidates(target)[0];
        const started = Date.now();
        const span = this.tracer?.startSpan(`chat ${requested?.model ?? 'unknown'}`, {
          kind: SpanKind.CLIENT,
          attributes: {
            'gen_ai.operation.name': 'chat',
            'gen_ai.provider.name': requested?.provider ?? 'unknown',
            'gen_ai.request.model': requested?.model ?? 'unknown',
            ...(request.maxTokens !== undefined ? { 'gen_ai.request.max_tokens': request.maxTokens } : {}),
          },
        });
        try {
          const run = () => router.chat(request, target, callbacks);
          const result = span ? await context.with(trace.setSpan(context.active(), span), run) : await run();
          const cost = costUsd(result.usage, result.model);
          const { provider, model, usage } = result;
          span?.setAttributes({
            'gen_ai.provider.name': provider,
            'gen_ai.response.model': model,
            'gen_ai.response.finish_reasons': [result.stopReason],
            'gen_ai.usage.input_tokens': usage.inputTokens,
            'gen_ai.usage.output_tokens': usage.outputTokens,
            'gen_ai.usage.cache_read.input_tokens': usage.cacheReadTokens,
            'gen_ai.usage.cache_creation.input_tokens': usage.cacheWriteTokens,
            'durable_agents.llm.cost_usd': cost,
          });
          if (this.metricsOn) {
            this.tokens.inc({ provider, model, kind: 'input' }, usage.inputTokens);
            this.tokens.inc({ provider, model, kind: 'output' }, usage.outputTokens);
            this.tokens.inc({ provider, model, kind: 'cache_read' }, usage.cacheReadTokens);
            this.tokens.inc({ provider, model, kind: 'cache_write' }, usage.cacheWriteTokens);
            this.cost.inc({ provider, model }, cost);
            this.latency.observe({ provider, model, outcome: 'ok' }, (Date.now() - started) / 1000);
          }
          return result;
        } catch (error) {
          span?.recordException(error as Error);
          span?.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
          span?.setAttribute('error.type', (error as { type?: string }).type ?? (error as Error).name);
          if (this.metricsOn) this.latency.observe({ provider: requested?.provider ?? 'unknown', model: requested?.model ?? 'unknown', outcome: 'error' }, (Date.now() - started) / 1000);
          throw error;
        } finally {
          span?.end();
        }
      },
    };
  }

  /** Serves this registry (and the Temporal runtime's metrics, when given) at http://host:port/metrics. */
  async serveMetrics(port: number, host = '127.0.0.1', temporalMetricsUrl?: string): Promise<Server> {
    const server = createServer((req, res) => {
      if (req.url !== '/metrics') {
        res.writeHead(404).end();
        return;
      }
      void (async () => {
        const parts = [await this.registry.metrics()];
        if (temporalMetricsUrl) parts.push(await fetch(temporalMetricsUrl, { signal: AbortSignal.timeout(2_000) }).then((r) => r.text()).catch(() => '# temporal runtime metrics unavailable\n'));
        res.writeHead(200, { 'content-type': this.registry.contentType }).end(parts.join('\n'));
      })();
    });
    await new Promise<void>((resolve) => server.listen(port, host, resolve));
    return server;
  }

  async shutdown(): Promise<void> {
    await this.provider?.shutdown();
  }
}

/**
 * Counts tool calls that governance refused outright: the result of an `executeTool` activity (a call
 * run after an approval decision) and each call the fused `llmStepWithTools` step ran itself.
 */
class ToolDenialCounter implements ActivityInboundCallsInterceptor {
  constructor(
    private readonly activityType: string,
    private readonly denials: Counter<'tool'>,
  ) {}

  async execute(input: Parameters<ActivityInboundCallsInterceptor['execute'] & object>[0], next: Next<ActivityInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    const result = await next(input);
    type ToolOutcome = { kind?: string; tool?: string; isError?: boolean; preview?: string };
    const outcomes: ToolOutcome[] =
      this.activityType === 'executeTool'
        ? [result as ToolOutcome]
        : this.activityType === 'llmStepWithTools'
          ? ((result as { toolResults?: Array<{ result: ToolOutcome }> }).toolResults ?? []).map((t) => t.result)
          : [];
    for (const r of outcomes) {
      if (r.kind === 'done' && r.isError && r.preview?.startsWith(DENIAL_PREFIX)) this.denials.inc({ tool: r.tool ?? 'unknown' });
    }
    return result;
  }
}

/**
 * Telemetry from the environment; undefined (off) unless one of these is set:
 * - `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: traces by OTLP over HTTP
 *   (the exporter reads the standard OTEL_* variables, headers included); `OTEL_SERVICE_NAME` names it;
 * - `DURABLE_AGENTS_METRICS=1` or `METRICS_PORT`: Prometheus metrics.
 */
export function telemetryFromEnv(env: NodeJS.ProcessEnv = process.env): Telemetry | undefined {
  const tracing = Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  const metrics = env.DURABLE_AGENTS_METRICS === '1' || Boolean(env.METRICS_PORT);
  if (!tracing && !metrics) return undefined;
  return new Telemetry({
    spanProcessor: tracing ? new BatchSpanProcessor(new OTLPTraceExporter()) : undefined,
    metrics,
    serviceName: env.OTEL_SERVICE_NAME,
  });
}

/**
 * `Runtime.install` telemetry options: the Temporal runtime's own metrics (workflow task latency,
 * poll counts, sticky cache…) on a Prometheus endpoint when `TEMPORAL_METRICS_BIND` (host:port) is set.
 */
export function runtimeTelemetryOptions(env: NodeJS.ProcessEnv = process.env): { metrics: { prometheus: { bindAddress: string } } } | undefined {
  return env.TEMPORAL_METRICS_BIND ? { metrics: { prometheus: { bindAddress: env.TEMPORAL_METRICS_BIND } } } : undefined;
}
