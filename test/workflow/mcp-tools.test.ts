import { mkdtempSync, realpathSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { mcpSessions } from '../../activities/tools/mcp/pool';
import { upsertSkills } from '../../activities/store/skills';
import { submitTurn, toolTurn } from '../support/harness';
import { eventually } from '../support/eventually';
import { lastToolResults, useScriptedHarness } from './task-support';

const NODE = realpathSync(process.execPath);
const NODE_MODULES = path.resolve('node_modules');
const EVERYTHING = path.join(NODE_MODULES, '@modelcontextprotocol/server-everything/dist/index.js');
const FILESYSTEM = path.join(NODE_MODULES, '@modelcontextprotocol/server-filesystem/dist/index.js');
const HOSTILE = path.resolve('test/support/mcp-hostile-server.mjs');
/** The servers' programs and packages: bound read-only into the sandbox they run in. */
const READ_ONLY = [NODE_MODULES, path.dirname(HOSTILE)];

const everything = { command: NODE, args: [EVERYTHING, 'stdio'], sandbox: { readOnlyPaths: READ_ONLY } };

const toolNames = (body: Record<string, unknown>): string[] =>
  ((body.tools ?? []) as Array<{ name: string }>).map((t) => t.name);

/**
 * MCP servers' tools through a real worker and the task workflow, against the official reference
 * server (`@modelcontextprotocol/server-everything`) and a misbehaving server built on the SDK, each
 * running inside the tool sandbox.
 */
describe('MCP tools through the task workflow', () => {
  const { h, agents } = useScriptedHarness({ beforeClose: () => mcpSessions.closeAll() });

  test('a read-only tool runs without approval; its server session is reused by a second task; the snapshot fixes the offered list', async () => {
    const agentId = await h.createAgent({ permissions: { canCallExternalTools: true }, mcpServers: { everything } });
    const first = agents.task([toolTurn('mcp__everything__echo', { message: 'hello over mcp' }), submitTurn('echoed')]);
    await h.client.startTask({ agentId, taskId: first, title: 'Echo', description: 'use the echo tool' });
    const status = await h.waitForStatus(first, (s) => s.state === 'review');
    expect(status.pendingApprovals).toEqual([]);
    const requests = agents.requests(first);
    const offered = toolNames(requests[0]!.body).filter((n) => n.startsWith('mcp__'));
    expect(offered).toContain('mcp__everything__echo');
    expect(offered).toContain('mcp__everything__get-tiny-image');
    const [echo] = lastToolResults(requests[1]!);
    expect(echo).toEqual({ text: 'Echo: hello over mcp', isError: false });

    const second = agents.task([toolTurn('mcp__everything__get-sum', { a: 2, b: 40 }), submitTurn('added')]);
    await h.client.startTask({ agentId, taskId: second, title: 'Add', description: 'add two numbers' });
    await h.waitForStatus(second, (s) => s.state === 'review');
    expect(lastToolResults(agents.requests(second)[1]!)[0]!.text).toMatch(/42/);
    const sessions = mcpSessions.all().filter((s) => s.server === 'everything');
    expect(sessions).toHaveLength(1);
    expect(sessions[0]!.connects).toBe(1);
    // One snapshot per step, in the order offered, holding definitions only.
    const snapshots = await h.db.db
      .selectFrom('mcp_tool_snapshots')
      .selectAll()
      .where('session_id', 'like', `%${first}%`)
      .execute();
    expect(snapshots.length).toBeGreaterThanOrEqual(2);
    const names = (snapshots[0]!.tools as Array<{ name: string }>).map((t) => t.name);
    expect(names).toEqual(offered);
    expect(JSON.stringify(snapshots)).not.toContain(NODE);
  });

  test('an agent without canCallExternalTools is offered no MCP tool, and a call to one does not run', async () => {
    const agentId = await h.createAgent({ mcpServers: { everything } });
    const taskId = agents.task([toolTurn('mcp__everything__echo', { message: 'sneaky' }), submitTurn('refused')]);
    await h.client.startTask({ agentId, taskId, title: 'Echo', description: 'try echo' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    const requests = agents.requests(taskId);
    expect(toolNames(requests[0]!.body).filter((n) => n.startsWith('mcp__'))).toEqual([]);
    expect(lastToolResults(requests[1]!)[0]!.text).toMatch(/^Unknown tool "mcp__everything__echo"/);
  });

  test('a tool not marked read-only waits for approval; an operator override lets a read-only one ask too', async () => {
    const agentId = await h.createAgent({
      permissions: { canCallExternalTools: true },
      mcpServers: { everything: { ...everything, tools: { 'get-sum': { tier: 'approval' } } } },
    });
    const taskId = agents.task([
      toolTurn('mcp__everything__toggle-simulated-logging', {}),
      toolTurn('mcp__everything__get-sum', { a: 1, b: 1 }),
      submitTurn('toggled'),
    ]);
    const { handle } = await h.client.startTask({ agentId, taskId, title: 'Toggle', description: 'toggle logging' });
    const waiting = await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1);
    expect(waiting.pendingApprovals[0]!.tool).toBe('mcp__everything__toggle-simulated-logging');
    expect(waiting.pendingApprovals[0]!.summary).toMatch(/^mcp everything · toggle-simulated-logging/);
    await h.client.decideApproval(taskId, {
      requestId: waiting.pendingApprovals[0]!.requestId,
      decision: 'rejected',
      comment: 'not now',
    });
    const next = await h.waitForStatus(
      taskId,
      (s) => s.pendingApprovals.length === 1 && s.pendingApprovals[0]!.tool === 'mcp__everything__get-sum',
    );
    await h.client.decideApproval(taskId, { requestId: next.pendingApprovals[0]!.requestId, decision: 'approved' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    const requests = agents.requests(taskId);
    expect(lastToolResults(requests[1]!)[0]!.text).toMatch(/rejected/);
    expect(lastToolResults(requests[2]!)[0]!.text).toMatch(/2/);
    expect(handle.workflowId).toContain(taskId);
  });

  test('image content is described in the text too (the image itself: mcp-images.test.ts); structured content comes back once', async () => {
    const agentId = await h.createAgent({ permissions: { canCallExternalTools: true }, mcpServers: { everything } });
    const taskId = agents.task([
      toolTurn('mcp__everything__get-tiny-image', {}),
      toolTurn('mcp__everything__get-structured-content', { location: 'New York' }),
      submitTurn('seen'),
    ]);
    await h.client.startTask({ agentId, taskId, title: 'Image', description: 'get the image' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    const requests = agents.requests(taskId);
    expect(lastToolResults(requests[1]!)[0]!.text).toMatch(/\[image content: image\/png, \d+ bytes, 20×20 px\]/);
    // Structured content arrives once: the server's own text rendering of it, not a second copy.
    const structured = lastToolResults(requests[2]!)[0]!.text;
    expect(structured).toMatch(/"temperature"/);
    expect(structured).not.toContain('Structured content:');
  });

  test('cancelling the task during a long call with progress sends notifications/cancelled and leaves the task cancelled', async () => {
    const agentId = await h.createAgent({ permissions: { canCallExternalTools: true }, mcpServers: { everything } });
    const taskId = agents.task([
      toolTurn('mcp__everything__trigger-long-running-operation', { duration: 60, steps: 60 }),
      submitTurn('never'),
    ]);
    const { handle } = await h.client.startTask({
      agentId,
      taskId,
      title: 'Long',
      description: 'run the long operation',
    });
    await eventually(
      async () => {
        const events = await h.db.db
          .selectFrom('task_events')
          .select('type')
          .where('task_id', '=', taskId)
          .where('type', '=', 'tool-progress')
          .execute();
        return events.length >= 2;
      },
      'two progress events',
      20_000,
    );
    // The most recently used session of that configuration is the one running the call.
    const session = mcpSessions
      .all()
      .filter((s) => s.server === 'everything')
      .at(-1)!;
    expect(session.sent).not.toContain('notifications/cancelled');
    const cancelledAt = Date.now();
    await handle.cancel();
    await eventually(
      () => session.sent.includes('notifications/cancelled'),
      'notifications/cancelled sent to the server',
      10_000,
    );
    await eventually(
      async () => (await h.client.getTaskRow(taskId)).state === 'cancelled',
      'the task cancelled',
      10_000,
    );
    expect(Date.now() - cancelledAt).toBeLessThan(10_000);
  });

  test('bad servers: one that will not start, one that speaks no JSON-RPC, an invalid schema, a hang and a 50 MB result are clear errors', async () => {
    const agentId = await h.createAgent({
      permissions: { canCallExternalTools: true },
      mcpServers: {
        broken: {
          command: NODE,
          args: ['/nonexistent/server.js'],
          sandbox: { readOnlyPaths: READ_ONLY },
          timeoutMs: 5_000,
        },
        garbage: {
          command: NODE,
          args: [HOSTILE, 'malformed'],
          sandbox: { readOnlyPaths: READ_ONLY },
          timeoutMs: 3_000,
        },
        hostile: { command: NODE, args: [HOSTILE], sandbox: { readOnlyPaths: READ_ONLY }, timeoutMs: 3_000 },
        // The same server with time enough to send 50 MB.
        bulk: { command: NODE, args: [HOSTILE], sandbox: { readOnlyPaths: READ_ONLY }, timeoutMs: 120_000 },
      },
    });
    const taskId = agents.task([
      toolTurn('mcp__hostile__hang', {}),
      toolTurn('mcp__bulk__big', {}),
      toolTurn('mcp__bulk__large', {}),
      toolTurn('mcp__hostile__bad-schema', { x: 1 }),
      toolTurn('mcp__hostile__ok', {}),
      submitTurn('survived'),
    ]);
    await h.client.startTask({ agentId, taskId, title: 'Hostile', description: 'use the hostile tools' });
    await h.waitForStatus(taskId, (s) => s.state === 'review', 110_000);
    const requests = agents.requests(taskId);
    const offered = toolNames(requests[0]!.body).filter((n) => n.startsWith('mcp__'));
    const listed = (server: string) => ['grow', 'ok', 'hang', 'big', 'large'].map((t) => `mcp__${server}__${t}`);
    expect(offered).toEqual([...listed('bulk'), ...listed('hostile')]);
    expect(lastToolResults(requests[1]!)[0]!.text).toMatch(/did not answer within 3000 ms and was cancelled/);
    expect(lastToolResults(requests[2]!)[0]!).toEqual({
      text: expect.stringMatching(/reply was larger than 16 MB, the most one message may carry/),
      isError: true,
    });
    // The session dropped by the oversized reply reconnects for the next call, whose 3 MB is offloaded.
    const large = lastToolResults(requests[3]!)[0]!;
    expect(large.isError).toBe(false);
    expect(large.text).toMatch(/\[Output truncated: 2000\d{3} characters in all\. The full output is stored as out_/);
    expect(lastToolResults(requests[4]!)[0]!.text).toMatch(/^Unknown tool "mcp__hostile__bad-schema"/);
    expect(lastToolResults(requests[5]!)[0]!).toEqual({ text: 'ok', isError: false });
    const [snapshot] = await h.db.db
      .selectFrom('mcp_tool_snapshots')
      .select('refused')
      .where('session_id', 'like', `%${taskId}%`)
      .orderBy('created_at')
      .execute();
    const refused = snapshot!.refused as Array<{ server: string; tool?: string; reason: string }>;
    expect(refused.find((r) => r.server === 'broken')?.reason).toMatch(/MCP server "broken" did not start or answer/);
    expect(refused.find((r) => r.server === 'garbage')?.reason).toMatch(/MCP server "garbage" did not start or answer/);
    expect(refused.find((r) => r.tool === 'bad-schema')?.reason).toMatch(/not valid JSON Schema/);
  }, 180_000);

  test('tools/list_changed is picked up: a tool the server adds is offered from the next step, earlier steps keep their snapshot', async () => {
    const agentId = await h.createAgent({
      permissions: { canCallExternalTools: true },
      mcpServers: { growing: { command: NODE, args: [HOSTILE], sandbox: { readOnlyPaths: READ_ONLY } } },
    });
    const taskId = agents.task([
      toolTurn('mcp__growing__grow', {}),
      toolTurn('mcp__growing__grown', {}),
      submitTurn('grew'),
    ]);
    await h.client.startTask({ agentId, taskId, title: 'Grow', description: 'grow the tool list' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    const requests = agents.requests(taskId);
    expect(toolNames(requests[0]!.body)).not.toContain('mcp__growing__grown');
    expect(toolNames(requests[1]!.body)).toContain('mcp__growing__grown');
    expect(lastToolResults(requests[2]!)[0]).toEqual({ text: 'grown ok', isError: false });
    const snapshots = await h.db.db
      .selectFrom('mcp_tool_snapshots')
      .select(['step_key', 'tools'])
      .where('session_id', 'like', `%${taskId}%`)
      .orderBy('created_at')
      .execute();
    expect((snapshots[0]!.tools as Array<{ name: string }>).map((t) => t.name)).not.toContain('mcp__growing__grown');
  });

  test('the filesystem server is confined by the sandbox: it cannot read a canary outside the workspace even though its arguments allow "/", nor write a read-only workspace', async () => {
    const outside = mkdtempSync(path.join(os.tmpdir(), 'da-mcp-canary-'));
    const canary = `CANARY-${Math.random().toString(36).slice(2)}-outside-the-workspace`;
    writeFileSync(path.join(outside, 'secret.txt'), canary);
    writeFileSync(path.join(h.workspaceDir, 'inside.txt'), 'inside the workspace');
    try {
      const files = {
        command: NODE,
        args: [FILESYSTEM, '/'],
        sandbox: { readOnlyPaths: READ_ONLY, workspace: 'ro' },
        tools: { write_file: { tier: 'allow' } },
      };
      const agentId = await h.createAgent({ permissions: { canCallExternalTools: true }, mcpServers: { files } });
      const taskId = agents.task([
        toolTurn('mcp__files__read_text_file', { path: path.join(h.workspaceDir, 'inside.txt') }),
        toolTurn('mcp__files__read_text_file', { path: path.join(outside, 'secret.txt') }),
        toolTurn('mcp__files__list_directory', { path: outside }),
        toolTurn('mcp__files__write_file', {
          path: path.join(h.workspaceDir, 'written.txt'),
          content: 'should not land',
        }),
        submitTurn('confined'),
      ]);
      await h.client.startTask({ agentId, taskId, title: 'Files', description: 'read files' });
      await h.waitForStatus(taskId, (s) => s.state === 'review');
      const requests = agents.requests(taskId);
      expect(lastToolResults(requests[1]!)[0]).toEqual({ text: 'inside the workspace', isError: false });
      for (const i of [2, 3, 4]) {
        const result = lastToolResults(requests[i]!)[0]!;
        expect(result.isError).toBe(true);
        expect(result.text).not.toContain(canary);
      }
      expect(existsSync(path.join(h.workspaceDir, 'written.txt'))).toBe(false);
      expect(JSON.stringify(agents.requests(taskId).map((r) => r.body))).not.toContain(canary);
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });

  test('a skill brings its server: its tools appear after discover_tools activates it, and only for agents bound to the skill', async () => {
    const skill = `mcp-skill-${Math.random().toString(36).slice(2, 8)}`;
    await upsertSkills(
      h.db.db,
      [
        {
          name: skill,
          description: 'Echo things through MCP',
          category: 'tools',
          body: 'Use the echo server.',
          mcpServers: { skilled: everything },
        },
      ],
      'shared',
    );
    const bound = await h.createAgent({ permissions: { canCallExternalTools: true }, skills: [skill] });
    const unbound = await h.createAgent({ permissions: { canCallExternalTools: true } });
    const script = () => [
      toolTurn('discover_tools', { query: skill, activate: [skill] }),
      toolTurn('mcp__skilled__echo', { message: 'from a skill' }),
      submitTurn('done'),
    ];
    const boundTask = agents.task(script());
    const unboundTask = agents.task(script());
    await h.client.startTask({ agentId: bound, taskId: boundTask, title: 'Skill', description: 'activate the skill' });
    await h.client.startTask({
      agentId: unbound,
      taskId: unboundTask,
      title: 'Skill',
      description: 'activate the skill',
    });
    await h.waitForStatus(boundTask, (s) => s.state === 'review');
    await h.waitForStatus(unboundTask, (s) => s.state === 'review');
    const b = agents.requests(boundTask);
    expect(toolNames(b[0]!.body)).not.toContain('mcp__skilled__echo');
    expect(toolNames(b[1]!.body)).toContain('mcp__skilled__echo');
    expect(lastToolResults(b[2]!)[0]).toEqual({ text: 'Echo: from a skill', isError: false });
    const u = agents.requests(unboundTask);
    expect(toolNames(u[1]!.body)).not.toContain('mcp__skilled__echo');
    expect(lastToolResults(u[2]!)[0]!.text).toMatch(/^Unknown tool "mcp__skilled__echo"/);
  });
});
