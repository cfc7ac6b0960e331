import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildSystemPrompt, systemPromptText } from '../../activities/context';
import { loadPromptInputs } from '../../activities/step/prompt';
import { findAgent } from '../../activities/store/agents';
import { loadActivations } from '../../activities/store/skills';
import { discoverableTools, toolsForAgent, toolsForScenario } from '../../activities/tools/registry';
import { useHarness, submitTurn, toolTurn } from '../support/harness';
import { parameterNames, unofferedToolNames } from '../support/tool-mentions';
import { lastToolResults, ScriptedAgents } from './task-support';
import type { RecordedRequest } from '../fake-llm';

/**
 * Skills, tool discovery and the prompt's world from real data (issue 12): an organisation folder
 * (CONTEXT.md, ANNOUNCEMENTS.md, users/*.md, shared skills) and agent folders with their own skills are
 * loaded into PostgreSQL; a real task run's requests (as the fake provider received them) show the
 * organisation, colleagues, people, trust, capabilities, bound skills, the relevance-filtered skills
 * catalogue, system announcements, team status and the mailbox attention state; discover_tools finds
 * and activates a skill (full body from the next step) and a withheld tool (offered from the next step,
 * and across the task's sessions). Real Temporal, real PostgreSQL, the fake provider.
 */
