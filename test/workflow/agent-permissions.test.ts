import { existsSync } from 'node:fs';
import path from 'node:path';
import { AgentConfigSchema } from '../../activities/store/agents';
import { grantedPermissions, TOOL_PERMISSIONS, toolsForAgent, toolsForScenario } from '../../activities/tools/registry';
import { submitTurn, toolTurn } from '../support/harness';
import { unofferedToolNames, parameterNames } from '../support/tool-mentions';
import { bodyText, lastToolResults, useScriptedHarness } from './task-support';

/**
 * The permission flags, enforced where tools are chosen and where they run: an agent without the
 * `shell` and `manageTasks` permissions is not sent `shell_execute` or `task_create` (tool definitions,
 * system prompt, user prompts), and a forged call to `shell_execute` is refused by the ledger without
 * running. Real Temporal, real PostgreSQL, the fake provider.
 */
describe('agent permissions', () => {
  const { h, agents } = useScriptedHarness();

  const toolNames = (body: Record<string, unknown>): string[] =>
    ((body.tools ?? []) as Array<{ name: string }>).map((t) => t.name).sort();

  test('withheld tools are not offered, not named in the prompt, and a forged call is refused at dispatch', async () => {
    const restricted = await h.createAgent({ permissions: { shell: false, manageTasks: false } });
    const forged = path.join(h.workspaceDir, 'forged.txt');
    const taskId = agents.task([toolTurn('shell_execute', { command: ['touch', 'forged.txt'] }), submitTurn('tried')]);
    await h.client.startTask({ agentId: restricted, taskId, title: 'Restricted', description: 'Try the shell.' });
    await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);

    const [first, second] = agents.requests(taskId);
    const offered = toolNames(first!.body);
    expect(offered).not.toContain('shell_execute');
    expect(offered).not.toContain('task_create');
    expect(offered).toEqual(expect.arrayContaining(['file_read', 'file_write', 'task_list', 'task_submit_review']));
    expect(offered).toEqual(
      [...toolsForAgent('task', { permissions: { shell: false, manageTasks: false } }).keys()].sort(),
    );
    // No prompt text (system, task prompt, tool descriptions) names a tool the agent was not given.
    const tools = toolsForAgent('task', { permissions: { shell: false, manageTasks: false } });
    const texts = [
      ...(first!.body.system as Array<{ text: string }>).map((s) => s.text),
      ...((first!.body.messages ?? []) as Array<{ content: Array<{ type: string; text?: string }> | string }>).flatMap(
        (m) =>
          typeof m.content === 'string'
            ? [m.content]
            : m.content.flatMap((b) => (b.type === 'text' && b.text ? [b.text] : [])),
      ),
      ...(first!.body.tools as Array<{ description: string }>).map((t) => t.description),
    ];
    expect(texts.join('\n')).toContain('## Current Scenario');
    expect(texts.flatMap((t) => unofferedToolNames(t, new Set(tools.keys()), parameterNames(tools.values())))).toEqual(
      [],
    );
    expect(bodyText(first!)).toContain('- shell: no');

    // The forged call: an error result, recorded in the ledger, and nothing ran.
    expect(lastToolResults(second!)).toEqual([
      { text: 'Unknown tool "shell_execute". Use only the tools you were given.', isError: true },
    ]);
    const ledger = await h.db.db
      .selectFrom('tool_calls')
      .select(['tool', 'is_error'])
      .where('session_id', '=', `task_${taskId}_r1`)
      .where('tool', '=', 'shell_execute')
      .execute();
    expect(ledger).toEqual([{ tool: 'shell_execute', is_error: true }]);
    expect(existsSync(forged)).toBe(false);
  }, 90_000);

  test('an agent with the default permissions is offered the whole scenario set but the external tools; granting canCallExternalTools adds them', async () => {
    const offeredTo = async (config: Record<string, unknown>) => {
      const agentId = await h.createAgent(config);
      const taskId = agents.task([submitTurn('ok')]);
      await h.client.startTask({ agentId, taskId, title: 'Open', description: 'Nothing to do.' });
      await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);
      return agents.requests(taskId)[0]!;
    };
    const scenario = [...toolsForScenario('task').keys()].sort();
    const external = scenario.filter((name) => TOOL_PERMISSIONS[name] === 'canCallExternalTools');
    expect(external).toContain('web_fetch');
    const request = await offeredTo({});
    expect(toolNames(request.body)).toEqual(scenario.filter((name) => !external.includes(name)));
    expect(toolNames((await offeredTo({ permissions: { canCallExternalTools: true } })).body)).toEqual(scenario);
    // The same prompt names the tools the restricted agent was denied: the check above can fail.
    const system = (request.body.system as Array<{ text: string }>).map((s) => s.text).join('\n');
    expect(system).toMatch(/task_create/);
    expect(grantedPermissions({})).toEqual({
      shell: true,
      writeFiles: true,
      manageTasks: true,
      contactHumans: true,
      messageAgents: true,
      manageGoals: true,
      canCallExternalTools: false,
    });
  }, 90_000);

  test('messageAgents gates the A2A tools in every conversation scenario', () => {
    const a2aTools = [
      'agent_send_message',
      'agent_send_group_message',
      'agent_list_group_chats',
      'agent_create_group_chat',
      'agent_list_colleagues',
    ];
    for (const scenario of ['chat', 'a2a', 'comment_response', 'group_chat'] as const) {
      expect([...toolsForAgent(scenario, {}).keys()]).toEqual(expect.arrayContaining(a2aTools));
      const withheld = [...toolsForAgent(scenario, { permissions: { messageAgents: false } }).keys()];
      expect(withheld.filter((name) => a2aTools.includes(name))).toEqual([]);
      expect(withheld).toContain('memory_search');
    }
  });

  test('an unknown permission flag is refused by the config schema', () => {
    const parsed = AgentConfigSchema.safeParse({ permissions: { shel: false } });
    expect(parsed.success).toBe(false);
  });
});
