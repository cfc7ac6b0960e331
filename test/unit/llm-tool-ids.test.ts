import { withSessionUniqueToolIds } from '../../activities/llm/tool-ids';
import type { ChatMessage, ContentBlock } from '../../activities/llm/types';

const call = (id: string): ContentBlock => ({ type: 'tool_use', id, name: 'file_read', input: {} });
const earlier: ChatMessage[] = [{ role: 'assistant', content: [call('call_0'), call('call_0_a1-t1_1')] }];

describe('tool call ids unique within a session (the ledger keys calls by them)', () => {
  test('fresh ids pass unchanged; the same object comes back', () => {
    const block = call('toolu_new');
    expect(withSessionUniqueToolIds([block], earlier, 'a1-t2')[0]).toBe(block);
  });

  test('an id used earlier in the session, a missing id and a repeat within the reply are renamed, each distinct', () => {
    const out = withSessionUniqueToolIds(
      [{ type: 'text', text: 'two reads' }, call('call_0'), call(''), call('x'), call('x')],
      earlier,
      'a1-t1',
    );
    const ids = out.flatMap((b) => (b.type === 'tool_use' ? [b.id] : []));
    // call_0_a1-t1_1 was taken already: a counter settles the clash.
    expect(ids).toEqual(['call_0_a1-t1_1_2', 'call_a1-t1_2', 'x', 'x_a1-t1_4']);
    expect(new Set(ids).size).toBe(4);
    expect(out[0]).toEqual({ type: 'text', text: 'two reads' });
  });
});
