import type { ChatMessage, ContentBlock } from '../../activities/llm/types';
import { sanitizeMessageSequence } from '../../activities/context/sanitize';
import { INTERRUPTED_TOOL_RESULT_TEXT } from '../../activities/context/limits';

const user = (text: string, kind?: ChatMessage['kind']): ChatMessage => ({
  role: 'user',
  content: [{ type: 'text', text }],
  ...(kind ? { kind } : {}),
});
const assistant = (text: string): ChatMessage => ({ role: 'assistant', content: [{ type: 'text', text }] });
const call = (id: string, name = 'shell_execute', text?: string): ChatMessage => ({
  role: 'assistant',
  content: [
    ...(text ? [{ type: 'text' as const, text }] : []),
    { type: 'tool_use', id, name, input: { command: 'ls' } },
  ],
});
const calls = (...ids: string[]): ChatMessage => ({
  role: 'assistant',
  content: ids.map((id) => ({ type: 'tool_use' as const, id, name: 'file_read', input: { path: id } })),
});
const result = (id: string, content = `result ${id}`, isError = false): ContentBlock => ({
  type: 'tool_result',
  toolUseId: id,
  content,
  ...(isError ? { isError } : {}),
});
const results = (...blocks: ContentBlock[]): ChatMessage => ({ role: 'user', content: blocks });

function assertValid(messages: ChatMessage[]): void {
  expect(messages[0]?.role).toBe('user');
  messages.forEach((m, i) => {
    const uses = m.content.filter((b) => b.type === 'tool_use').map((b) => (b.type === 'tool_use' ? b.id : ''));
    if (m.role === 'assistant' && uses.length) {
      const next = messages[i + 1];
      const answered = next?.content
        .filter((b) => b.type === 'tool_result')
        .map((b) => (b.type === 'tool_result' ? b.toolUseId : ''));
      expect(answered).toEqual(uses);
    }
    if (m.role === 'user') {
      for (const b of m.content) {
        if (b.type !== 'tool_result') continue;
        const prev = messages[i - 1];
        expect(prev?.content.some((x) => x.type === 'tool_use' && x.id === b.toolUseId)).toBe(true);
      }
    }
  });
}

