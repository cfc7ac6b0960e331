import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { bundleWorkflowCode, NativeConnection, type Worker } from '@temporalio/worker';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createProvider } from '../../activities/llm/providers';
import { LlmRouter } from '../../activities/llm/router';
import { createAgentWorker } from '../../worker/create-worker';
import { telemetryFromEnv, WORKFLOW_INTERCEPTOR_MODULE, type Telemetry } from '../../worker/telemetry';
import { eventually } from '../support/eventually';
import { createHarness, submitTurn, textTurn, toolTurn, type Harness } from '../support/harness';
import { pythonWithTools } from '../support/python-tools';
import { quietLogger } from '../support/quiet-logger';
import { ScriptedAgents } from '../workflow/task-support';
import { readSse, startTestApi, type TestApi } from './api-support';

interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  attributes: Record<string, { type: string; value: any }>;
}

/** Spans of a task's own work: everything but the HTTP requests that only read or decide. */
const TASK_WORK =
  /^(StartWorkflow|RunWorkflow|StartActivity|RunActivity|StartChildWorkflowExecution|HandleSignal|HandleUpdate|ValidateUpdate|invoke_agent|chat |execute_tool)/;

/**
 * One task, one trace, as an OTLP collector sees it: the worker and the API export by the standard
 * `OTEL_EXPORTER_OTLP_*` variables (protobuf by default) to a receiver that decodes with the
 * OpenTelemetry project's published protocol definitions (Python's `opentelemetry-proto`). The HTTP
 * request that starts the task is the root; the workflows, activities, the `invoke_agent` round, each
 * `chat` LLM call and each `execute_tool` call, and the review signal sent later, all hang below it.
 */
