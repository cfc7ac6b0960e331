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
import { Resource } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { ActivityInboundCallsInterceptor, Next, WorkerOptions } from '@temporalio/worker';
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ChatRouter } from '../activities/llm/types';
import { costUsd } from '../activities/llm/cost';
import type { CircuitBreaker } from '../activities/llm/circuit-breaker';
import { activeConversation, withConversation } from '../activities/tracing';
import {
  captureContentFromEnv,
  GenAiClientMetrics,
  inputContentAttributes,
  outputContentAttributes,
} from './genai-conventions';
import { withCounterTotals } from './prometheus-text';
import { hostPortFromEnv, portFromEnv, switchFromEnv, urlFromEnv, wholeNumberFromEnv } from '../activities/env-values';
import {
  FlatAttributesSpanProcessor,
  otlpHeadersFromEnv,
  otlpTraceExporterFromEnv,
  registerTracing,
  tracingRequested,
} from './tracing';
import { registerMcpMetrics } from '../activities/tools/mcp/metrics';

/**
 * The workflow-side interceptors (Temporal's, with signals and updates kept in the task's trace and an
 * `invoke_agent` span per round), bundled into the workflow code (a pre-built bundle must include them).
 */
export const WORKFLOW_INTERCEPTOR_MODULE = require.resolve('../workflows/telemetry-interceptors');

/** LLM latency buckets (seconds): from a cached short answer to a long streamed one. */
const LLM_LATENCY_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160];
/** The breaker gauge's values, in order of severity. */
const BREAKER_STATE_VALUE = { closed: 0, half_open: 1, open: 2 } as const;
/** Tool results that start so were refused by governance without asking anyone. */
const DENIAL_PREFIX = 'Denied by policy';
/** Approval wait buckets (seconds): from a person at the screen to one who answers after the weekend. */
const APPROVAL_WAIT_BUCKETS = [5, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 3 * 24 * 3600];
/**
 * Distinct values a label driven by data may take before the rest are counted as `other`: tool names
 * come from the model (an unknown tool's name too) and agent ids from users, so neither may grow a
 * series without bound.
 */
export const MAX_TOOL_LABELS = 100;
export const MAX_AGENT_LABELS = 500;

export interface TelemetryOptions {
  /** Where spans go; absent: no tracing (metrics only). */
  spanProcessor?: SpanProcessor;
  /** Collect Prometheus metrics (default true). */
  metrics?: boolean;
  /** Also count spend per agent (`durable_agents_agent_cost_usd_total{agent}`), for a bounded number of agents. Default off. */
  spendPerAgent?: boolean;
  serviceName?: string;
  /** Prompts and answers on `chat` spans (default off). */
  captureContent?: boolean;
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
  private readonly genAi: GenAiClientMetrics;
  /** Prompts and answers on `chat` spans: opt-in (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`). */
  private readonly captureContent: boolean;
  private readonly activityMetrics: ActivityMetrics;
  private readonly breakers = new Set<{
    breaker: CircuitBreaker;
    candidates: () => Array<{ provider: string; model: string }>;
  }>();

