import { capKnowledge, KNOWLEDGE_TRUNCATION_MARKER } from '../../activities/memory/knowledge-store';
import { findSecret, lineDiff } from '../../activities/memory/self-edit';
import { dreamPrompt, heartbeatPrompt, reflectionPrompt } from '../../prompts/memory';
import { toolsForScenario } from '../../activities/tools/registry';
import {
  clampHeartbeatInterval,
  HEARTBEAT_MAX_IDLE_SKIPS,
  HEARTBEAT_TOOL_WHITELIST,
  heartbeatPhaseMs,
  idleSkipDecision,
  isHeartbeatOk,
} from '../../workflows/rules/heartbeat-rules';
import {
  checkDreamPlan,
  DREAM_MAX_REMOVALS,
  extractJsonObject,
  KNOWLEDGE_PROMPT_MAX_CHARS,
  MEMORY_FLUSH_MIN_MESSAGES,
  shouldFlushMemory,
} from '../../workflows/rules/memory-limits';

const ids = (n: number) => Array.from({ length: n }, (_, i) => `obs_${i}`);
const offered = new Set(ids(100));

describe('dream plan check', () => {
  test('accepts a plan within bounds, fenced in prose', () => {
    const plan = {
      remove: ['obs_1'],
      merge: [{ removeIds: ['obs_2', 'obs_3'], mergedContent: 'merged' }],
      promote: [{ sourceIds: ['obs_4', 'obs_5', 'obs_6'], section: 'Conventions', content: 'Use tabs' }],
    };
    const check = checkDreamPlan(`Here is my plan:\n\`\`\`json\n${JSON.stringify(plan)}\n\`\`\`\nDone.`, offered);
    expect(check).toEqual({ ok: true, plan });
  });

  test.each([
    ['no JSON', 'I think we should keep everything', /no JSON object/],
    ['broken JSON', '{"remove": [obs_1]}', /not valid JSON/],
    ['remove not a list', '{"remove": "obs_1"}', /array of entry ids/],
    ['an id it was not shown', '{"remove": ["obs_999"]}', /unknown entry id/],
    [
      'an id used twice',
      '{"remove": ["obs_1"], "merge": [{"removeIds": ["obs_1", "obs_2"], "mergedContent": "x"}]}',
      /more than once/,
    ],
    [
      'a promotion with two sources',
      '{"promote": [{"sourceIds": ["obs_1", "obs_2"], "section": "S", "content": "c"}]}',
      /at least 3/,
    ],
    ['a merge of one entry', '{"merge": [{"removeIds": ["obs_1"], "mergedContent": "x"}]}', /fewer than 2/],
    [
      'promotion into the observation buffer',
      '{"promote": [{"sourceIds": ["obs_1", "obs_2", "obs_3"], "section": "_observations", "content": "c"}]}',
      /invalid section/,
    ],
  ])('rejects %s', (_name, raw, reason) => {
    const check = checkDreamPlan(raw, offered);
    expect(check.ok).toBe(false);
    expect(!check.ok && check.reason).toMatch(reason);
  });

  test('rejects more removals, merges or promotions than the caps', () => {
    expect(checkDreamPlan(JSON.stringify({ remove: ids(DREAM_MAX_REMOVALS + 10) }), offered)).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/60 removals exceed the cap of 50/),
    });
    expect(checkDreamPlan(JSON.stringify({ remove: ids(DREAM_MAX_REMOVALS) }), offered).ok).toBe(true);
    const merges = Array.from({ length: 21 }, (_, i) => ({
      removeIds: [`obs_${2 * i}`, `obs_${2 * i + 1}`],
      mergedContent: 'm',
    }));
    expect(checkDreamPlan(JSON.stringify({ merge: merges }), offered)).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/21 merges/),
    });
    const promotions = Array.from({ length: 21 }, (_, i) => ({
      sourceIds: [`obs_${3 * i}`, `obs_${3 * i + 1}`, `obs_${3 * i + 2}`],
      section: `S${i}`,
      content: 'c',
    }));
    expect(checkDreamPlan(JSON.stringify({ promote: promotions }), offered)).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/21 promotions/),
    });
  });

  test('extracts the first balanced object, ignoring braces inside strings', () => {
    expect(extractJsonObject('x {"a": "}{", "b": {"c": 1}} y {"d": 2}')).toBe('{"a": "}{", "b": {"c": 1}}');
    expect(extractJsonObject('{"open": ')).toBeUndefined();
  });
});

