import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AgentsClient, InvalidAgentError } from '../../client';
import { submitTurn, toolTurn, useHarness } from '../support/harness';
import { lastToolResults, ScriptedAgents } from './task-support';

/** Library calls validate their input, and an agent's workspace folder exists once the agent does. */
describe('agent definitions are validated and get a workspace', () => {
  const h = useHarness();
  let scratch: string;
  beforeAll(async () => {
    scratch = mkdtempSync(path.join(os.tmpdir(), 'da-agent-input-'));
    writeFileSync(path.join(scratch, 'SOUL.md'), 'You are tidy.');
  });
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));
  const agentRow = (id: string) => h.db.db.selectFrom('agents').selectAll().where('id', '=', id).executeTakeFirst();

  test('upsertAgentFromFolder without a workspace: a clear error when no root is configured, else <root>/<org>/<id>, created', async () => {
    const noRoot = new AgentsClient(h.temporal, h.db.db, { taskQueue: h.taskQueue, workspaceRoot: '' });
    await expect(noRoot.upsertAgentFromFolder(scratch, { id: 'no-root-agent' })).rejects.toThrow(
      'invalid agent "no-root-agent": workspaceDir: missing, and AGENTS_WORKSPACE_ROOT is not set; pass workspaceDir or set AGENTS_WORKSPACE_ROOT',
    );
    expect(await agentRow('no-root-agent')).toBeUndefined();

    const root = path.join(scratch, 'workspaces');
    const withRoot = new AgentsClient(h.temporal, h.db.db, { taskQueue: h.taskQueue, workspaceRoot: root });
    const created = await withRoot.upsertAgentFromFolder(scratch, { id: 'rooted-agent' });
    expect(created.workspaceDir).toBe(path.join(root, 'default', 'rooted-agent'));
    expect(existsSync(created.workspaceDir)).toBe(true);
    expect((await agentRow('rooted-agent'))?.workspace_dir).toBe(created.workspaceDir);
  });

  test('a bad definition is refused before anything is written, naming every problem (agent config included)', async () => {
    const bad = h.client.upsertAgent({
      id: 'Bad Id',
      name: '',
      files: { soul: 's', agents: 'a', heartbeat: '', tools: '' },
      config: { budgetUsd: 'lots', tier: 'gold', timezone: 'Mars/Olympus', surprise: true } as never,
      workspaceDir: path.join(scratch, 'bad'),
    });
    await expect(bad).rejects.toThrow(InvalidAgentError);
    const message = await bad.catch((e: Error) => e.message);
    for (const part of [
      'id: use 1-63 lowercase',
      'name:',
      'config.budgetUsd:',
      'config.tier:',
      'config.timezone: not an IANA timezone',
      'surprise',
    ]) {
      expect(message).toContain(part);
    }
    expect(existsSync(path.join(scratch, 'bad'))).toBe(false);
    writeFileSync(path.join(scratch, 'agent.json'), '{ "name": "x", ');
    await expect(
      h.client.upsertAgentFromFolder(scratch, { id: 'json-agent', workspaceDir: path.join(scratch, 'j') }),
    ).rejects.toThrow(/agent\.json is not valid JSON/);
    rmSync(path.join(scratch, 'agent.json'));
  });

  test('a workspace folder removed after the agent was defined is recreated before tools run (no `spawn … ENOENT`)', async () => {
    await h.startWorker();
    const agents = new ScriptedAgents(h.llm);
    const workspaceDir = path.join(scratch, 'vanishing');
    await h.client.upsertAgent({
      id: 'vanishing-agent',
      name: 'Vanishing',
      files: { soul: 's', agents: 'a', heartbeat: '', tools: '' },
      workspaceDir,
    });
    rmSync(workspaceDir, { recursive: true });
    const taskId = agents.task([toolTurn('shell_execute', { command: 'ls' }), submitTurn('listed')]);
    await h.client.startTask({ agentId: 'vanishing-agent', taskId, title: 'List', description: 'ls the workspace' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    const [result] = lastToolResults(agents.requests(taskId)[1]!);
    expect(result!.text).not.toMatch(/ENOENT/);
    expect(result!.isError).toBe(false);
    expect(existsSync(workspaceDir)).toBe(true);
  });
});