describe('sanitizeMessageSequence (D1 C13)', () => {
  test('a valid conversation passes through unchanged', () => {
    const input = [user('hi'), call('a'), results(result('a')), assistant('done')];
    const { messages, stats } = sanitizeMessageSequence(input);
    expect(messages).toEqual(input);
    expect(Object.values(stats).every((v) => v === 0)).toBe(true);
  });

  test('a crash after the tool call: the missing result is synthesised as an interrupted error', () => {
    const { messages, stats } = sanitizeMessageSequence([user('deploy it'), call('a')]);
    expect(messages).toEqual([
      user('deploy it'),
      call('a'),
      {
        role: 'user',
        content: [{ type: 'tool_result', toolUseId: 'a', content: INTERRUPTED_TOOL_RESULT_TEXT, isError: true }],
      },
    ]);
    expect(INTERRUPTED_TOOL_RESULT_TEXT).toContain('interrupted / no result recorded');
    expect(stats.synthesizedResults).toBe(1);
  });

  test('a crash between parallel results: present results are kept in call order, the gap is filled', () => {
    const { messages, stats } = sanitizeMessageSequence([
      user('go'),
      calls('a', 'b', 'c'),
      results(result('c')),
      results(result('a')),
    ]);
    assertValid(messages);
    expect(messages).toHaveLength(3);
    const blocks = messages[2]!.content;
    expect(blocks.map((b) => (b.type === 'tool_result' ? [b.toolUseId, b.isError === true] : null))).toEqual([
      ['a', false],
      ['b', true],
      ['c', false],
    ]);
    expect(stats.synthesizedResults).toBe(1);
  });

  test('orphan and duplicate tool results are dropped', () => {
    const { messages, stats } = sanitizeMessageSequence([
      user('start'),
      results(result('ghost')),
      call('a'),
      results(result('a'), result('a', 'second copy'), result('zzz')),
      assistant('ok'),
      results(result('a', 'late copy')),
    ]);
    assertValid(messages);
    expect(stats.droppedOrphanResults).toBe(3);
    expect(stats.droppedDuplicateResults).toBe(1);
    expect(JSON.stringify(messages)).not.toContain('second copy');
    expect(JSON.stringify(messages)).not.toContain('late copy');
    expect(messages.at(-1)).toEqual(assistant('ok'));
  });

  test('a conversation starts with a user message: leading assistant turns are dropped with their results', () => {
    const { messages, stats } = sanitizeMessageSequence([
      call('a'),
      results(result('a')),
      assistant('hello'),
      user('hi'),
      assistant('yes'),
    ]);
    expect(messages).toEqual([user('hi'), assistant('yes')]);
    expect(stats.droppedLeadingAssistant).toBe(2);
    expect(stats.droppedOrphanResults).toBe(1);
  });

  test('consecutive normal user messages merge; injections, summaries and the task prompt stay separate', () => {
    const { messages, stats } = sanitizeMessageSequence([
      user('[TASK EXECUTION — Task ID: t1] do it', 'task_prompt'),
      user('[Conversation history summary — 3 earlier messages]\n...', 'summary'),
      user('first'),
      user('second'),
      user('[SYSTEM REMINDER] submit', 'injection'),
      user('third'),
      assistant('ok'),
    ]);
    expect(messages.map((m) => [m.role, m.kind ?? 'normal', m.content.length])).toEqual([
      ['user', 'task_prompt', 1],
      ['user', 'summary', 1],
      ['user', 'normal', 2],
      ['user', 'injection', 1],
      ['user', 'normal', 1],
      ['assistant', 'normal', 1],
    ]);
    expect(stats.mergedMessages).toBe(1);
  });

  test('text arriving with tool results stays after them (results first in a user turn)', () => {
    const { messages } = sanitizeMessageSequence([
      user('go'),
      call('a'),
      { role: 'user', content: [{ type: 'text', text: 'also, hurry' }, result('a')] },
    ]);
    assertValid(messages);
    expect(messages[2]!.content.map((b) => b.type)).toEqual(['tool_result', 'text']);
  });

  test('an injection after tool results is not merged into them', () => {
    const { messages } = sanitizeMessageSequence([
      user('go'),
      call('a'),
      results(result('a')),
      user('[SYSTEM REMINDER] call task_submit_review', 'injection'),
    ]);
    expect(messages).toHaveLength(4);
    expect(messages[3]!.kind).toBe('injection');
  });

  test('consecutive assistant messages merge when the first has no tool call', () => {
    const { messages, stats } = sanitizeMessageSequence([
      user('go'),
      assistant('[Earlier tool use, compacted] ...'),
      call('b', 'file_read', 'next'),
      results(result('b')),
    ]);
    assertValid(messages);
    expect(messages).toHaveLength(3);
    expect(messages[1]!.content.map((b) => b.type)).toEqual(['text', 'text', 'tool_use']);
    expect(stats.mergedMessages).toBe(1);
  });

  test('empty and whitespace-only text blocks and messages are removed', () => {
    const { messages, stats } = sanitizeMessageSequence([
      user('  '),
      user('hi'),
      {
        role: 'assistant',
        content: [
          { type: 'text', text: '' },
          { type: 'text', text: 'answer' },
        ],
      },
      { role: 'assistant', content: [] },
    ]);
    expect(messages).toEqual([user('hi'), assistant('answer')]);
    expect(stats.droppedEmptyMessages).toBe(2);
  });

  test('the input is never mutated', () => {
    const input = [user('go'), calls('a', 'b'), results(result('b'))];
    const copy = JSON.parse(JSON.stringify(input)) as ChatMessage[];
    sanitizeMessageSequence(input);
    expect(input).toEqual(copy);
  });
});