describe('memory flush predicate', () => {
  test('fires only past 30 messages, right before compaction, once per session', () => {
    expect(shouldFlushMemory({ messageCount: MEMORY_FLUSH_MIN_MESSAGES + 1, aboutToCompact: true })).toBe(true);
    expect(shouldFlushMemory({ messageCount: MEMORY_FLUSH_MIN_MESSAGES, aboutToCompact: true })).toBe(false);
    expect(shouldFlushMemory({ messageCount: 100, aboutToCompact: false })).toBe(false);
    expect(shouldFlushMemory({ messageCount: 100, aboutToCompact: true, alreadyFlushed: true })).toBe(false);
  });
});

describe('heartbeat rules', () => {
  test('idle skip: at most 3 in a row, then the 4th runs; any change runs', () => {
    let state: { fingerprint?: string; skippedInRow: number } | undefined;
    const outcomes: boolean[] = [];
    for (let i = 0; i < 9; i++) {
      const d = idleSkipDecision(state, 'same');
      outcomes.push(d.skip);
      state = { fingerprint: 'same', skippedInRow: d.skippedInRow };
    }
    // first run (no history), 3 skips, forced run, 3 skips, forced run
    expect(outcomes).toEqual([false, true, true, true, false, true, true, true, false]);
    expect(idleSkipDecision({ fingerprint: 'a', skippedInRow: 1 }, 'b')).toEqual({ skip: false, skippedInRow: 0 });
    expect(HEARTBEAT_MAX_IDLE_SKIPS).toBe(3);
  });

  test('HEARTBEAT_OK detection', () => {
    expect(isHeartbeatOk('HEARTBEAT_OK')).toBe(true);
    expect(isHeartbeatOk('  All quiet. HEARTBEAT_OK\n')).toBe(true);
    expect(isHeartbeatOk('I created a task for the failing build.')).toBe(false);
  });

  test('interval bounds and a stable per-agent phase', () => {
    expect(() => clampHeartbeatInterval(60_000)).toThrow(/between 5 minutes and 24 hours/);
    expect(clampHeartbeatInterval(30 * 60_000)).toBe(30 * 60_000);
    const phase = heartbeatPhaseMs('agent-a', 30 * 60_000);
    expect(phase).toBe(heartbeatPhaseMs('agent-a', 30 * 60_000));
    expect(phase).toBeGreaterThanOrEqual(0);
    expect(phase).toBeLessThan(30 * 60_000);
  });

  test("the heartbeat prompt has D1's parts", () => {
    const text = heartbeatPrompt({
      now: '2026-11-30 10:00 UTC',
      checklist: '',
      goals: [{ title: 'Ship v1', status: 'active', currentIteration: 2, maxIterations: 5, criteria: 'released' }],
      failedTasks: [{ id: 't1', title: 'Build', error: 'timeout' }],
      blockedTasks: [],
      quality: { reviewed: 10, revised: 4 },
      tools: new Set(toolsForScenario('heartbeat').keys()),
    });
    for (const part of [
      '[HEARTBEAT CHECK-IN]',
      '- Check assigned tasks with `task_list`',
      '## Last heartbeat',
      '## Active Goals',
      'iteration 2/5',
      '## Failed tasks — recovery',
      '## Self-evolution',
      '## Quality signal',
      'above 30%',
      "## Patrol, don't build",
      'HEARTBEAT_OK',
    ]) {
      expect(text).toContain(part);
    }
  });
});

