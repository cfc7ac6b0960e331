import { mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { mcpSessions } from '../../activities/tools/mcp/pool';
import { submitTurn, toolTurn } from '../support/harness';
import { startEverythingHttp, startHostileHttp, type McpHttpServer } from '../support/mcp-http-server';
import { lastToolResults, useScriptedHarness } from './task-support';

const NODE = realpathSync(process.execPath);
const NODE_MODULES = path.resolve('node_modules');
const EVERYTHING = path.join(NODE_MODULES, '@modelcontextprotocol/server-everything/dist/index.js');
const everything = { command: NODE, args: [EVERYTHING, 'stdio'], sandbox: { readOnlyPaths: [NODE_MODULES] } };

const toolNames = (body: Record<string, unknown>): string[] =>
  ((body.tools ?? []) as Array<{ name: string }>).map((t) => t.name);
const mcpToolNames = (body: Record<string, unknown>): string[] =>
  toolNames(body).filter((name) => name.startsWith('mcp__'));

/**
 * MCP servers an agent reaches by URL (Streamable HTTP, the reference server in its own process) and
 * servers an organisation declares for its agents, through a real worker and the task workflow.
 */
describe('MCP over Streamable HTTP, and per-organisation servers', () => {
  let remote: McpHttpServer | undefined;
  const hostile: McpHttpServer[] = [];
  const { h, agents } = useScriptedHarness({
    beforeClose: async () => {
      await mcpSessions.closeAll();
      await remote?.stop();
      for (const server of hostile) await server.stop();
    },
  });

  test('a server configured by URL: its tools are offered and called over HTTP, with progress; one session serves every step', async () => {
    remote = await startEverythingHttp();
    process.env.MCP_HTTP_TEST_TOKEN = `token-${Math.random().toString(36).slice(2)}`;
    const agentId = await h.createAgent({
      permissions: { canCallExternalTools: true },
      mcpServers: { remote: { url: remote.url, headers: { 'X-Test-Token': '${MCP_HTTP_TEST_TOKEN}' } } },
    });
    const taskId = agents.task([
      toolTurn('mcp__remote__echo', { message: 'over http' }),
      toolTurn('mcp__remote__trigger-long-running-operation', { duration: 1, steps: 4 }),
      toolTurn('mcp__remote__get-tiny-image', {}),
      submitTurn('remote done'),
    ]);
    await h.client.startTask({ agentId, taskId, title: 'Remote', description: 'use the remote server' });
    const status = await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);
    // All three tools are marked read-only by the server: none asked a human.
    expect(status.pendingApprovals).toEqual([]);
    const requests = agents.requests(taskId);
    expect(mcpToolNames(requests[0]!.body)).toEqual(
      expect.arrayContaining(['mcp__remote__echo', 'mcp__remote__get-tiny-image']),
    );
    expect(lastToolResults(requests[1]!)[0]).toEqual({ text: 'Echo: over http', isError: false });
    expect(lastToolResults(requests[2]!)[0]!.text).toMatch(/Long running operation completed/i);
    const image = (requests[3]!.body.messages as Array<{ content: unknown }>)
      .flatMap((m) => (Array.isArray(m.content) ? (m.content as Array<{ type: string; content?: unknown }>) : []))
      .filter((b) => b.type === 'tool_result')
      .at(-1)!.content as Array<{ type: string }>;
    expect(image.map((b) => b.type)).toEqual(['text', 'image']);

    const progress = await h.db.db
      .selectFrom('task_events')
      .select('type')
      .where('task_id', '=', taskId)
      .where('type', '=', 'tool-progress')
      .execute();
    expect(progress.length).toBeGreaterThanOrEqual(1);
    const sessions = mcpSessions.all().filter((s) => s.server === 'remote');
    expect(sessions).toHaveLength(1);
    expect(sessions[0]!.connects).toBe(1);
    expect(sessions[0]!.sent.filter((m) => m === 'initialize')).toHaveLength(1);
    expect(remote.received('POST')).toBeGreaterThanOrEqual(4);
    // The stored configuration keeps the reference, never the token.
    const row = await h.db.db.selectFrom('agents').select('config').where('id', '=', agentId).executeTakeFirstOrThrow();
    expect(JSON.stringify(row.config)).toContain('${MCP_HTTP_TEST_TOKEN}');
    expect(JSON.stringify(row.config)).not.toContain(process.env.MCP_HTTP_TEST_TOKEN);
  }, 90_000);

  test('a remote server that restarted (its sessions gone) is reached again: the next call opens a new session and runs once', async () => {
    const port = Number(new URL(remote!.url).port);
    const agentId = await h.createAgent({
      permissions: { canCallExternalTools: true },
      mcpServers: { restarted: { url: remote!.url } },
    });
    const before = agents.task([toolTurn('mcp__restarted__echo', { message: 'first' }), submitTurn('one')]);
    await h.client.startTask({ agentId, taskId: before, title: 'Before', description: 'echo' });
    await h.waitForStatus(before, (s) => s.state === 'review');
    const session = mcpSessions.all().find((s) => s.server === 'restarted')!;
    expect(session.connects).toBe(1);

    await remote!.stop();
    remote = await startEverythingHttp(port);
    const after = agents.task([toolTurn('mcp__restarted__echo', { message: 'second' }), submitTurn('two')]);
    await h.client.startTask({ agentId, taskId: after, title: 'After', description: 'echo' });
    await h.waitForStatus(after, (s) => s.state === 'review');
    expect(lastToolResults(agents.requests(after)[1]!)[0]).toEqual({ text: 'Echo: second', isError: false });
    expect(session.connects).toBe(2);
  }, 90_000);

  test('a reply over 16 MB, as one JSON body or as an SSE stream, is refused with a clear error; the next call reconnects', async () => {
    const [sse, json] = [await startHostileHttp('sse'), await startHostileHttp('json')];
    hostile.push(sse, json);
    const agentId = await h.createAgent({
      permissions: { canCallExternalTools: true },
      mcpServers: { sse: { url: sse.url }, json: { url: json.url } },
    });
    const taskId = agents.task([
      toolTurn('mcp__sse__big', {}),
      toolTurn('mcp__sse__ok', {}),
      toolTurn('mcp__json__big', {}),
      toolTurn('mcp__json__ok', {}),
      submitTurn('bounded'),
    ]);
    await h.client.startTask({ agentId, taskId, title: 'Big', description: 'call the big tools' });
    await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);
    const requests = agents.requests(taskId);
    for (const index of [1, 3])
      expect(lastToolResults(requests[index]!)[0]).toEqual({
        text: expect.stringMatching(/reply was larger than 16 MB, the most one message may carry/),
        isError: true,
      });
    for (const index of [2, 4]) expect(lastToolResults(requests[index]!)[0]).toEqual({ text: 'ok', isError: false });
  }, 90_000);

  test("an organisation's server reaches its agents and no other organisation's; an agent's own declaration of the name wins", async () => {
    const suffix = Math.random().toString(36).slice(2, 8);
    const withServer = mkdtempSync(path.join(os.tmpdir(), 'da-org-mcp-'));
    const without = mkdtempSync(path.join(os.tmpdir(), 'da-org-plain-'));
    try {
      writeFileSync(path.join(withServer, 'CONTEXT.md'), 'An organisation whose agents share an MCP server.');
      writeFileSync(path.join(withServer, 'mcp.json'), JSON.stringify({ mcpServers: { shared: everything } }));
      writeFileSync(path.join(without, 'CONTEXT.md'), 'An organisation without MCP servers.');
      const orgA = `mcp-a-${suffix}`;
      const orgB = `mcp-b-${suffix}`;
      await h.client.upsertOrganisationFromFolder(withServer, { name: orgA });
      await h.client.upsertOrganisationFromFolder(without, { name: orgB });

      const permissions = { canCallExternalTools: true };
      const inA = await h.createAgent({ org: orgA, permissions });
      const inB = await h.createAgent({ org: orgB, permissions });
      const overriding = await h.createAgent({
        org: orgA,
        permissions,
        mcpServers: { shared: { ...everything, tools: { echo: { tier: 'approval' } } } },
      });
      const script = () => [toolTurn('mcp__shared__echo', { message: 'org tools' }), submitTurn('done')];
      const taskA = agents.task(script());
      const taskB = agents.task(script());
      const taskOverride = agents.task(script());
      await h.client.startTask({ agentId: inA, taskId: taskA, title: 'Org A', description: 'echo' });
      await h.client.startTask({ agentId: inB, taskId: taskB, title: 'Org B', description: 'echo' });
      await h.client.startTask({ agentId: overriding, taskId: taskOverride, title: 'Own', description: 'echo' });

      await h.waitForStatus(taskA, (s) => s.state === 'review');
      const a = agents.requests(taskA);
      expect(mcpToolNames(a[0]!.body)).toContain('mcp__shared__echo');
      expect(lastToolResults(a[1]!)[0]).toEqual({ text: 'Echo: org tools', isError: false });

      await h.waitForStatus(taskB, (s) => s.state === 'review');
      const b = agents.requests(taskB);
      expect(mcpToolNames(b[0]!.body)).toEqual([]);
      expect(lastToolResults(b[1]!)[0]!.text).toMatch(/^Unknown tool "mcp__shared__echo"/);

      // The agent's own "shared" replaces the organisation's: its override makes echo ask a human.
      const waiting = await h.waitForStatus(taskOverride, (s) => s.pendingApprovals.length === 1);
      expect(waiting.pendingApprovals[0]!.tool).toBe('mcp__shared__echo');
      await h.client.decideApproval(taskOverride, {
        requestId: waiting.pendingApprovals[0]!.requestId,
        decision: 'approved',
      });
      await h.waitForStatus(taskOverride, (s) => s.state === 'review');
      expect(lastToolResults(agents.requests(taskOverride)[1]!)[0]).toEqual({
        text: 'Echo: org tools',
        isError: false,
      });
    } finally {
      rmSync(withServer, { recursive: true, force: true });
      rmSync(without, { recursive: true, force: true });
    }
  }, 90_000);
});
