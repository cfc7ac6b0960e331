import type { DeliverInput } from '../../workflows/agent-contract';
import {
  deliveryProblem,
  interruptDecision,
  isStaleInformational,
  itemPriority,
  MAILBOX_TEXT_MAX_CHARS,
  mergeTarget,
  nextItem,
  type TriageItem,
} from '../../workflows/rules/mailbox';
import {
  LOOP_BURST_CRITICAL,
  LOOP_REPEAT_CRITICAL,
  LOOP_REPEAT_WARNING,
  recordToolCall,
  type ToolCallSignature,
} from '../../workflows/rules/loop-detector';
import {
  CONVERSATION_MAX_TOOL_ITERATIONS,
  CONVERSATION_SCENARIOS,
  conversationScenario,
  type ConversationScenario,
} from '../../workflows/rules/conversation';
import { CONVERSATION_APPROVAL_REFUSAL } from '../../prompts/conversation';

let n = 0;
const item = (kind: TriageItem['kind'], fields: Partial<TriageItem> = {}): TriageItem => ({
  itemId: `i${++n}`,
  kind,
  from: { type: kind === 'chat' || kind === 'mention' ? 'human' : kind === 'message' ? 'agent' : 'system', id: 'x' },
  channel: 'dm:x',
  priority: itemPriority({ kind }),
  receivedAtMs: n,
  ...fields,
});

describe('mailbox triage (seed rules, first match wins)', () => {
  test.each([
    ['R0: same human, same channel, chat after chat', item('chat'), item('chat'), 'merge', 'R0'],
    ['R1: a human over agent work', item('message'), item('chat'), 'preempt', 'R1'],
    [
      'R1.5: an agent message over background work',
      item('notification', { priority: 4 }),
      item('message'),
      'preempt',
      'R1.5',
    ],
    [
      'R2: a comment on the focused task',
      item('comment', { taskId: 't1' }),
      item('comment', { taskId: 't1' }),
      'merge',
      'R2',
    ],
    ['R6: strictly higher priority', item('message'), item('notification'), 'preempt', 'R6'],
    ['R8: same priority over a system item', item('notification'), item('task'), 'preempt', 'R8'],
    ['continue: lower priority waits', item('message'), item('notification', { priority: 3 }), 'continue', 'none'],
  ])('%s', (_name, current, incoming, decision, rule) => {
    expect(interruptDecision(current, incoming)).toEqual({ decision, rule });
  });

  test('a chat run honours merge only: a preempting item waits instead', () => {
    const result = interruptDecision(
      item('chat', { from: { type: 'human', id: 'ann' } }),
      item('chat', { from: { type: 'human', id: 'bob' } }),
    );
    expect(result.decision).toBe('continue');
  });

  test('duplicates merge by group; notifications never merge', () => {
    const queued = [
      item('message', { channel: 'dm:a2a:bob' }),
      item('comment', { taskId: 't1' }),
      item('notification'),
    ];
    expect(mergeTarget(queued, item('message', { channel: 'dm:a2a:bob' }))).toBe(queued[0]);
    expect(mergeTarget(queued, item('message', { channel: 'dm:a2a:eve' }))).toBeUndefined();
    expect(mergeTarget(queued, item('comment', { taskId: 't1' }))).toBe(queued[1]);
    expect(mergeTarget(queued, item('notification'))).toBeUndefined();
  });

  test('highest priority first, then oldest; stale informational items are dropped after 4 h', () => {
    const low = item('notification', { priority: 3, receivedAtMs: 1 });
    const chat = item('chat', { receivedAtMs: 5 });
    const msg = item('message', { receivedAtMs: 2 });
    expect(nextItem([low, msg, chat])).toBe(chat);
    expect(isStaleInformational(low, 1 + 4 * 3600_000 + 1)).toBe(true);
    expect(isStaleInformational(msg, 1e12)).toBe(false);
  });

  test('bad deliveries are refused with a reason the sender can act on', () => {
    const ok: DeliverInput = { kind: 'chat', from: { type: 'human', id: 'ann' }, text: 'hi' };
    expect(deliveryProblem(ok)).toBeUndefined();
    expect(deliveryProblem({ ...ok, text: '' })).toMatch(/text is empty/);
    expect(deliveryProblem({ ...ok, text: 'x'.repeat(MAILBOX_TEXT_MAX_CHARS + 1) })).toMatch(/limit/);
    expect(deliveryProblem({ ...ok, channel: 'group:t' })).toBeUndefined();
    expect(deliveryProblem({ ...ok, channel: 'group:a:b' })).toMatch(/unknown channel/);
    expect(deliveryProblem({ ...ok, channel: 'room:t' })).toMatch(/unknown channel/);
    expect(deliveryProblem({ ...ok, kind: 'shout' as never })).toMatch(/unknown kind/);
    expect(deliveryProblem({ ...ok, from: { type: 'robot' as never, id: 'r' } })).toMatch(/from must be/);
    expect(deliveryProblem({ ...ok, kind: 'comment' })).toMatch(/needs taskId/);
    expect(deliveryProblem({ ...ok, kind: 'task' })).toBeUndefined(); // starts a task
    expect(deliveryProblem({ ...ok, priority: 'huge' as never })).toMatch(/unknown priority/);
  });
});

