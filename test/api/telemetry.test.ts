import { spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { bundleWorkflowCode, NativeConnection, type Worker } from '@temporalio/worker';
import { createProvider } from '../../activities/llm/providers';
import { LlmRouter } from '../../activities/llm/router';
import { createAgentWorker } from '../../worker/create-worker';
import { Telemetry, WORKFLOW_INTERCEPTOR_MODULE } from '../../worker/telemetry';
import { useHarness, submitTurn, toolTurn } from '../support/harness';
import { quietLogger } from '../support/quiet-logger';
import { ScriptedAgents } from '../workflow/task-support';
import { eventually } from '../support/eventually';
import { startTestApi, type TestApi } from './api-support';

/**
 * Telemetry switched on: one task yields workflow, activity and GenAI LLM-call spans (an in-memory
 * exporter), with the LLM span nested in its activity's span, and the API's /metrics shows the
 * tokens, cost, latency, tool denials, breaker state and approvals pending.
 */
describe('telemetry', () => {
  const h = useHarness({
    beforeClose: async () => {
      await api.close();
      worker.shutdown();
      await running;
      await connection.close();
      await telemetry.shutdown();
      runtimeMetrics.close();
    },
  });
  let api: TestApi;
  let agents: ScriptedAgents;
  let worker: Worker;
  let running: Promise<void>;
  let connection: NativeConnection;
  const exporter = new InMemorySpanExporter();
  const telemetry = new Telemetry({
    spanProcessor: new SimpleSpanProcessor(exporter),
    metrics: true,
    spendPerAgent: true,
  });
  /** Stands in for the Temporal runtime's Prometheus endpoint (its counters have no `_total`). */
  let runtimeMetrics: Server;

  beforeAll(async () => {
    agents = new ScriptedAgents(h.llm);
    // The workflow interceptors run inside the workflow sandbox, so they are bundled with the workflows.
    const { code } = await bundleWorkflowCode({
      workflowsPath: require.resolve('../../workflows'),
      workflowInterceptorModules: [WORKFLOW_INTERCEPTOR_MODULE],
      logger: quietLogger,
    });
    connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS! });
    worker = await createAgentWorker({
      connection,
      namespace: 'default',
      taskQueue: h.taskQueue,
      db: h.db.db,
      router: LlmRouter.fromConfig(
        [{ name: 'anthropic', kind: 'anthropic', apiKey: 'test-key', baseURL: h.llm.url }],
        createProvider,
      ),
      workflowBundle: { code },
      telemetry,
    });
    running = worker.run();
    runtimeMetrics = createServer((_req, res) =>
      res.end(
        '# HELP temporal_request Count of client request successes by rpc name\n' +
          '# TYPE temporal_request counter\ntemporal_request{operation="Poll"} 3\n',
      ),
    );
    await new Promise<void>((resolve) => runtimeMetrics.listen(0, '127.0.0.1', resolve));
    api = await startTestApi(h, {
      registries: [telemetry.registry],
      temporalMetricsUrl: `http://127.0.0.1:${(runtimeMetrics.address() as AddressInfo).port}/metrics`,
    });
  }, 180_000);

  test('one task: workflow, activity and LLM spans with GenAI attributes; non-zero token counters at /metrics', async () => {
    const agentId = await h.createAgent();
    const taskId = agents.task([
      toolTurn('shell_execute', { command: 'git push --force origin main' }),
      toolTurn('file_write', { path: 'traced.txt', content: 'hello' }),
      toolTurn('shell_execute', { command: 'touch approved.txt' }),
      submitTurn('wrote it'),
    ]);
    await h.client.startTask({ agentId, taskId, title: 'Traced', description: 'write a file' });
    const waiting = await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1);
    await h.client.decideApproval(taskId, {
      requestId: waiting.pendingApprovals[0]!.requestId,
      decision: 'approved',
      decidedBy: 'tester',
    });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    await h.client.review(taskId, { decision: 'accept', decidedBy: 'tester' });
    await h.client.result(taskId);

    const spans = await eventually(() => {
      const all = exporter.getFinishedSpans();
      return all.some((s) => s.name === 'RunWorkflow:taskWorkflow') &&
        all.some((s) => s.name === 'RunWorkflow:taskRoundWorkflow')
        ? all
        : undefined;
    }, 'the workflow spans to be exported');
    const names = new Set(spans.map((s) => s.name));
    for (const name of [
      'RunWorkflow:taskWorkflow',
      'RunWorkflow:taskRoundWorkflow',
      'StartActivity:llmStepWithTools',
      'RunActivity:llmStepWithTools',
    ]) {
      expect([name, names.has(name)]).toEqual([name, true]);
    }
    // (The Anthropic SDK adds its own `anthropic.messages.create` span below ours once a tracer is registered.)
    const llmSpans = spans.filter(
      (s) => s.name.startsWith('chat ') && s.attributes['gen_ai.usage.input_tokens'] === 160,
    );
    expect(llmSpans.length).toBeGreaterThanOrEqual(3);
    const [first] = llmSpans;
    expect(first!.name).toMatch(/^chat /);
    expect(first!.attributes).toMatchObject({
      'gen_ai.provider.name': 'anthropic',
      'gen_ai.request.model': expect.any(String),
      'gen_ai.response.model': expect.any(String),
      // Cached tokens count as input (GenAI conventions): 100 uncached + 50 cache read + 10 cache write.
      'gen_ai.usage.input_tokens': 160,
      'gen_ai.usage.output_tokens': 20,
      'gen_ai.usage.cache_read.input_tokens': 50,
      'gen_ai.usage.cache_creation.input_tokens': 10,
      'gen_ai.response.finish_reasons': ['tool_use'],
    });
    expect(first!.attributes['durable_agents.llm.cost_usd']).toBeGreaterThan(0);
    // Prompts and answers stay off spans unless content capture is switched on.
    expect(first!.attributes['gen_ai.input.messages']).toBeUndefined();
    expect(first!.attributes['gen_ai.output.messages']).toBeUndefined();
    // The LLM span is a child of the loop step's activity span, in the same trace as the workflows.
    const parent = spans.find((s) => s.spanContext().spanId === parentId(first!));
    expect(parent?.name).toBe('RunActivity:llmStepWithTools');
    const taskTrace = spans.find((s) => s.name === 'RunWorkflow:taskWorkflow')!.spanContext().traceId;
    expect(
      spans.filter((s) => s.name === 'RunWorkflow:taskRoundWorkflow').map((s) => s.spanContext().traceId),
    ).toContain(taskTrace);

    expect((await api.call('GET', '/v1/agents', { token: api.tokens.read })).status).toBe(200);
    const pending = await h.db.db
      .selectFrom('approvals')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('status', '=', 'pending')
      .executeTakeFirstOrThrow();
    const metrics = await api.call('GET', '/metrics', { token: api.tokens.read });
    expect(metrics.status).toBe(200);
    const text = String(metrics.body);
    const value = (pattern: RegExp) => Number(pattern.exec(text)?.[1] ?? NaN);
    expect(
      value(/^durable_agents_llm_tokens_total\{provider="anthropic",model="[^"]+",kind="input"\} (\d+)/m),
    ).toBeGreaterThanOrEqual(300);
    expect(
      value(/^durable_agents_llm_tokens_total\{provider="anthropic",model="[^"]+",kind="output"\} (\d+)/m),
    ).toBeGreaterThanOrEqual(60);
    expect(
      value(/^durable_agents_llm_cost_usd_total\{provider="anthropic",model="[^"]+"\} ([\d.e-]+)/m),
    ).toBeGreaterThan(0);
    expect(
      value(/^durable_agents_llm_call_seconds_count\{provider="anthropic",model="[^"]+",outcome="ok"\} (\d+)/m),
    ).toBeGreaterThanOrEqual(3);
    // The GenAI conventions' client metrics, under the names OpenTelemetry's Prometheus exporter gives them.
    expect(
      value(
        /^gen_ai_client_operation_duration_seconds_count\{gen_ai_operation_name="chat",gen_ai_provider_name="anthropic",gen_ai_request_model="[^"]+",gen_ai_response_model="[^"]+",server_address="127\.0\.0\.1",error_type=""\} (\d+)/m,
      ),
    ).toBeGreaterThanOrEqual(3);
    expect(text).toMatch(/^gen_ai_client_operation_duration_seconds_bucket\{le="81\.92",/m);
    expect(value(/^gen_ai_client_token_usage_sum\{[^}]*gen_ai_token_type="input"\} (\d+)/m)).toBeGreaterThanOrEqual(
      480,
    );
    expect(value(/^gen_ai_client_token_usage_sum\{[^}]*gen_ai_token_type="output"\} (\d+)/m)).toBeGreaterThanOrEqual(
      60,
    );
    expect(value(/^durable_agents_tool_denials_total\{tool="shell_execute"\} (\d+)/m)).toBe(1);
    expect(value(/^durable_agents_llm_breaker_state\{provider="anthropic",model="[^"]+"\} (\d+)/m)).toBe(0);
    expect(value(/^durable_agents_approvals_pending (\d+)/m)).toBe(Number(pending.n));
    expect(
      value(/^durable_agents_http_requests_total\{method="GET",route="\/v1\/agents",status="200"\} (\d+)/m),
    ).toBeGreaterThanOrEqual(1);
    // Tool calls by tool and outcome; the approved call counts its ask and its run.
    expect(value(/^durable_agents_tool_calls_total\{tool="shell_execute",outcome="denied"\} (\d+)/m)).toBe(1);
    expect(value(/^durable_agents_tool_calls_total\{tool="file_write",outcome="ok"\} (\d+)/m)).toBe(1);
    expect(value(/^durable_agents_tool_calls_total\{tool="shell_execute",outcome="approval_required"\} (\d+)/m)).toBe(
      1,
    );
    expect(value(/^durable_agents_tool_calls_total\{tool="shell_execute",outcome="ok"\} (\d+)/m)).toBe(1);
    expect(value(/^durable_agents_approval_wait_seconds_count\{decision="approved"\} (\d+)/m)).toBe(1);
    expect(value(/^durable_agents_tasks\{state="completed"\} (\d+)/m)).toBeGreaterThanOrEqual(1);
    expect(
      value(new RegExp(`^durable_agents_agent_cost_usd_total\\{agent="${agentId}"\\} ([\\d.e-]+)`, 'm')),
    ).toBeGreaterThan(0);

    // promtool (Prometheus's own checker) finds nothing to say about our exposition; Temporal's runtime
    // metrics, named its own way, are served apart.
    expect(text).not.toContain('temporal_request');
    const checked = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect([checked.status, checked.stdout + checked.stderr]).toEqual([0, '']);
    // The runtime's counters (served without `_total` here, as a runtime not told otherwise does)
    // come out promtool-clean too.
    const runtime = await api.call('GET', '/metrics/temporal', { token: api.tokens.read });
    expect([runtime.status, String(runtime.body)]).toEqual([
      200,
      expect.stringContaining('temporal_request_total{operation="Poll"} 3'),
    ]);
    const runtimeChecked = spawnSync('promtool', ['check', 'metrics'], {
      input: String(runtime.body),
      encoding: 'utf8',
    });
    expect([runtimeChecked.status, runtimeChecked.stdout + runtimeChecked.stderr]).toEqual([0, '']);
  });
});

function parentId(span: ReadableSpan): string | undefined {
  return (span as ReadableSpan & { parentSpanId?: string }).parentSpanId;
}
