import { createDemoProvider, DEMO_LABEL, DEMO_MODEL } from '../../activities/llm/demo';
import type { ChatMessage, ChatRequest } from '../../activities/llm/types';

const request = (messages: ChatMessage[]): ChatRequest => ({
  model: DEMO_MODEL,
  system: [],
  messages,
  tools: [],
  maxTokens: 1000,
});
const taskPrompt: ChatMessage = {
  role: 'user',
  kind: 'task_prompt',
  content: [{ type: 'text', text: '[TASK EXECUTION — Task ID: t1]\n\n# Plan the guide\n\nwrite it' }],
};
const result = (id: string): ChatMessage => ({
  role: 'user',
  content: [{ type: 'tool_result', toolUseId: id, content: 'ok' }],
});

describe('the offline demo model', () => {
  const demo = createDemoProvider();

  test('plans, checks and submits a task over three turns, labelled as a demo and streaming its text', async () => {
    const deltas: string[] = [];
    const first = await demo.chat(request([taskPrompt]), { onTextDelta: (t) => deltas.push(t) });
    expect(first.content[1]).toMatchObject({ type: 'tool_use', name: 'file_write', input: { path: 'plan.md' } });
    expect(deltas.join('')).toContain(DEMO_LABEL);
    const second = await demo.chat(request([taskPrompt, { role: 'assistant', content: first.content }, result('a')]));
    expect(second.content[1]).toMatchObject({ type: 'tool_use', name: 'file_read' });
    const third = await demo.chat(
      request([
        taskPrompt,
        { role: 'assistant', content: first.content },
        result('a'),
        { role: 'assistant', content: second.content },
        result('b'),
      ]),
    );
    expect(third.content[1]).toMatchObject({ type: 'tool_use', name: 'task_submit_review' });
    expect(JSON.stringify(third.content)).toContain('Plan the guide');
    expect(third.model).toBe(DEMO_MODEL);
  });

  test('answers a heartbeat with HEARTBEAT_OK and anything else with text, never calling tools', async () => {
    const heartbeat = await demo.chat(
      request([{ role: 'user', content: [{ type: 'text', text: 'This is your periodic heartbeat check-in.' }] }]),
    );
    expect(heartbeat.content).toEqual([{ type: 'text', text: 'HEARTBEAT_OK' }]);
    expect(heartbeat.stopReason).toBe('end_turn');
    const other = await demo.chat(
      request([{ role: 'user', content: [{ type: 'text', text: 'Reflect on the task.' }] }]),
    );
    expect(other.content.every((b) => b.type === 'text')).toBe(true);
  });

  test('stops at once when aborted', async () => {
    const controller = new AbortController();
    const pending = demo.chat(request([taskPrompt]), { signal: controller.signal });
    controller.abort(new Error('cancelled'));
    await expect(pending).rejects.toThrow('cancelled');
  });
});