describe('tracing: one task, one trace over OTLP/protobuf', () => {
  let h: Harness;
  let api: TestApi;
  let agents: ScriptedAgents;
  let worker: Worker;
  let running: Promise<void>;
  let connection: NativeConnection;
  let telemetry: Telemetry;
  let receiver: ChildProcessWithoutNullStreams;
  const requests: Array<{ path: string; contentType: string; spans: ReceivedSpan[] }> = [];
  const saved = { ...process.env };

  beforeAll(async () => {
    receiver = spawn(pythonWithTools(), [path.join(__dirname, '../support/python/otlp_receiver.py')]);
    const lines = createInterface({ input: receiver.stdout });
    const port = await new Promise<string>((resolve, reject) => {
      receiver.once('exit', (code) => reject(new Error(`the OTLP receiver exited (${code})`)));
      lines.once('line', resolve);
    });
    lines.on('line', (line) => requests.push(JSON.parse(line)));
    // Only the endpoint: the protocol is left to its default, which must be http/protobuf.
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${port}`;
    process.env.OTEL_BSP_SCHEDULE_DELAY = '100';
    delete process.env.OTEL_EXPORTER_OTLP_PROTOCOL;
    delete process.env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL;
    telemetry = telemetryFromEnv()!;
    expect(telemetry?.tracer).toBeDefined();

    h = await createHarness();
    agents = new ScriptedAgents(h.llm);
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
    api = await startTestApi(h);
  }, 300_000);
  afterAll(async () => {
    await api?.close();
    worker?.shutdown();
    await running;
    await connection?.close();
    await telemetry?.shutdown();
    await h?.close();
    receiver?.kill();
    process.env = saved;
  });

  test('POST /v1/tasks is the root of one trace holding the workflows, activities, invoke_agent, chat and execute_tool spans', async () => {
    const agentId = await h.createAgent();
    const taskId = agents.task([
      toolTurn('file_write', { path: 'traced.txt', content: 'hello' }),
      submitTurn('wrote it'),
    ]);
    expect(
      (await api.call('POST', '/v1/tasks', { token: api.tokens.service, body: { agentId, taskId, title: 'Traced' } }))
        .status,
    ).toBe(201);
    // The review route checks the task's row, written just after the workflow's own state changes.
    await eventually(async () => (await h.client.getTaskRow(taskId)).state === 'review', `task ${taskId} in review`);
    expect((await api.call('POST', `/v1/tasks/${taskId}/review`, { body: { decision: 'accept' } })).status).toBe(202);
    await h.client.result(taskId);

    const spans = await eventually(async () => {
      await telemetry.flush();
      const all = requests.flatMap((r) => r.spans);
      const names = new Set(all.map((s) => s.name));
      return [
        'RunWorkflow:taskWorkflow',
        'RunWorkflow:postTaskReflectionWorkflow',
        'HandleSignal:reviewDecision',
      ].every((n) => names.has(n))
        ? all
        : undefined;
    }, 'the task, reflection and review spans at the receiver');

    // Every export was protobuf (the default protocol), on the standard path.
    expect(new Set(requests.map((r) => `${r.path} ${r.contentType}`))).toEqual(
      new Set(['/v1/traces application/x-protobuf']),
    );

    const root = spans.find((s) => s.name === 'POST /v1/tasks')!;
    expect(root).toBeDefined();
    expect(root.parentSpanId).toBe('');
    const work = spans.filter((s) => TASK_WORK.test(s.name));
    expect(new Set(work.map((s) => s.traceId))).toEqual(new Set([root.traceId]));
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const parentName = (s: ReceivedSpan) => byId.get(s.parentSpanId)?.name;
    const one = (name: string | RegExp) => {
      const found = spans.filter((s) => (typeof name === 'string' ? s.name === name : name.test(s.name)));
      expect([String(name), found.length > 0]).toEqual([String(name), true]);
      return found[0]!;
    };
    expect(parentName(one('StartWorkflow:taskWorkflow'))).toBe('POST /v1/tasks');
    expect(parentName(one('RunWorkflow:taskWorkflow'))).toBe('StartWorkflow:taskWorkflow');

    // The round is an invoke_agent span; its LLM calls are chat spans below the step's activity.
    const invoke = one(`invoke_agent ${agentId}`);
    expect(parentName(invoke)).toBe('RunWorkflow:taskRoundWorkflow');
    expect(invoke.attributes['gen_ai.operation.name']?.value).toBe('invoke_agent');
    expect(invoke.attributes['gen_ai.agent.id']?.value).toBe(agentId);
    const chat = spans.find(
      (s) =>
        s.name.startsWith('chat ') &&
        byId.get(byId.get(s.parentSpanId)?.parentSpanId ?? '')?.parentSpanId === invoke.spanId,
    )!;
    expect(chat).toBeDefined();
    expect(parentName(chat)).toBe('RunActivity:llmStepWithTools');
    const attr = (s: ReceivedSpan, key: string) => s.attributes[key]?.value;
    expect({
      operation: attr(chat, 'gen_ai.operation.name'),
      provider: attr(chat, 'gen_ai.provider.name'),
      server: attr(chat, 'server.address'),
      port: Number(attr(chat, 'server.port')),
      // 100 uncached + 50 read from the cache + 10 written to it: the conventions count all of them as input.
      input: Number(attr(chat, 'gen_ai.usage.input_tokens')),
      output: Number(attr(chat, 'gen_ai.usage.output_tokens')),
      cacheRead: Number(attr(chat, 'gen_ai.usage.cache_read.input_tokens')),
    }).toEqual({
      operation: 'chat',
      provider: 'anthropic',
      server: '127.0.0.1',
      port: Number(new URL(h.llm.url).port),
      input: 160,
      output: 20,
      cacheRead: 50,
    });
    expect(attr(chat, 'gen_ai.response.id')).toMatch(/^msg_/);
    expect(attr(chat, 'gen_ai.conversation.id')).toEqual(expect.any(String));
    expect(attr(chat, 'gen_ai.request.model')).toEqual(expect.any(String));

    // Each tool call is an execute_tool span inside the step that ran it.
    const tool = one('execute_tool file_write');
    expect(parentName(tool)).toBe('RunActivity:llmStepWithTools');
    expect(attr(tool, 'gen_ai.tool.name')).toBe('file_write');
    expect(attr(tool, 'gen_ai.tool.call.id')).toEqual(expect.any(String));
    expect(attr(tool, 'gen_ai.conversation.id')).toBe(attr(chat, 'gen_ai.conversation.id'));

    // The review, sent by a later HTTP request, is handled inside the task's trace.
    expect(one('HandleSignal:reviewDecision').traceId).toBe(root.traceId);

    // Attribute values stay within OpenTelemetry's types: no nested maps, arrays of one primitive type.
    for (const s of spans) {
      for (const [key, v] of Object.entries(s.attributes)) {
        expect([s.name, key, v.type]).not.toEqual([s.name, key, 'kvlist_value']);
        if (v.type === 'array_value')
          expect([s.name, key, new Set((v.value as Array<{ type: string }>).map((x) => x.type)).size <= 1]).toEqual([
            s.name,
            key,
            true,
          ]);
      }
    }
  });

  /** Every span received so far, after a flush. */
  const received = async (): Promise<ReceivedSpan[]> => {
    await telemetry.flush();
    return requests.flatMap((r) => r.spans);
  };
  /** Spans of `traceId` whose parent never reached the receiver (the root has none to wait for). */
  const orphans = (spans: ReceivedSpan[], traceId: string): string[] => {
    const ids = new Set(spans.map((s) => s.spanId));
    return spans.filter((s) => s.traceId === traceId && s.parentSpanId && !ids.has(s.parentSpanId)).map((s) => s.name);
  };

  test('each chat message is its own trace, rooted at the POST that sent it, with no span waiting on a missing parent', async () => {
    const agentId = await h.createAgent();
    const itemIds: string[] = [];
    for (const n of [1, 2]) {
      h.llm.enqueue(textTurn(`answer ${n}`));
      const sse = readSse(
        `${api.url}/v1/agents/${agentId}/chat`,
        api.tokens.service,
        {},
        { body: { text: `traced ${n}` } },
      );
      const item = (await sse.next())!;
      itemIds.push(item.data.itemId);
      for (let m = await sse.next(); m && m.event !== 'end'; m = await sse.next());
      sse.close();
    }
    // Each chat run's round is an invoke_agent span of this agent in a chatRunWorkflow.
    const chatRounds = (all: ReceivedSpan[]) =>
      all.filter(
        (s) =>
          s.name === `invoke_agent ${agentId}` &&
          s.attributes['durable_agents.workflow.type']?.value === 'chatRunWorkflow',
      );
    const spans = await eventually(async () => {
      const all = await received();
      return chatRounds(all).length === 2 ? all : undefined;
    }, 'both chat runs at the receiver');
    expect(itemIds).toHaveLength(2);

    const posts = spans.filter(
      (s) => s.name === 'POST /v1/agents/:agentId/chat' && String(s.attributes['url.path']?.value).includes(agentId),
    );
    expect(posts).toHaveLength(2);
    expect(new Set(posts.map((p) => p.traceId)).size).toBe(2);
    for (const post of posts) {
      expect(post.parentSpanId).toBe('');
      const inTrace = spans.filter((s) => s.traceId === post.traceId);
      const names = inTrace.map((s) => s.name);
      // The delivery, the chat run that answers it, its invoke_agent round and its LLM call: all in this trace.
      for (const name of ['HandleUpdate:deliver', 'StartChildWorkflow:chatRunWorkflow', 'RunWorkflow:chatRunWorkflow'])
        expect([post.spanId, name, names.includes(name)]).toEqual([post.spanId, name, true]);
      expect(names).toContain(`invoke_agent ${agentId}`);
      expect(names.some((n) => n.startsWith('chat '))).toBe(true);
      // Exactly one chat run per trace: the other message's work is not here.
      expect(names.filter((n) => n === 'RunWorkflow:chatRunWorkflow')).toHaveLength(1);
      expect(orphans(spans, post.traceId)).toEqual([]);
    }
  });

  test('a task started through /mcp hangs below the HTTP request and its tools/call span', async () => {
    const agentId = await h.createAgent();
    const taskId = agents.task([submitTurn('done')]);
    const client = new McpClient({ name: 'tracing-test', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${api.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${api.tokens.service}` } },
      }),
    );
    try {
      const started = (await client.callTool({
        name: 'start_task',
        arguments: { agentId, title: `Traced over MCP ${taskId}` },
      })) as { isError?: boolean; structuredContent?: { taskId?: string } };
      expect(started.isError).toBeFalsy();
      const startedId = started.structuredContent!.taskId!;
      const spans = await eventually(async () => {
        const all = await received();
        return all.some(
          (s) =>
            s.name === 'StartWorkflow:taskWorkflow' && s.attributes.temporalWorkflowId?.value === `task-${startedId}`,
        )
          ? all
          : undefined;
      }, 'the MCP-started task at the receiver');
      const start = spans.find(
        (s) =>
          s.name === 'StartWorkflow:taskWorkflow' && s.attributes.temporalWorkflowId?.value === `task-${startedId}`,
      )!;
      const byId = new Map(spans.map((s) => [s.spanId, s]));
      const toolSpan = byId.get(start.parentSpanId)!;
      expect(toolSpan?.name).toBe('tools/call start_task');
      expect(toolSpan.attributes['mcp.method.name']?.value).toBe('tools/call');
      expect(toolSpan.attributes['gen_ai.tool.name']?.value).toBe('start_task');
      const http = byId.get(toolSpan.parentSpanId)!;
      expect(http?.name).toBe('POST /mcp');
      expect(http.parentSpanId).toBe('');
      await h.client.cancel(startedId).catch(() => undefined);
    } finally {
      await client.close();
    }
  });
});