describe('tool scenarios', () => {
  test('heartbeats offer only whitelisted tools, including the memory tools D1 lists', () => {
    const names = [...toolsForScenario('heartbeat').keys()];
    expect(names.every((n) => HEARTBEAT_TOOL_WHITELIST.includes(n))).toBe(true);
    expect(names).toEqual(
      expect.arrayContaining([
        'memory_save',
        'memory_search',
        'memory_update',
        'update_notebook',
        'update_working_memory',
        'edit_agent_file',
      ]),
    );
    expect(names).not.toContain('clear_notebook');
    expect(names).not.toContain('file_write');
  });

  test('reflections offer memory tools only; tasks and chats get memory tools, aliases and edit_agent_file', () => {
    const memory = [
      'update_notebook',
      'clear_notebook',
      'memory_save',
      'memory_update',
      'memory_search',
      'update_working_memory',
      'clear_working_memory',
      'memory_list',
      'memory_delete',
      'memory_update_longterm',
      'memory_search_longterm',
    ];
    expect([...toolsForScenario('reflection').keys()].sort()).toEqual([...memory].sort());
    for (const scenario of ['task', 'chat'] as const) {
      expect([...toolsForScenario(scenario).keys()]).toEqual(expect.arrayContaining([...memory, 'edit_agent_file']));
    }
    expect(toolsForScenario('consolidation').size).toBe(0);
  });
});

describe('knowledge in prompts', () => {
  test('whole sections while they fit in 8,000 characters, the crossing one truncated', () => {
    const sections = Array.from({ length: 4 }, (_, i) => ({ title: `S${i}`, content: 'x'.repeat(2_998) }));
    const capped = capKnowledge(sections, KNOWLEDGE_PROMPT_MAX_CHARS);
    expect(capped.map((s) => s.title)).toEqual(['S0', 'S1', 'S2']);
    expect(capped[2]!.content.endsWith(KNOWLEDGE_TRUNCATION_MARKER)).toBe(true);
    const size = capped.reduce((n, s) => n + s.title.length + s.content.length, 0);
    expect(size).toBeLessThanOrEqual(KNOWLEDGE_PROMPT_MAX_CHARS);
  });
});

describe('self-edit helpers', () => {
  test.each([
    ['sk-proj-abcdefghijklmnop1234', true],
    ['xoxb-1234567890-abcdef', true],
    ['AKIAABCDEFGHIJKLMNOP', true],
    ['ghp_abcdefghijklmnopqrstuvwxyz0123456789', true],
    ['glpat-abcdefghijklmnopqrst', true],
    ['Use task-list and risk-free desk-top checks', false],
    ['an sk- prefix alone', false],
  ])('secret scan of %s', (text, found) => {
    expect(findSecret(`notes: ${text}`) !== undefined).toBe(found);
  });

  test('line diff shows the changed middle and is cut to 5 KB', () => {
    expect(lineDiff('a\nb\nc', 'a\nB\nc')).toBe('@@ line 2: -1 +1 @@\n-b\n+B');
    const big = lineDiff('', 'y'.repeat(20_000));
    expect(Buffer.byteLength(big)).toBeLessThanOrEqual(5 * 1024);
    expect(big.endsWith('[… diff truncated]')).toBe(true);
  });
});

describe('reflection and dream prompts', () => {
  const base = {
    taskId: 't1',
    title: 'Fix login',
    durationMs: 95 * 60_000,
    toolCalls: 12,
    resultSummary: 'r'.repeat(400),
    notes: Array.from({ length: 8 }, (_, i) => `${i}`.repeat(300)),
  };

  test('revised tasks get "what went wrong", first-time tasks "what worked"; notes cut to 200', () => {
    const revised = reflectionPrompt({ ...base, rounds: 3 });
    expect(revised).toContain('Rounds: 3 (2 revisions)');
    expect(revised).toContain('## Reflect on what went wrong');
    expect(revised).toContain('Duration: 1 h 35 min');
    expect(revised).toContain(`Result summary: ${'r'.repeat(300)}…`);
    expect(revised).toContain(`  - ${'7'.repeat(200)}\n`.trimEnd());
    expect(revised).not.toContain('7'.repeat(201));
    expect(revised).toMatch(/5 or more steps .* skill/);
    const first = reflectionPrompt({ ...base, rounds: 1 });
    expect(first).toContain('## Reflect on what worked');
    expect(first).not.toContain('what went wrong');
  });

  test('the dream prompt lists entries as id|timestamp|type|tags|content', () => {
    const text = dreamPrompt(
      [
        {
          id: 'obs_1',
          type: 'fact',
          tags: ['a', 'b'],
          content: 'line one\nline two',
          createdAt: new Date('2026-11-30T10:00:00Z'),
        },
      ],
      60,
      [],
    );
    expect(text).toContain('obs_1|2026-11-30T10:00|fact|a,b|line one line two');
    expect(text).toContain('(1 most recent of 60)');
  });
});
