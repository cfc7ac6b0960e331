import type { ChatMessage } from '../../activities/llm/types';
import { prepareMessages, type PrepareMessagesOptions } from '../../activities/context/prepare-messages';
import { createMemorySummaryCache, prefixHashes, type SummaryCache } from '../../activities/context/summary-cache';
import { resetCalibration } from '../../activities/context/tokens';

const MODEL = 'claude-sonnet-4-5';
const user = (text: string, kind?: ChatMessage['kind']): ChatMessage => ({
  role: 'user',
  content: [{ type: 'text', text }],
  ...(kind ? { kind } : {}),
});
const taskPrompt = user(
  '[TASK EXECUTION — Task ID: t1]\nMigrate the invoices table. You MUST call task_submit_review when done.',
  'task_prompt',
);
const opts = (extra: Partial<PrepareMessagesOptions> = {}): PrepareMessagesOptions => ({
  contextWindow: 200_000,
  modelMaxOutput: 8_000,
  systemTokens: 5_000,
  toolTokens: 1_000,
  model: MODEL,
  ...extra,
});

/** Appends one tool iteration (assistant tool call + its result), as the task harness does. */
function step(messages: ChatMessage[], i: number): void {
  messages.push({
    role: 'assistant',
    content: [
      { type: 'text', text: `Step ${i}: reading the next file.` },
      { type: 'tool_use', id: `call_${i}`, name: 'file_read', input: { path: `src/f${i}.ts` } },
    ],
  });
  messages.push({
    role: 'user',
    content: [{ type: 'tool_result', toolUseId: `call_${i}`, content: `export const f${i} = ${i};` }],
  });
}

/** A counting summariser. */
function summariser() {
  const prompts: string[] = [];
  return {
    prompts,
    summarize: async (prompt: string) => {
      prompts.push(prompt);
      return `Summary #${prompts.length}: the agent read files.`;
    },
  };
}

afterEach(() => resetCalibration());

