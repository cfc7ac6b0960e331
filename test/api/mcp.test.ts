import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { agentWorkflowId } from '../../workflows/agent-contract';
import type { RecordedRequest } from '../fake-llm';
import { eventually } from '../support/eventually';
import { createHarness, submitTurn, textTurn, toolTurn, type Harness } from '../support/harness';
import { startTestApi, type TestApi } from './api-support';

const run = promisify(execFile);
/** The official MCP Inspector's launcher (its `--cli` mode is a non-interactive MCP client). */
const INSPECTOR = path.join(
  path.dirname(require.resolve('@modelcontextprotocol/inspector/package.json')),
  'clients/launcher/build/index.js',
);
const CHAT_QUESTION = 'ping from an MCP client: are you there?';
const CHAT_ANSWER = 'Yes, I am here and listening over MCP.';

/**
 * The runtime as an MCP server, driven by the official SDK's Client over Streamable HTTP against the
 * real API, worker, Temporal and PostgreSQL: a task is started, followed to its approval, approved,
 * followed to review and accepted; an agent answers a chat; no token is 401; a read token can look
 * but every tool that changes something is refused with the reason.
 */
describe('/mcp: the runtime as an MCP server', () => {
  let h: Harness;
  let api: TestApi;
  const clients: Client[] = [];

  beforeAll(async () => {
    h = await createHarness();
    // The model: a task asks a question that needs a person, then submits; the chat gets its answer.
    h.llm.setResponder((request: RecordedRequest) => {
      const text = JSON.stringify(request.body);
      if (text.includes('[POST-TASK REFLECTION')) return textTurn('Nothing new worth saving.');
      if (text.includes(CHAT_QUESTION)) return textTurn(CHAT_ANSWER);
      if (!Array.isArray(request.body.tools) || request.body.tools.length === 0)
        return textTurn('Summary: the agent worked with tools.');
      const turns = ((request.body.messages ?? []) as Array<{ role: string }>).filter(
        (m) => m.role === 'assistant',
      ).length;
      return turns === 0
        ? toolTurn('request_user_approval', { question: 'May I publish the report?' })
        : submitTurn('report published');
    });
    await h.startWorker();
    api = await startTestApi(h);
  });
  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    const agents = await h.db.db.selectFrom('mailbox_items').select('agent_id').distinct().execute();
    for (const { agent_id } of agents)
      await h.temporal.workflow
        .getHandle(agentWorkflowId(agent_id))
        .terminate('test finished')
        .catch(() => undefined);
    await api.close();
    await h.close();
  });

  async function connect(token: string): Promise<Client> {
    const client = new Client({ name: 'durable-agents-test', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${api.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    clients.push(client);
    return client;
  }
  const call = async (client: Client, name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: args })) as CallToolResult;
  const value = (result: CallToolResult): any => {
    if (result.isError) throw new Error(`tool failed: ${JSON.stringify(result.content)}`);
    return result.structuredContent;
  };

  test('start a task, follow it to its approval, approve it, follow it to review, accept it', async () => {
    const agentId = await h.createAgent();
    const operator = await connect(api.tokens.operator);
    const tools = (await operator.listTools()).tools;
    expect(tools.map((t) => t.name).sort()).toEqual([
      'cancel_task',
      'chat',
      'decide_approval',
      'fork_report',
      'fork_task',
      'list_approvals',
      'review_task',
      'start_task',
      'task_status',
    ]);
    expect(tools.find((t) => t.name === 'task_status')!.annotations).toMatchObject({ readOnlyHint: true });
    expect(tools.find((t) => t.name === 'decide_approval')!.description).toContain(
      'Needs a token with scope operator.',
    );

    const { taskId } = value(await call(operator, 'start_task', { agentId, title: 'Publish the report' }));
    expect(taskId).toEqual(expect.any(String));
    // Following to review: task_status answers as soon as an approval becomes pending (nobody would
    // reach review before someone decides it), not at the end of waitSeconds.
    const asked = Date.now();
    const waiting = value(
      await call(operator, 'task_status', { taskId, waitSeconds: 25, untilStates: ['review', 'completed'] }),
    );
    expect(waiting.waited).toBeUndefined();
    expect(waiting.state).toBe('in_progress');
    expect(waiting.pendingApprovals).toHaveLength(1);
    expect(Date.now() - asked).toBeLessThan(20_000);
    expect(waiting.pendingApprovals[0]).toMatchObject({
      tool: 'request_user_approval',
      summary: expect.stringContaining('May I publish the report?'),
    });
    const { approvals } = value(await call(operator, 'list_approvals', { taskId }));
    expect(approvals.map((a: { requestId: string }) => a.requestId)).toEqual([waiting.pendingApprovals[0].requestId]);

    const recorded = value(
      await call(operator, 'decide_approval', {
        requestId: approvals[0].requestId,
        decision: 'approved',
        comment: 'go ahead',
      }),
    );
    expect(recorded).toMatchObject({
      decision: 'approved',
      comment: 'go ahead',
      decidedBy: api.tokenNames.operator,
      tool: 'request_user_approval',
    });
    const again = await call(operator, 'decide_approval', { requestId: approvals[0].requestId, decision: 'rejected' });
    expect(again.isError).toBe(true);
    // Refused whichever check sees it first: the stored row (approval_decided) or the workflow's validator.
    expect(JSON.stringify(again.content)).toMatch(
      /approval_decided: approval request .* is already approved|update_rejected: approval request .* was already decided/,
    );

    const inReview = await eventually(async () => {
      const status = value(await call(operator, 'task_status', { taskId, waitSeconds: 10, untilStates: ['review'] }));
      return status.state === 'review' ? status : undefined;
    }, 'the task to reach review');
    expect(inReview.pendingApprovals).toEqual([]);
    const badRevision = await call(operator, 'review_task', { taskId, decision: 'revise' });
    expect(badRevision.isError).toBe(true);
    expect(JSON.stringify(badRevision.content)).toContain('a revision needs feedback');
    expect(value(await call(operator, 'review_task', { taskId, decision: 'accept' }))).toEqual({
      ok: true,
      taskId,
      decision: 'accept',
    });
    const done = value(await call(operator, 'task_status', { taskId, waitSeconds: 10, untilStates: ['completed'] }));
    expect(done.state).toBe('completed');
    // The row follows the workflow's state a moment later (an activity writes it).
    const row = await eventually(async () => {
      const r = await h.db.db
        .selectFrom('tasks')
        .select(['state', 'created_by'])
        .where('id', '=', taskId)
        .executeTakeFirstOrThrow();
      return r.state === 'completed' ? r : undefined;
    }, 'the task row to say completed');
    expect(row.created_by).toBe(api.tokenNames.operator);

    // The finished task is a recorded run: fork_task starts a new task from it (here from the task prompt).
    const fork = value(await call(operator, 'fork_task', { sourceTaskId: taskId, at: 0 }));
    expect(fork).toMatchObject({ sourceTaskId: taskId, atStep: 0, taskId: expect.stringContaining(taskId) });
    expect(value(await call(operator, 'task_status', { taskId: fork.taskId })).state).toEqual(expect.any(String));
    expect(value(await call(operator, 'fork_report', { taskId: fork.taskId }))).toMatchObject({ sourceTaskId: taskId });
    const unknown = await call(operator, 'fork_task', { sourceTaskId: 'no-such-task', at: 0 });
    expect(unknown.isError).toBe(true);
    expect((unknown.content[0] as { text: string }).text).toMatch(/^task_not_found: /);
  });

  test('the MCP Inspector (CLI mode) drives a task too: start, follow to the approval, approve, follow to review, accept', async () => {
    const agentId = await h.createAgent();
    // Its catalog file goes to a folder of this test, not the home directory.
    const home = mkdtempSync(path.join(os.tmpdir(), 'da-inspector-'));
    const inspector = async (
      token: string,
      tool: string,
      args: Record<string, unknown>,
    ): Promise<{ structuredContent?: any; isError?: boolean; content: Array<{ text: string }> }> => {
      const argv = [
        INSPECTOR,
        '--cli',
        `${api.url}/mcp`,
        '--transport',
        'http',
        '--header',
        `Authorization: Bearer ${token}`,
        '--method',
        'tools/call',
        '--tool-name',
        tool,
        '--tool-args-json',
        JSON.stringify(args),
      ];
      const env = { ...process.env, HOME: home, MCP_CATALOG_PATH: path.join(home, 'mcp.json') };
      // A tool error exits non-zero, after printing the result: the result is read either way.
      const { stdout } = await run(process.execPath, argv, { env, timeout: 60_000 }).catch(
        (error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }),
      );
      return JSON.parse(stdout.slice(0, stdout.lastIndexOf('\n}') + 2));
    };
    try {
      const refused = await inspector(api.tokens.read, 'start_task', { agentId, title: 'Not with a read token' });
      expect(refused.isError).toBe(true);
      expect(refused.content[0]!.text).toMatch(/^forbidden: start_task needs a token with scope "service"/);
      const { taskId } = (await inspector(api.tokens.service, 'start_task', { agentId, title: 'Publish the report' }))
        .structuredContent;
      const waiting = await eventually(async () => {
        const status = (await inspector(api.tokens.read, 'task_status', { taskId, waitSeconds: 5 })).structuredContent;
        return status.pendingApprovals.length > 0 ? status : undefined;
      }, 'the task to wait on an approval');
      const decided = await inspector(api.tokens.operator, 'decide_approval', {
        requestId: waiting.pendingApprovals[0].requestId,
        decision: 'approved',
      });
      expect(decided.structuredContent).toMatchObject({ decision: 'approved', decidedBy: api.tokenNames.operator });
      const review = await eventually(async () => {
        const status = (
          await inspector(api.tokens.read, 'task_status', { taskId, waitSeconds: 10, untilStates: ['review'] })
        ).structuredContent;
        return status.state === 'review' ? status : undefined;
      }, 'the task to reach review');
      expect(review.pendingApprovals).toEqual([]);
      expect(
        (await inspector(api.tokens.operator, 'review_task', { taskId, decision: 'accept' })).structuredContent,
      ).toEqual({ ok: true, taskId, decision: 'accept' });
      expect(
        (await inspector(api.tokens.read, 'task_status', { taskId, waitSeconds: 10, untilStates: ['completed'] }))
          .structuredContent.state,
      ).toBe('completed');
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  test('chat with an agent: the answer comes back whole', async () => {
    const agentId = await h.createAgent();
    const service = await connect(api.tokens.service);
    const answer = value(await call(service, 'chat', { agentId, text: CHAT_QUESTION }));
    expect(answer).toEqual({ agentId, answer: CHAT_ANSWER, complete: true, stoppedBy: 'answer' });
    const unknown = await call(service, 'chat', { agentId: 'no-such-agent', text: 'hello' });
    expect(unknown.isError).toBe(true);
    expect(JSON.stringify(unknown.content)).toContain('agent_not_found');
  });

  test('no token: 401 with WWW-Authenticate, and the SDK client cannot connect', async () => {
    const response = await fetch(`${api.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
      }),
    });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toMatch(/^Bearer /);
    expect(await response.json()).toMatchObject({ error: { code: 'unauthorized' } });
    // With a token, the methods a stateless endpoint does not have are 405 with the reason.
    const get = await fetch(`${api.url}/mcp`, {
      headers: { authorization: `Bearer ${api.tokens.read}`, accept: 'text/event-stream' },
    });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    expect(((await get.json()) as { error: { message: string } }).error.message).toContain('stateless');
    const client = new Client({ name: 'no-token', version: '1' });
    await expect(client.connect(new StreamableHTTPClientTransport(new URL(`${api.url}/mcp`)))).rejects.toThrow(
      /401|nauthorized/,
    );
    await expect(connect('da_000000000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')).rejects.toThrow(
      /401|nauthorized/,
    );
  });

  test('a read token reads, and every tool that changes something is refused with the scope it needs', async () => {
    const agentId = await h.createAgent();
    const reader = await connect(api.tokens.read);
    const before = await h.db.db.selectFrom('tasks').select('id').where('agent_id', '=', agentId).execute();
    const refusedStart = await call(reader, 'start_task', { agentId, title: 'Should not start' });
    expect(refusedStart.isError).toBe(true);
    expect((refusedStart.content[0] as { text: string }).text).toBe(
      `forbidden: start_task needs a token with scope "service"; "${api.tokenNames.read}" has scope "read"`,
    );
    for (const [name, args] of [
      ['decide_approval', { requestId: 'x:y', decision: 'approved' }],
      ['review_task', { taskId: 'some-task', decision: 'accept' }],
      ['cancel_task', { taskId: 'some-task' }],
      ['fork_task', { sourceTaskId: 'some-task', at: 0 }],
      ['chat', { agentId, text: 'hello' }],
    ] as const) {
      const result = await call(reader, name, args);
      expect([name, result.isError, (result.content[0] as { text: string }).text.split(':')[0]]).toEqual([
        name,
        true,
        'forbidden',
      ]);
    }
    expect(await h.db.db.selectFrom('tasks').select('id').where('agent_id', '=', agentId).execute()).toEqual(before);
    // Forking takes the operator scope here as over REST: one rule for both doors.
    const service = await connect(api.tokens.service);
    const serviceFork = await call(service, 'fork_task', { sourceTaskId: 'some-task', at: 0 });
    expect((serviceFork.content[0] as { text: string }).text).toBe(
      `forbidden: fork_task needs a token with scope "operator"; "${api.tokenNames.service}" has scope "service"`,
    );
    const restFork = await api.call('POST', '/v1/tasks/some-task/fork', { token: api.tokens.service, body: { at: 0 } });
    expect([restFork.status, restFork.body.error.code]).toEqual([403, 'forbidden']);
    expect(value(await call(reader, 'list_approvals', {}))).toEqual({ approvals: expect.any(Array) });
    const missing = await call(reader, 'task_status', { taskId: 'no-such-task' });
    expect(missing.isError).toBe(true);
    expect((missing.content[0] as { text: string }).text).toMatch(/^task_not_found: /);
    // Bad arguments are refused by the tool's schema, naming the field.
    const bad = await call(reader, 'task_status', { taskId: 'x', waitSeconds: 999 });
    expect(bad.isError).toBe(true);
    expect(JSON.stringify(bad.content)).toContain('waitSeconds');
  });
});
