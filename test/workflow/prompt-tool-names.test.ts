import { randomUUID } from 'node:crypto';
import {
  buildSystemPrompt,
  HEARTBEAT_USER_MESSAGE,
  systemPromptText,
  type PromptInputs,
} from '../../activities/context';
import {
  appraisalPrompt,
  evaluationPrompt,
  reflectionPrompt as cognitiveReflectionPrompt,
} from '../../prompts/cognitive';
import { createMemoryActivities } from '../../activities/memory';
import { dailyReportPrompt, dreamPrompt, heartbeatPrompt, reflectionPrompt } from '../../prompts/memory';
import { loadPromptInputs } from '../../activities/step/prompt';
import { findAgent } from '../../activities/store/agents';
import { postAnnouncement, upsertOrganisation } from '../../activities/store/organisations';
import { findMessage } from '../../activities/store/sessions';
import {
  allRegisteredTools,
  SCENARIOS,
  toolDefinitions,
  toolsForScenario,
  type Scenario,
} from '../../activities/tools/registry';
import { SUMMARIZER_SYSTEM_PROMPT } from '../../prompts/system';
import {
  CONTINUATION_PROMPT,
  finalCriticalReminderText,
  INTERRUPTED_RETRY_TEXT,
  reflectionCheckpointText,
  reminderText,
  taskPromptText,
  LOOP_WARNING_TEXT,
} from '../../prompts/task';
import { MEMORY_FLUSH_PROMPT } from '../../prompts/memory';
import { NO_APPROVAL_IN_BACKGROUND_RUNS } from '../../prompts/conversation';
import {
  formatSubagentReports,
  subagentOpeningText,
  agentMessageText,
  CONVERSATION_APPROVAL_REFUSAL,
  taskCommentText,
  groupPrompt,
} from '../../prompts/conversation';
import { useHarness } from '../support/harness';
import {
  DATA_ID_PREFIXES,
  knownToolNames,
  NON_TOOL_WORDS,
  parameterNames,
  unofferedToolNames,
} from '../support/tool-mentions';

/**
 * "Prompts only promise tools that exist": for every scenario of the tool registry, the prompts the
 * production path builds (all three tiers from the agent's real rows, every optional section filled,
 * the scenario's user prompts, harness reminders and the tool descriptions) name only tools offered in
 * that scenario. Names are found generically (every snake_case word), so a newly invented tool name in
 * any prompt fails here.
 */