describe('the tool-loop detector (seed D1-7)', () => {
  const call = (tool: string, args = '{}', result?: string): ToolCallSignature => ({
    tool,
    args,
    ...(result ? { result } : {}),
  });

  test('the same call warns at 5 and stops at 10', () => {
    const history: ToolCallSignature[] = [];
    const levels = Array.from(
      { length: LOOP_REPEAT_CRITICAL },
      (_, i) => recordToolCall(history, call('file_read', `{"path":"a"}`, `r${i}`)).level,
    );
    expect(levels.indexOf('warning')).toBe(LOOP_REPEAT_WARNING - 1);
    expect(levels.at(-1)).toBe('critical');
  });

  test('A↔B ping-pong stops at 5 cycles; different calls to one tool stop at the burst limit', () => {
    const pingPong: ToolCallSignature[] = [];
    let verdict = recordToolCall(pingPong, call('a'));
    for (let i = 0; i < 9; i++) verdict = recordToolCall(pingPong, call(i % 2 === 0 ? 'b' : 'a'));
    expect(verdict).toMatchObject({ level: 'critical', detector: 'pingPong' });

    const burst: ToolCallSignature[] = [];
    for (let i = 0; i < LOOP_BURST_CRITICAL; i++)
      verdict = recordToolCall(burst, call('file_read', `{"path":"f${i}"}`));
    expect(verdict).toMatchObject({ level: 'critical', detector: 'sameToolBurst' });
  });

  test('varied work is fine, and history is bounded', () => {
    const history: ToolCallSignature[] = [];
    for (let i = 0; i < 50; i++)
      expect(
        recordToolCall(history, call(['file_read', 'file_write', 'memory_save'][i % 3]!, `{"i":${i}}`)).level,
      ).toBe('ok');
    expect(history.length).toBe(30);
  });
});

describe('the scenario that answers an item (seed D1 B19)', () => {
  test.each<[string, Parameters<typeof conversationScenario>[0], ConversationScenario]>([
    ['a human in a direct channel', { kind: 'chat', from: { type: 'human' }, channel: 'dm:human:ann' }, 'chat'],
    ['a mention outside a task', { kind: 'mention', from: { type: 'human' }, channel: 'dm:human:ann' }, 'chat'],
    ["another agent's message", { kind: 'message', from: { type: 'agent' }, channel: 'dm:a2a:a:b' }, 'a2a'],
    [
      'a task comment',
      { kind: 'comment', from: { type: 'human' }, channel: 'task:t1', taskId: 't1' },
      'comment_response',
    ],
    [
      "a mention in an agent's task comment",
      { kind: 'mention', from: { type: 'agent' }, channel: 'task:t1', taskId: 't1' },
      'comment_response',
    ],
    ["a human's group message", { kind: 'chat', from: { type: 'human' }, channel: 'group:release' }, 'group_chat'],
    [
      "an agent's mention in a group",
      { kind: 'mention', from: { type: 'agent' }, channel: 'group:release' },
      'group_chat',
    ],
  ])('%s', (_name, item, scenario) => {
    expect(conversationScenario(item)).toBe(scenario);
  });

  test('every conversation scenario has the seed’s safety cap of 200 tool iterations and its own refusal of risky calls', () => {
    expect(CONVERSATION_SCENARIOS.map((s) => CONVERSATION_MAX_TOOL_ITERATIONS[s])).toEqual([200, 200, 200, 200]);
    expect(new Set(CONVERSATION_SCENARIOS.map((s) => CONVERSATION_APPROVAL_REFUSAL[s])).size).toBe(
      CONVERSATION_SCENARIOS.length,
    );
  });
});