describe('skills and the prompt world', () => {
  const h = useHarness();
  let agents: ScriptedAgents;
  let root: string;
  const system = (r: RecordedRequest): string =>
    (r.body.system as Array<{ text: string }>).map((s) => s.text).join('\n\n');
  const tier = (r: RecordedRequest, i: number): string => (r.body.system as Array<{ text: string }>)[i]!.text;
  const toolNames = (r: RecordedRequest): string[] =>
    ((r.body.tools ?? []) as Array<{ name: string }>).map((t) => t.name).sort();

  function write(file: string, text: string): void {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, text);
  }
  const skill = (name: string, category: string, description: string, body: string) =>
    `---\nname: ${name}\ndescription: ${description}\ncategory: ${category}\n---\n${body}\n`;

  beforeAll(async () => {
    agents = new ScriptedAgents(h.llm);
    await h.startWorker();
    root = mkdtempSync(path.join(os.tmpdir(), 'da-skills-'));
  });

  test('a real run shows the organisation, colleagues, skills, announcements and attention; discover_tools activates a skill and a tool', async () => {
    const suffix = path
      .basename(root)
      .replace(/[^a-z0-9]/gi, '')
      .toLowerCase();
    const orgName = `acme${suffix}`;
    const [csv, deploy, pdf, style] = ['csv-import', 'deploy-k8s', 'pdf-report', 'house-style'] as const;
    const orgDir = path.join(root, orgName);
    write(path.join(orgDir, 'CONTEXT.md'), 'Acme builds data pipelines for hospitals.');
    write(path.join(orgDir, 'ANNOUNCEMENTS.md'), 'Code freeze every Friday after 15:00.');
    write(path.join(orgDir, 'users', 'hana.md'), '# Hana Ito\nHead of data. Prefers short answers with numbers.');
    write(
      path.join(orgDir, 'skills', 'csv-import', 'SKILL.md'),
      skill(
        csv,
        'data',
        'Import CSV files into the warehouse safely',
        'Step 1: validate the header row. Step 2: load into staging.',
      ),
    );
    write(
      path.join(orgDir, 'skills', 'deploy-k8s', 'SKILL.md'),
      skill(
        deploy,
        'ops',
        'Deploy services to kubernetes clusters',
        `Always run kubectl diff before apply. ROLLOUT-MARKER ${'Check the rollout status. '.repeat(20)}`,
      ),
    );
    write(
      path.join(orgDir, 'skills', 'pdf-report', 'SKILL.md'),
      skill(pdf, 'docs', 'Write PDF reports for management', 'Use the corporate template.'),
    );
    expect(await h.client.upsertOrganisationFromFolder(orgDir)).toEqual({ name: orgName, users: 1, skills: 3 });
    // A name is unique per owner: another organisation may have its own csv-import, unseen by this one.
    const rival = path.join(root, `rival${suffix}`);
    write(path.join(rival, 'skills', 'csv', 'SKILL.md'), skill(csv, 'data', 'RIVAL-CSV skill', 'x'));
    expect((await h.client.upsertOrganisationFromFolder(rival)).skills).toBe(1);
    // A manager colleague with a task in progress, and the agent itself (its own skill in its folder).
    const managerId = `mgr-${suffix}`.slice(0, 60);
    await h.client.upsertAgent({
      id: managerId,
      name: 'Mia Manager',
      description: 'Engineering manager',
      files: { soul: 'Lead.', agents: 'Manage.', heartbeat: '', tools: '' },
      config: { org: orgName, position: 'manager' },
      workspaceDir: h.workspaceDir,
    });
    await h.db.db
      .insertInto('tasks')
      .values({
        id: `t-${managerId}`,
        agent_id: managerId,
        title: 'Plan the Q3 roadmap',
        description: 'plan',
        state: 'in_progress',
      })
      .execute();
    const agentDir = path.join(root, 'ada');
    write(path.join(agentDir, 'SOUL.md'), 'You are Ada.');
    write(path.join(agentDir, 'AGENTS.md'), 'You import data.');
    write(
      path.join(agentDir, 'agent.json'),
      JSON.stringify({
        name: 'Ada',
        description: 'Data engineer',
        config: {
          org: orgName,
          skills: [csv],
          capabilities: 'SQL, Python, CSV wrangling',
          trust: { level: 'standard', description: 'Ask before deleting data.' },
        },
      }),
    );
    write(
      path.join(agentDir, 'skills', 'house-style', 'SKILL.md'),
      skill(style, 'writing', 'How Ada writes commit messages', 'Imperative mood, 50 characters.'),
    );
    // The agent's own pdf-report shadows the organisation's.
    write(
      path.join(agentDir, 'skills', 'pdf', 'SKILL.md'),
      skill(pdf, 'docs', 'ADA-PDF reports her way', 'Her template.'),
    );
    const agentId = `skills-ada-${suffix}`.slice(0, 60);
    await h.client.upsertAgentFromFolder(agentDir, { id: agentId, workspaceDir: h.workspaceDir });

    await h.client.announce('Maintenance window tonight 22:00 UTC.', { org: orgName });
    await h.client.announce('Expired notice.', { org: orgName, expiresAt: new Date(Date.now() - 1_000) });
    await h.db.db
      .insertInto('mailbox_items')
      .values([
        {
          id: `mb1-${suffix}`,
          agent_id: agentId,
          kind: 'chat',
          from_type: 'human',
          from_id: 'hana',
          channel: 'dm:hana',
          text: 'Can you check the importer logs?',
          thread_id: `mb1-${suffix}`,
          priority: 2,
          status: 'queued',
          decision: 'wait',
          reason: 'lower or equal priority: waits for the current task',
        },
      ])
      .execute();

    const taskId = agents.task([
      toolTurn('discover_tools', { query: 'deploy kubernetes cluster', activate: [deploy, 'goal_create'] }),
      toolTurn('goal_create', { title: 'Keep the importer green', criteria: 'No failed import for a week' }),
      submitTurn('done'),
    ]);
    await h.client.startTask({
      agentId,
      taskId,
      title: 'Import the hospital CSV export',
      description: 'Load the nightly CSV export into the warehouse.',
    });
    await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);
    const [first, second, third] = agents.requests(taskId);

    // Step 1: the world from the database, in the tiers the design puts it.
    const t2 = tier(first!, 1);
    const t3 = tier(first!, 2);
    expect(tier(first!, 0)).toContain('# Capabilities\nSQL, Python, CSV wrangling');
    expect(t2).toContain(`- Organisation: ${orgName}`);
    expect(t2).toContain(`- Installed skills: ${csv}, ${style}, ${pdf}`);
    expect(t2).toContain(`- Your manager: Mia Manager (id ${managerId}, Engineering manager)`);
    expect(t2).toContain(`- Mia Manager (agent, id ${managerId}) — Engineering manager`);
    expect(t2).toContain('- Hana Ito (human, id hana)');
    expect(t2).toContain('Acme builds data pipelines for hospitals.');
    expect(t2).toContain('### Team announcements & norms\nCode freeze every Friday after 15:00.');
    expect(t2).toContain('Prefers short answers with numbers.');
    expect(t2).toContain('Your trust level is standard.');
    expect(t2).toContain(`## Environment\n- node.js: ${process.version}`);
    expect(t2).toContain(`<skill name="${csv}">`);
    expect(t2).toContain('User-provided reference material');
    expect(t2).not.toContain('ROLLOUT-MARKER');
    expect(t2).toContain('ADA-PDF reports her way');
    expect(system(first!)).not.toContain('Write PDF reports for management');
    expect(system(first!)).not.toContain('RIVAL-CSV');
    expect(t3).toContain('## System Announcements\n- Maintenance window tonight 22:00 UTC.');
    expect(t3).not.toContain('Expired notice.');
    // The catalogue: skills not yet active, ranked by the task's words ("csv", "import"… match nothing
    // here, so name order), one line each, with the discover_tools hint.
    expect(t3).toContain('## Available Skills (activate with discover_tools)');
    expect(t3).toContain(`- **${deploy}** [ops]: Deploy services to kubernetes clusters`);
    expect(t3).not.toContain(`- **${csv}**`);
    expect(t3).toContain(`## Team Status\n- Mia Manager: working on "Plan the Q3 roadmap"`);
    expect(t3).toContain(
      `### Team tasks (1)\n- [medium] Plan the Q3 roadmap (id t-${managerId}, assignee Mia Manager)`,
    );
    expect(t3).toContain('## Your Attention State');
    expect(t3).toContain('Waiting in your mailbox: 1\n- chat: Can you check the importer logs?');
    expect(t3).toContain('- continue (kept working on the current item): chat: lower or equal priority');
    expect(toolNames(first!)).toContain('discover_tools');
    expect(toolNames(first!)).not.toContain('goal_create');

    // Step 2: discover_tools found and activated both; the skill's body is in Tier 2, the tool is offered.
    const [found] = lastToolResults(second!);
    expect(found!.isError).toBe(false);
    expect(found!.text).toContain(`- **${deploy}** [ops]: Deploy services to kubernetes clusters`);
    expect(found!.text).toContain(`Activated: skill ${deploy}`);
    expect(found!.text).toContain('tool goal_create (offered from your next step)');
    expect(tier(second!, 1)).toContain('ROLLOUT-MARKER');
    expect(tier(second!, 2)).not.toContain(`- **${deploy}**`);
    expect(toolNames(second!)).toContain('goal_create');
    // Every tool the prompt names is offered in this call.
    const offered = toolsForAgent('task', {}, new Set(['goal_create']));
    expect(toolNames(second!)).toEqual([...offered.keys()].sort());
    expect(unofferedToolNames(system(second!), new Set(offered.keys()), parameterNames(offered.values()))).toEqual([]);

    // Tiers 1–2 stay cache-stable while nothing they show changes (Tier 2 changed once, at activation).
    expect(tier(third!, 0)).toBe(tier(second!, 0));
    expect(tier(third!, 1)).toBe(tier(second!, 1));

    // Step 3: the activated tool ran; activations are stored by task, so a later round (new session) keeps them.
    expect(lastToolResults(third!)[0]!.isError).toBe(false);
    expect(await h.db.db.selectFrom('goals').select('title').where('agent_id', '=', agentId).execute()).toEqual([
      { title: 'Keep the importer green' },
    ]);
    const later = await loadActivations(h.db.db, `task_${taskId}_r2`, taskId);
    expect([...later.skills, ...later.tools].sort()).toEqual([deploy, 'goal_create'].sort());
  }, 90_000);

  test('a tool activated by discover_tools runs when the same reply calls it right after', async () => {
    const agentId = await h.createAgent();
    const taskId = agents.task([
      {
        kind: 'message',
        content: [
          { type: 'tool_use', name: 'discover_tools', input: { query: 'goal', activate: ['goal_create'] } },
          { type: 'tool_use', name: 'goal_create', input: { title: 'Same-reply goal', criteria: 'It exists' } },
        ],
        stopReason: 'tool_use',
      },
      submitTurn('done'),
    ]);
    await h.client.startTask({
      agentId,
      taskId,
      title: 'Goal now',
      description: 'Activate and use goal_create at once.',
    });
    await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);
    expect(lastToolResults(agents.requests(taskId)[1]!).map((r) => r.isError)).toEqual([false, false]);
    expect(await h.db.db.selectFrom('goals').select('title').where('agent_id', '=', agentId).execute()).toEqual([
      { title: 'Same-reply goal' },
    ]);
  });

  test('permissions win over discover_tools; unknown names and bad skills are refused in words', async () => {
    const restricted = await h.createAgent({ permissions: { manageGoals: false } });
    expect(discoverableTools('task').has('goal_create')).toBe(true);
    expect(
      toolsForAgent('task', { permissions: { manageGoals: false } }, new Set(['goal_create'])).has('goal_create'),
    ).toBe(false);
    expect(toolsForScenario('task').has('goal_create')).toBe(false);
    const taskId = agents.task([
      toolTurn('discover_tools', { query: 'goal', activate: ['goal_create', 'no-such-skill'] }),
      submitTurn('ok'),
    ]);
    await h.client.startTask({ agentId: restricted, taskId, title: 'Goals', description: 'Try to set a goal.' });
    await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);
    const [result] = lastToolResults(agents.requests(taskId)[1]!);
    expect(result).toEqual({
      isError: true,
      text: expect.stringContaining(
        'goal_create: your permissions do not allow this tool; no-such-skill: no skill or activatable tool has this name',
      ),
    });
    expect(result!.text).toContain('- goal_create: Set yourself a goal');
    expect(result!.text).toContain('(not permitted)');
    expect(toolNames(agents.requests(taskId)[1]!)).not.toContain('goal_create');

    // Scope context: a subtask's prompt carries its parent task as the scope of its work.
    const parentId = `parent-${taskId}`;
    await h.db.db
      .insertInto('tasks')
      .values({
        id: parentId,
        agent_id: restricted,
        title: 'Ship the importer',
        description: 'The importer loads every hospital export by Friday.',
        state: 'in_progress',
      })
      .execute();
    await h.db.db
      .insertInto('tasks')
      .values({
        id: `child-${taskId}`,
        agent_id: restricted,
        title: 'Write the loader',
        description: 'loader',
        state: 'in_progress',
        parent_task_id: parentId,
      })
      .execute();
    const child = await h.db.db
      .selectFrom('tasks')
      .selectAll()
      .where('id', '=', `child-${taskId}`)
      .executeTakeFirstOrThrow();
    const inputs = await loadPromptInputs(
      h.db.db,
      (await findAgent(h.db.db, restricted))!,
      'task',
      child,
      [],
      new Date(),
      'claude-sonnet-4-5',
    );
    expect(systemPromptText(buildSystemPrompt(inputs))).toContain(
      '## Scope (work: Ship the importer)\n<untrusted source="work-description">\nThe importer loads every hospital export by Friday.',
    );

    // An agent binding a skill nobody loaded: refused, and the agent is not created.
    await expect(
      h.client.upsertAgent({
        id: 'unbound-skill-agent',
        name: 'U',
        files: { soul: 's', agents: 'a', heartbeat: '', tools: '' },
        config: { skills: ['never-loaded'] },
        workspaceDir: h.workspaceDir,
      }),
    ).rejects.toThrow(/config\.skills: no skill visible to this agent named "never-loaded"/);
    expect(
      await h.db.db.selectFrom('agents').select('id').where('id', '=', 'unbound-skill-agent').executeTakeFirst(),
    ).toBeUndefined();
    // A SKILL.md without front matter names its file and what is missing.
    const bad = path.join(root, 'bad-skills');
    write(path.join(bad, 'broken', 'SKILL.md'), 'Just text.');
    await expect(h.client.upsertSkillsFromFolder(bad)).rejects.toThrow(
      /invalid skill .*broken\/SKILL\.md: missing front matter/,
    );
  }, 90_000);
});