describe('tool names in prompts', () => {
  const h = useHarness();
  let agentId: string;
  let taskId: string;
  beforeAll(async () => {
    const db = h.db.db;
    // The agent's world from real rows (issue 12): an organisation with people and shared skills, a
    // bound skill, a colleague, an announcement and a mailbox item, so those sections render too.
    const org = `ptn-${randomUUID().slice(0, 8)}`;
    await upsertOrganisation(db, {
      name: org,
      context: 'We build parsers.',
      announcements: 'Release on Friday.',
      users: [{ handle: 'hana', name: 'Hana', profile: 'Prefers short answers.' }],
      skills: [
        { name: `${org}-csv`, category: 'data', description: 'Parse CSV files', body: 'Check the header first.' },
        {
          name: `${org}-deploy`,
          category: 'ops',
          description: 'Deploy the parser service',
          body: 'Run the smoke test after.',
        },
      ],
    });
    await h.createAgent({ org, position: 'manager' });
    agentId = await h.createAgent({
      org,
      skills: [`${org}-csv`],
      capabilities: 'Parsing',
      trust: { level: 'standard' },
    });
    await postAnnouncement(db, { text: 'Maintenance tonight.', org });
    await db
      .insertInto('mailbox_items')
      .values({
        id: randomUUID(),
        agent_id: agentId,
        kind: 'chat',
        from_type: 'human',
        from_id: 'hana',
        channel: 'dm:hana',
        text: 'A question',
        thread_id: 'th',
        priority: 2,
        status: 'queued',
        decision: 'wait',
        reason: 'waits',
      })
      .execute();
    // Enough state that every data-driven section renders: > 15 open tasks (overflow hint), closed
    // ones (count), a failed and a blocked one (heartbeat recovery), notebook and knowledge.
    const rows = Array.from({ length: 20 }, (_, i) => ({
      id: randomUUID(),
      agent_id: agentId,
      title: `Task ${i}`,
      description: `Do thing ${i}`,
      state: i < 16 ? 'in_progress' : (['completed', 'failed', 'blocked', 'cancelled'] as const)[i - 16]!,
      priority: (['low', 'medium', 'high', 'urgent'] as const)[i % 4]!,
      last_error: i === 17 ? 'the build timed out' : null,
    }));
    await db.insertInto('tasks').values(rows).execute();
    taskId = rows[0]!.id;
    await db
      .insertInto('memory_notebook')
      .values({ agent_id: agentId, key: 'focus', content: 'Finish the parser first.', tag: 'agent' })
      .execute();
    await db
      .insertInto('memory_knowledge')
      .values({ agent_id: agentId, title: 'Conventions', content: 'Tests live next to the code.' })
      .execute();
  });

  /** Every optional section filled, as a future loader might fill it. */
  function everySection(inputs: PromptInputs): PromptInputs {
    const people = (kind: 'agent' | 'human', n: number) =>
      Array.from({ length: n }, (_, i) => ({ id: `${kind}${i}`, name: `${kind} ${i}`, kind, role: 'engineer' }));
    return {
      ...inputs,
      agent: {
        ...inputs.agent,
        position: 'manager',
        capabilities: 'Parsing',
        installedSkills: ['csv'],
        manager: { id: 'm1', name: 'Mia' },
      },
      organisation: { name: 'Acme', context: 'We build parsers.', announcements: 'Release on Friday.' },
      colleagues: [...people('agent', 14), ...people('human', 12)],
      userProfiles: [{ name: 'Hana', profile: 'Prefers short answers.' }],
      trust: { level: 'standard', description: 'Ask before deleting.' },
      environment: { region: 'eu' },
      activeSkills: [{ name: 'csv', description: 'CSV handling', body: 'Step one. Step two.', expanded: false }],
      scope: { kind: 'project', name: 'Parser', description: 'The CSV parser project.' },
      announcements: ['Maintenance tonight.'],
      skills: Array.from({ length: 40 }, (_, i) => ({
        name: `skill${i}`,
        description: 'a skill',
        category: 'general',
      })),
      skillQuery: 'parser',
      tasks: {
        mine: inputs.tasks?.mine ?? [],
        team: Array.from({ length: 14 }, (_, i) => ({
          id: `t${i}`,
          title: `Team task ${i}`,
          priority: 'high' as const,
          status: 'in_progress',
          assignee: 'agent1',
        })),
      },
      teamStatus: [{ name: 'agent 1', status: 'busy' }],
      attention: {
        focus: { type: 'task', summary: 'Parser', startedAt: inputs.now },
        queue: { total: 2, items: [{ type: 'chat', summary: 'A question' }] },
        decisions: [{ decision: 'continue', reasoning: 'Almost done' }],
        mergedContent: 'A comment.',
      },
      sender: { id: 'u1', name: 'Hana', kind: 'human' },
    } as PromptInputs;
  }

  /** The user-side prompts of each scenario: its opening prompt, the harness's injections, its tool results we write. */
  async function scenarioUserPrompts(scenario: Scenario, offered: ReadonlySet<string>): Promise<string[]> {
    const memory = createMemoryActivities({ db: h.db.db });
    switch (scenario) {
      case 'task':
        return [
          taskPromptText(
            { id: taskId, title: 'Fix the parser', description: 'It drops lines.', notes: ['Found the bug.'] },
            'Add a test.',
          ),
          reminderText(taskId, 10),
          reflectionCheckpointText(30),
          finalCriticalReminderText(taskId),
          CONTINUATION_PROMPT,
          INTERRUPTED_RETRY_TEXT,
          MEMORY_FLUSH_PROMPT,
          formatSubagentReports([
            {
              workflowId: 'task-x-r1-sub-1',
              task: 'Read the parser',
              status: 'completed',
              result: 'It drops lines.',
              iterations: 2,
              capped: false,
              costUsd: 0,
            },
            {
              workflowId: 'task-x-r1-sub-2',
              task: 'Read the lexer',
              status: 'failed',
              error: 'provider error',
              costUsd: 0,
            },
          ]),
        ];
      case 'heartbeat': {
        // The real activity, over the rows above (failed and blocked tasks, quality signal)…
        const sessionId = `hb_${agentId}_${randomUUID()}`;
        await memory.heartbeatPrepare({ agentId, sessionId });
        const written = await findMessage(h.db.db, sessionId, 'scenario-prompt');
        const text = (written!.content as Array<{ text?: string }>).map((b) => b.text ?? '').join('\n');
        expect(text).toContain('## Failed tasks — recovery');
        // …and the pure builder with the parts that need data this agent does not have (goals).
        return [
          text,
          heartbeatPrompt({
            now: 'now',
            checklist: '',
            lastHeartbeat: { at: 'then', summary: 'Checked tasks.' },
            goals: [{ title: 'Ship', status: 'active', currentIteration: 1, maxIterations: 3, criteria: 'released' }],
            failedTasks: [{ id: 't1', title: 'Build', error: 'boom' }],
            blockedTasks: [{ id: 't2', title: 'Deploy' }],
            quality: { reviewed: 10, revised: 5 },
            tools: offered,
            dailyReport: {
              day: '2026-11-30',
              activity: '- [completed] Plan (mine, t1)',
              maxWords: 500,
              title: 'Daily Report — 2026-11-30',
            },
          }),
          HEARTBEAT_USER_MESSAGE,
          NO_APPROVAL_IN_BACKGROUND_RUNS,
        ];
      }
      case 'reflection':
        return [
          reflectionPrompt({
            taskId,
            title: 'Fix',
            rounds: 2,
            durationMs: 60_000,
            toolCalls: 3,
            resultSummary: 'Fixed',
            notes: ['note'],
          }),
          NO_APPROVAL_IN_BACKGROUND_RUNS,
        ];
      case 'consolidation':
        return [
          dailyReportPrompt({
            day: '2026-11-30',
            tasksTouched: [{ title: 'Fix', state: 'completed' }],
            tokensToday: 10,
            previousReport: { day: '2026-11-29', content: 'Fine.' },
          }),
          dreamPrompt(
            [{ id: 'obs_5f3a9c1d2e4b', createdAt: new Date(), type: 'fact', tags: ['x'], content: 'A fact.' }] as never,
            1,
            [{ title: 'K', content: 'k' }] as never,
          ),
        ];
      // Conversation runs: the item as the model reads it, the harness's loop warning, the refusal of a risky call.
      case 'chat':
        return [MEMORY_FLUSH_PROMPT, LOOP_WARNING_TEXT, CONVERSATION_APPROVAL_REFUSAL.chat];
      case 'a2a':
        return [
          agentMessageText('peer', 'item-1', 'When do we ship?'),
          MEMORY_FLUSH_PROMPT,
          LOOP_WARNING_TEXT,
          CONVERSATION_APPROVAL_REFUSAL.a2a,
        ];
      case 'comment_response':
        return [
          taskCommentText(taskId, 'human:ann', 'item-1', 'Please add a test.'),
          MEMORY_FLUSH_PROMPT,
          LOOP_WARNING_TEXT,
          CONVERSATION_APPROVAL_REFUSAL.comment_response,
        ];
      case 'group_chat': {
        const members = [
          { type: 'agent' as const, id: agentId },
          { type: 'human' as const, id: 'ann' },
        ];
        const message = { id: 'm1', from: members[1]!, text: 'Shall we ship?' };
        return [
          groupPrompt({
            group: 'release',
            agentId,
            members,
            message,
            targeted: true,
            recent: [{ from: members[1]!, text: 'hello' }],
          }),
          groupPrompt({ group: 'release', agentId, members, message, targeted: false, recent: [] }),
          MEMORY_FLUSH_PROMPT,
          LOOP_WARNING_TEXT,
          CONVERSATION_APPROVAL_REFUSAL.group_chat,
        ];
      }
      case 'subagent':
        return [
          subagentOpeningText(
            { task: 'Read the parser.', context: 'It is in src/parser.ts.' },
            { workflowId: 'task-x-r1', taskId },
          ),
          NO_APPROVAL_IN_BACKGROUND_RUNS,
        ];
    }
  }

  test.each(SCENARIOS)('%s: every tool named in its prompts is offered in it', async (scenario) => {
    const tools = toolsForScenario(scenario);
    const offered = new Set(tools.keys());
    const params = parameterNames(tools.values());
    const agent = (await findAgent(h.db.db, agentId))!;
    const task =
      scenario === 'task'
        ? await h.db.db.selectFrom('tasks').selectAll().where('id', '=', taskId).executeTakeFirstOrThrow()
        : undefined;
    const real = await loadPromptInputs(
      h.db.db,
      agent,
      scenario,
      task,
      toolDefinitions(tools),
      new Date(),
      'claude-sonnet-4-5',
    );
    const texts = [
      systemPromptText(buildSystemPrompt(real)),
      systemPromptText(buildSystemPrompt(everySection(real))),
      ...[...tools.values()].map((t) => t.description),
      ...(await scenarioUserPrompts(scenario, offered)),
    ];
    expect(texts[0]).toContain(scenario === 'heartbeat' ? '### Heartbeat check-in' : '## Current Scenario');
    // The real world sections rendered (so the check covers them), and discover_tools is named exactly where offered.
    expect(texts[0]).toContain('## Available Skills');
    expect(texts[0]).toContain('### Colleagues');
    expect(texts[0]).toContain('## Your Attention State');
    expect(texts[0]!.includes('discover_tools')).toBe(offered.has('discover_tools'));
    expect(offered.has('discover_tools')).toBe(scenario === 'task' || scenario === 'chat');
    const problems = texts.flatMap((text) =>
      unofferedToolNames(text, offered, params).map(
        (name) => `${name} in: …${text.slice(Math.max(0, text.indexOf(name) - 80), text.indexOf(name) + 40)}…`,
      ),
    );
    expect(problems).toEqual([]);
  });

  test('the task board: my top 15 open tasks by priority, an overflow hint with the true count, closed ones only counted', async () => {
    const agent = (await findAgent(h.db.db, agentId))!;
    const tools = toolsForScenario('task');
    const inputs = await loadPromptInputs(
      h.db.db,
      agent,
      'chat',
      undefined,
      toolDefinitions(tools),
      new Date(),
      'claude-sonnet-4-5',
    );
    const text = systemPromptText(buildSystemPrompt(inputs));
    const board = text.slice(text.indexOf('## Task Board'));
    // 17 open (16 in progress, 1 blocked): 4 urgent, 5 high, 4 medium, 4 low; 3 closed.
    expect(board).toContain('### My active tasks (17)');
    const lines = board.split('\n').filter((l) => /^- \[(urgent|high|medium|low)\] Task /.test(l));
    const count = (p: string) => lines.filter((l) => l.startsWith(`- [${p}]`)).length;
    expect([lines.length, count('urgent'), count('high'), count('medium'), count('low')]).toEqual([15, 4, 5, 4, 2]);
    expect(lines.slice(0, 4).every((l) => l.startsWith('- [urgent]'))).toBe(true);
    expect(board).toContain('- …2 more: use task_list for the full list');
    expect(board).toContain('Completed or closed tasks: 3 (task_list shows them).');
  });

  test('calls made without tools (summariser, cognitive preparation) name no tools', () => {
    const situation = {
      agent: { name: 'A', soul: 'calm', agents: 'engineer' },
      stimulus: { kind: 'task', title: 'Fix', text: 'Fix it' },
      recentActivity: ['did x'],
      knowledgeTitles: ['K'],
    };
    const texts = [
      SUMMARIZER_SYSTEM_PROMPT,
      ...Object.values(appraisalPrompt(situation)),
      ...Object.values(cognitiveReflectionPrompt(situation, 'appraisal', ['memory'])),
      ...Object.values(evaluationPrompt(situation, 'prepared', 'response')),
    ];
    expect(texts.flatMap((t) => unofferedToolNames(t, new Set(), new Set()))).toEqual([]);
  });

  test('the detector bites: an invented tool name fails, and no allowed word is a tool name', () => {
    const offered = new Set(toolsForScenario('heartbeat').keys());
    expect(unofferedToolNames('Use frobnicate_widgets to finish, then task_list.', offered, new Set())).toEqual([
      'frobnicate_widgets',
    ]);
    // A tool that exists elsewhere but is not offered in this scenario is caught too.
    expect(unofferedToolNames('Then call shell_execute.', offered, new Set())).toEqual(['shell_execute']);
    const known = knownToolNames(allRegisteredTools());
    expect([...NON_TOOL_WORDS].filter((w) => known.has(w))).toEqual([]);
    expect([...known].filter((t) => DATA_ID_PREFIXES.some((p) => t.startsWith(p)))).toEqual([]);
  });
});
