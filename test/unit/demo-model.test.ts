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

  test("answers a person's chat by echoing it, also with the harness's [Current time] note after it", async () => {
    const text = (role: 'user' | 'assistant', t: string): ChatMessage => ({
      role,
      content: [{ type: 'text', text: t }],
    });
    const now = text('user', '[Current time: 2026-12-01 12:00 UTC]');
    const first = await demo.chat(request([text('user', 'hello scribe, can you hear me?'), now]));
    expect(first.content).toEqual([
      {
        type: 'text',
        text: `${DEMO_LABEL}\nYou said: "hello scribe, can you hear me?" (message 1 in this conversation). A real model would answer here; the offline demo only echoes.`,
      },
    ]);
    const second = await demo.chat(
      request([
        text('user', 'hello scribe, can you hear me?'),
        { role: 'assistant', content: first.content },
        text('user', 'what did I say first?'),
        now,
      ]),
    );
    expect((second.content[0] as { text: string }).text).toContain(
      'You said: "what did I say first?" (message 2 in this conversation). Your first message here was "hello scribe, can you hear me?".',
    );
    // A harness prompt (in brackets) after the chat is not answered as chat.
    const report = await demo.chat(
      request([
        text('user', 'hello'),
        { role: 'assistant', content: first.content },
        text('user', '[DAILY REPORT] write it'),
        now,
      ]),
    );
    expect((report.content[0] as { text: string }).text).toContain('Nothing to add from the offline demo model');
  });

  test('stops at once when aborted', async () => {
    const controller = new AbortController();
    const pending = demo.chat(request([taskPrompt]), { signal: controller.signal });
    controller.abort(new Error('cancelled'));
    await expect(pending).rejects.toThrow('cancelled');
  });
});