  constructor(options: TelemetryOptions) {
    this.resource = new Resource({ 'service.name': options.serviceName ?? 'durable-agents-worker' });
    this.metricsOn = options.metrics ?? true;
    if (options.spanProcessor) {
      this.spanProcessor = new FlatAttributesSpanProcessor(options.spanProcessor);
      this.provider = new BasicTracerProvider({ resource: this.resource, spanProcessors: [this.spanProcessor] });
      this.tracer = this.provider.getTracer('durable-agents');
      // The propagator links activities to their workflow's trace; the global provider serves the
      // tool spans made inside activities and the client interceptor.
      registerTracing(this.provider);
    }
    const registers = [this.registry];
    this.genAi = new GenAiClientMetrics(this.registry);
    this.captureContent = options.captureContent ?? false;
    this.tokens = new Counter({
      name: 'durable_agents_llm_tokens_total',
      help: 'LLM tokens by provider, model and kind (input, output, cache_read, cache_write)',
      labelNames: ['provider', 'model', 'kind'],
      registers,
    });
    this.cost = new Counter({
      name: 'durable_agents_llm_cost_usd_total',
      help: 'LLM spend in USD at list prices',
      labelNames: ['provider', 'model'],
      registers,
    });
    this.latency = new Histogram({
      name: 'durable_agents_llm_call_seconds',
      help: 'LLM call latency, routing and fallbacks included',
      labelNames: ['provider', 'model', 'outcome'],
      buckets: LLM_LATENCY_BUCKETS,
      registers,
    });
    this.denials = new Counter({
      name: 'durable_agents_tool_denials_total',
      help: 'Tool calls refused by governance without asking anyone',
      labelNames: ['tool'],
      registers,
    });
    this.activityMetrics = {
      denials: this.denials,
      toolCalls: new Counter({
        name: 'durable_agents_tool_calls_total',
        help: 'Tool call outcomes by tool: ok, error, denied, interrupted, replayed, run_in_workflow, and approval_required (the call counts again with how it ran once decided)',
        labelNames: ['tool', 'outcome'],
        registers,
      }),
      approvalWait: new Histogram({
        name: 'durable_agents_approval_wait_seconds',
        help: 'How long an approval request waited for its decision, by decision',
        labelNames: ['decision'],
        buckets: APPROVAL_WAIT_BUCKETS,
        registers,
      }),
      agentSpend: options.spendPerAgent
        ? new Counter({
            name: 'durable_agents_agent_cost_usd_total',
            help: "LLM spend in USD at list prices per agent (the agent loop's steps)",
            labelNames: ['agent'],
            registers,
          })
        : undefined,
      tools: new BoundedLabel(MAX_TOOL_LABELS),
      agents: new BoundedLabel(MAX_AGENT_LABELS),
    };
    registerMcpMetrics(this.registry);
    const breakers = this.breakers;
    new Gauge({
      name: 'durable_agents_llm_breaker_state',
      help: 'Circuit breaker per provider and model: 0 closed, 1 half-open, 2 open',
      labelNames: ['provider', 'model'],
      registers,
      collect() {
        for (const { breaker, candidates } of breakers) {
          for (const c of candidates())
            this.set(
              { provider: c.provider, model: c.model },
              BREAKER_STATE_VALUE[breaker.snapshot(c.provider, c.model).state],
            );
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
      activity.push((ctx) => ({
        inbound: new OpenTelemetryActivityInboundInterceptor(ctx, { tracer }),
        outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
      }));
      activity.push(() => ({ inbound: new ConversationContext() }));
    }
    if (this.metricsOn) {
      activity.push((ctx) => ({ inbound: new ActivityOutcomeCounter(ctx.info.activityType, this.activityMetrics) }));
    }
    return {
      interceptors: {
        activity,
        ...(this.tracer && !options.prebuiltBundle ? { workflowModules: [WORKFLOW_INTERCEPTOR_MODULE] } : {}),
      },
      ...(this.spanProcessor ? { sinks: { exporter: makeWorkflowExporter(this.spanProcessor, this.resource) } } : {}),
    };
  }

  /** The router with a span (when tracing) and metrics around each call; errors pass through unchanged. */
  instrumentRouter(router: ChatRouter): ChatRouter {
    const withBreaker = router as ChatRouter & {
      breaker?: CircuitBreaker;
      tiers?: Record<string, Array<{ provider: string; model: string }>>;
    };
    if (this.metricsOn && withBreaker.breaker && withBreaker.tiers) {
      const tiers = withBreaker.tiers;
      this.breakers.add({ breaker: withBreaker.breaker, candidates: () => Object.values(tiers).flat() });
    }
    return {
      candidates: (target) => router.candidates(target),
      chat: async (request, target, callbacks) => {
        const requested = router.candidates(target)[0];
        const started = Date.now();
        const conversation = activeConversation();
        const span = this.tracer?.startSpan(`chat ${requested?.model ?? 'unknown'}`, {
          kind: SpanKind.CLIENT,
          attributes: {
            'gen_ai.operation.name': 'chat',
            'gen_ai.provider.name': requested?.provider ?? 'unknown',
            'gen_ai.request.model': requested?.model ?? 'unknown',
            ...(request.maxTokens !== undefined ? { 'gen_ai.request.max_tokens': request.maxTokens } : {}),
            ...(request.temperature !== undefined ? { 'gen_ai.request.temperature': request.temperature } : {}),
            ...(conversation ? { 'gen_ai.conversation.id': conversation } : {}),
            ...(this.captureContent ? inputContentAttributes(request) : {}),
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
            ...(result.responseId ? { 'gen_ai.response.id': result.responseId } : {}),
            ...(result.server
              ? {
                  'server.address': result.server.address,
                  ...(result.server.port ? { 'server.port': result.server.port } : {}),
                }
              : {}),
            // The conventions count cached prompt tokens in the input; our usage keeps them apart.
            'gen_ai.usage.input_tokens': usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens,
            'gen_ai.usage.output_tokens': usage.outputTokens,
            'gen_ai.usage.cache_read.input_tokens': usage.cacheReadTokens,
            'gen_ai.usage.cache_creation.input_tokens': usage.cacheWriteTokens,
            'durable_agents.llm.cost_usd': cost,
            ...(this.captureContent ? outputContentAttributes(result) : {}),
          });
          if (this.metricsOn) {
            this.genAi.record({
              provider,
              requestModel: requested?.model ?? model,
              responseModel: model,
              serverAddress: result.server?.address,
              seconds: (Date.now() - started) / 1000,
              tokens: {
                input: usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens,
                output: usage.outputTokens,
              },
            });
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
          if (this.metricsOn) {
            this.latency.observe(
              { provider: requested?.provider ?? 'unknown', model: requested?.model ?? 'unknown', outcome: 'error' },
              (Date.now() - started) / 1000,
            );
            this.genAi.record({
              provider: requested?.provider ?? 'unknown',
              requestModel: requested?.model ?? 'unknown',
              errorType: (error as { type?: string }).type ?? (error as Error).name,
              seconds: (Date.now() - started) / 1000,
            });
          }
          throw error;
        } finally {
          span?.end();
        }
      },
    };
  }

  /**
   * Serves this registry at http://host:port/metrics and, when given, the Temporal runtime's metrics at
   * /metrics/temporal, apart (their own names, `temporal_*`), both passing `promtool check metrics`.
   * Rejects when the port cannot be listened on (taken, forbidden, not this machine's address).
   */
  async serveMetrics(port: number, host = '127.0.0.1', temporalMetricsUrl?: string): Promise<Server> {
    const server = createServer((req, res) => {
      void (async () => {
        if (req.url === '/metrics') {
          res.writeHead(200, { 'content-type': this.registry.contentType }).end(await this.registry.metrics());
        } else if (req.url === '/metrics/temporal' && temporalMetricsUrl) {
          const text = await fetchTemporalMetrics(temporalMetricsUrl);
          res
            .writeHead(text === undefined ? 502 : 200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' })
            .end(text ?? '# the Temporal runtime metrics endpoint does not answer\n');
        } else {
          res.writeHead(404).end();
        }
      })();
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, resolve);
    });
    return server;
  }

  /** Exports every span that has ended so far. */
  async flush(): Promise<void> {
    await this.provider?.forceFlush();
  }

  async shutdown(): Promise<void> {
    await this.provider?.shutdown();
  }
}

/** Puts the session an activity works on into its context, for the `gen_ai.conversation.id` of its LLM and tool spans. */
class ConversationContext implements ActivityInboundCallsInterceptor {
  async execute(
    input: Parameters<ActivityInboundCallsInterceptor['execute'] & object>[0],
    next: Next<ActivityInboundCallsInterceptor, 'execute'>,
  ): Promise<unknown> {
    const first = input.args[0] as { sessionId?: unknown } | undefined;
    if (typeof first?.sessionId !== 'string') return next(input);
    return context.with(withConversation(context.active(), first.sessionId), () => next(input));
  }
}

interface ActivityMetrics {
  denials: Counter<'tool'>;
  toolCalls: Counter<'tool' | 'outcome'>;
  approvalWait: Histogram<'decision'>;
  agentSpend?: Counter<'agent'>;
  tools: BoundedLabel;
  agents: BoundedLabel;
}

/** A label's values as they come, up to `max` distinct ones; every later one is `other`. */
export class BoundedLabel {
  private readonly seen = new Set<string>();

  constructor(private readonly max: number) {}

  of(value: string): string {
    if (this.seen.has(value)) return value;
    if (this.seen.size >= this.max) return 'other';
    this.seen.add(value);
    return value;
  }
}

type ToolOutcome = {
  kind?: string;
  tool?: string;
  isError?: boolean;
  preview?: string;
  replayed?: boolean;
  interrupted?: boolean;
};

/** A tool call's outcome as the `outcome` label names it. */
function outcomeLabel(r: ToolOutcome): string {
  if (r.kind === 'approval-required') return 'approval_required';
  if (r.kind === 'run-in-workflow') return 'run_in_workflow';
  if (r.replayed) return 'replayed';
  if (r.interrupted) return 'interrupted';
  if (r.isError && r.preview?.startsWith(DENIAL_PREFIX)) return 'denied';
  return r.isError ? 'error' : 'ok';
}

/**
 * Metrics read from activity results: each tool call's outcome (an `executeTool` activity, or each
 * call the fused `llmStepWithTools` step ran or deferred), governance denials, how long an approval
 * waited (`recordApprovalDecision`), and, when switched on, each agent's spend on its loop's steps.
 */
class ActivityOutcomeCounter implements ActivityInboundCallsInterceptor {
  constructor(
    private readonly activityType: string,
    private readonly metrics: ActivityMetrics,
  ) {}

  async execute(
    input: Parameters<ActivityInboundCallsInterceptor['execute'] & object>[0],
    next: Next<ActivityInboundCallsInterceptor, 'execute'>,
  ): Promise<unknown> {
    const result = await next(input);
    const m = this.metrics;
    const outcomes: ToolOutcome[] =
      this.activityType === 'executeTool'
        ? [result as ToolOutcome]
        : this.activityType === 'llmStepWithTools'
          ? [
              ...((result as { toolResults?: Array<{ result: ToolOutcome }> }).toolResults ?? []).map((t) => t.result),
              // Only the first deferred call was examined (the ones after it wait their turn); a call that
              // is approved later counts again, with how it ran, from its `executeTool` activity.
              ...(
                (result as { deferred?: Array<{ name: string; approval?: unknown; inWorkflow?: unknown }> }).deferred ??
                []
              )
                .slice(0, 1)
                .flatMap((d) =>
                  d.approval
                    ? [{ kind: 'approval-required', tool: d.name }]
                    : d.inWorkflow
                      ? [{ kind: 'run-in-workflow', tool: d.name }]
                      : [],
                ),
            ]
          : [];
    for (const r of outcomes) {
      const tool = m.tools.of(r.tool ?? 'unknown');
      const outcome = outcomeLabel(r);
      m.toolCalls.inc({ tool, outcome });
      if (outcome === 'denied') m.denials.inc({ tool });
    }
    if (this.activityType === 'recordApprovalDecision') {
      const waited = (result as { waitedSeconds?: number } | undefined)?.waitedSeconds;
      const decision = (input.args[0] as { status?: string } | undefined)?.status;
      if (waited !== undefined && (decision === 'approved' || decision === 'rejected' || decision === 'timed_out'))
        m.approvalWait.observe({ decision }, waited);
    }
    if (m.agentSpend && (this.activityType === 'llmStep' || this.activityType === 'llmStepWithTools')) {
      const step = result as { replayed?: boolean; usage?: { costUsd?: number } };
      const agentId = (input.args[0] as { agentId?: unknown } | undefined)?.agentId;
      if (!step.replayed && typeof agentId === 'string' && (step.usage?.costUsd ?? 0) > 0)
        m.agentSpend.inc({ agent: m.agents.of(agentId) }, step.usage!.costUsd!);
    }
    return result;
  }
}

/**
 * The Temporal runtime's Prometheus text, its counters named `*_total` (promtool-clean whatever the
 * runtime's options), or undefined when its endpoint does not answer within 2 s.
 */
export async function fetchTemporalMetrics(url: string): Promise<string | undefined> {
  return fetch(url, { signal: AbortSignal.timeout(2_000) })
    .then(async (r) => (r.ok ? withCounterTotals(await r.text()) : undefined))
    .catch(() => undefined);
}

/**
 * Telemetry from the environment; undefined (off) unless one of these is set:
 * - `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: traces by OTLP over HTTP,
 *   protobuf unless `OTEL_EXPORTER_OTLP_PROTOCOL=http/json` (the exporter reads the standard OTEL_*
 *   variables, headers included); `OTEL_SERVICE_NAME` names it;
 * - `DURABLE_AGENTS_METRICS=1` or `METRICS_PORT`: Prometheus metrics (`DURABLE_AGENTS_METRICS_AGENT_SPEND=1`
 *   adds spend per agent).
 */
export function telemetryFromEnv(env: NodeJS.ProcessEnv = process.env): Telemetry | undefined {
  const tracing = tracingRequested(env);
  const metrics =
    switchFromEnv('DURABLE_AGENTS_METRICS', ['1', '0'], env) === true || portFromEnv('METRICS_PORT', env) !== undefined;
  const spendPerAgent = switchFromEnv('DURABLE_AGENTS_METRICS_AGENT_SPEND', ['1', '0'], env) === true;
  const captureContent = captureContentFromEnv(env);
  if (!tracing && !metrics) return undefined;
  return new Telemetry({
    spanProcessor: tracing ? new BatchSpanProcessor(otlpTraceExporterFromEnv(env)) : undefined,
    metrics,
    spendPerAgent,
    serviceName: env.OTEL_SERVICE_NAME,
    captureContent,
  });
}

/**
 * `Runtime.install` telemetry options: the Temporal runtime's own metrics (workflow task latency,
 * poll counts, sticky cache…) on a Prometheus endpoint when `TEMPORAL_METRICS_BIND` (host:port) is set,
 * or, optionally, pushed by OTLP/HTTP to `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` (the full URL, usually
 * `…/v1/metrics`) every `OTEL_METRIC_EXPORT_INTERVAL` ms (default 10 s).
 */
export function runtimeTelemetryOptions(env: NodeJS.ProcessEnv = process.env):
  | {
      metrics:
        | { prometheus: { bindAddress: string; countersTotalSuffix: true } }
        | { otel: { url: string; http: true; metricsExportInterval: number; headers?: Record<string, string> } };
    }
  | undefined {
  // Each variable is checked whichever wins, so a typo in the unused one still stops the start.
  const bindAddress = hostPortFromEnv('TEMPORAL_METRICS_BIND', env, { example: '127.0.0.1:9465' });
  const otlpUrl = urlFromEnv('OTEL_EXPORTER_OTLP_METRICS_ENDPOINT', env);
  const interval = wholeNumberFromEnv('OTEL_METRIC_EXPORT_INTERVAL', env, { min: 1, unit: 'milliseconds' });
  const headers =
    otlpHeadersFromEnv('OTEL_EXPORTER_OTLP_METRICS_HEADERS', env) ??
    otlpHeadersFromEnv('OTEL_EXPORTER_OTLP_HEADERS', env);
  // `_total` on counters: the endpoint itself passes promtool, for a Prometheus that scrapes it directly.
  if (bindAddress) return { metrics: { prometheus: { bindAddress, countersTotalSuffix: true } } };
  if (otlpUrl) {
    return {
      metrics: {
        otel: {
          url: otlpUrl,
          http: true,
          metricsExportInterval: interval ?? DEFAULT_METRIC_EXPORT_INTERVAL_MS,
          ...(headers ? { headers } : {}),
        },
      },
    };
  }
  return undefined;
}

/** The specification's default push interval for metrics exporters. */
const DEFAULT_METRIC_EXPORT_INTERVAL_MS = 10_000;