describe('summary reuse across calls (stage 1, our cost fix)', () => {
  test('a 50-call tool loop past 60 messages calls the summariser once per 20 new messages, not once per call', async () => {
    const cache = createMemorySummaryCache();
    const s = summariser();
    const messages: ChatMessage[] = [taskPrompt];
    let calls = 0;
    let stage1Calls = 0;
    for (let i = 0; i < 50; i++) {
      step(messages, i);
      const out = await prepareMessages(messages, opts({ summarize: s.summarize, summaryCache: cache }));
      calls += out.stats.summarizerCalls;
      if (out.stats.stagesApplied.includes('count_summary')) stage1Calls += 1;
    }
    // 101 messages at the end: stage 1 ran on every call from 61 messages on (21 calls)…
    expect(stage1Calls).toBe(21);
    // …but the head only moved at 60 (cut 20), 80 (cut 40) and 100 (cut 60) work messages.
    expect(calls).toBe(3);
    expect(s.prompts).toHaveLength(3);
    expect(cache.entries.size).toBe(3);
  });

  test('without a cache the same loop pays a summariser call on every call past 60 messages', async () => {
    const s = summariser();
    const messages: ChatMessage[] = [taskPrompt];
    let calls = 0;
    for (let i = 0; i < 50; i++) {
      step(messages, i);
      calls += (await prepareMessages(messages, opts({ summarize: s.summarize }))).stats.summarizerCalls;
    }
    expect(calls).toBe(21);
  });

  test('the message prefix up to the previous breakpoint is byte-identical except when the head moves', async () => {
    const cache = createMemorySummaryCache();
    const s = summariser();
    const messages: ChatMessage[] = [taskPrompt];
    let previous: { messages: ChatMessage[]; breakpoint: number } | undefined;
    const misses: number[] = [];
    for (let i = 0; i < 50; i++) {
      step(messages, i);
      const out = await prepareMessages(messages, opts({ summarize: s.summarize, summaryCache: cache }));
      if (previous) {
        const same =
          JSON.stringify(out.messages.slice(0, previous.breakpoint + 1)) ===
          JSON.stringify(previous.messages.slice(0, previous.breakpoint + 1));
        if (!same) misses.push(messages.length);
      }
      previous = { messages: out.messages, breakpoint: out.messageCacheBreakpoint! };
    }
    // Misses only where the fold moved: the first fold (61 messages) and the two advances.
    expect(misses).toEqual([61, 81, 101]);
  });

  test('a grown head is summarised incrementally: previous summary plus only the newer messages', async () => {
    const cache = createMemorySummaryCache();
    const s = summariser();
    const messages: ChatMessage[] = [taskPrompt];
    for (let i = 0; i < 40; i++) step(messages, i); // 81 messages: cut 40
    await prepareMessages(messages.slice(0, 61), opts({ summarize: s.summarize, summaryCache: cache })); // cut 20
    const out = await prepareMessages(messages, opts({ summarize: s.summarize, summaryCache: cache }));
    expect(out.stats.summariesExtended).toBe(1);
    expect(s.prompts).toHaveLength(2);
    expect(s.prompts[1]).toContain('[previous summary]');
    expect(s.prompts[1]).toContain('Summary #1');
    expect(s.prompts[1]).toContain('Step 10:'); // work message 20 = step 10's call
    expect(s.prompts[1]).not.toContain('Step 9:');
    // The summary counts every message it stands for.
    const text =
      out.messages[1]!.content[0]!.type === 'text' ? (out.messages[1]!.content[0] as { text: string }).text : '';
    expect(text).toMatch(/^\[Conversation history summary — 40 earlier messages\]/);
  });

  test('an exact hit is byte-identical and makes no summariser call', async () => {
    const cache = createMemorySummaryCache();
    const s = summariser();
    const messages: ChatMessage[] = [taskPrompt];
    for (let i = 0; i < 31; i++) step(messages, i);
    const first = await prepareMessages(messages, opts({ summarize: s.summarize, summaryCache: cache }));
    const again = await prepareMessages(
      structuredClone(messages),
      opts({ summarize: s.summarize, summaryCache: cache }),
    );
    expect(again.stats.summarizerCalls).toBe(0);
    expect(again.stats.summariesReused).toBe(1);
    expect(again.stats.summarySource).toBe('cache');
    expect(JSON.stringify(again.messages)).toBe(JSON.stringify(first.messages));
  });

  test('a changed early message changes the key: the stale summary is not reused', async () => {
    const cache = createMemorySummaryCache();
    const s = summariser();
    const messages: ChatMessage[] = [taskPrompt];
    for (let i = 0; i < 31; i++) step(messages, i);
    await prepareMessages(messages, opts({ summarize: s.summarize, summaryCache: cache }));
    const edited = structuredClone(messages);
    edited[2] = { role: 'user', content: [{ type: 'tool_result', toolUseId: 'call_0', content: 'different' }] };
    const out = await prepareMessages(edited, opts({ summarize: s.summarize, summaryCache: cache }));
    expect(out.stats.summariesReused).toBe(0);
    expect(out.stats.summarizerCalls).toBe(1);
    expect(prefixHashes(edited.slice(1, 21)).at(-1)).not.toBe(prefixHashes(messages.slice(1, 21)).at(-1));
  });

  test('a failing cache is ignored: the summary is made as without one', async () => {
    const broken: SummaryCache = {
      candidates: async () => {
        throw new Error('db down');
      },
      store: async () => {
        throw new Error('db down');
      },
    };
    const s = summariser();
    const messages: ChatMessage[] = [taskPrompt];
    for (let i = 0; i < 31; i++) step(messages, i);
    const out = await prepareMessages(messages, opts({ summarize: s.summarize, summaryCache: broken }));
    expect(out.stats.summarySource).toBe('llm');
    expect(out.messages[1]!.kind).toBe('summary');
  });
});
