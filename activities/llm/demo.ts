import type { ChatCallbacks, ChatRequest, ChatResult, ContentBlock, LlmProvider } from './types';
import { TASK_PROMPT_HEADER } from '../../prompts/task';

export const DEMO_MODEL = 'demo-offline';
export const DEMO_LABEL =
  '[offline demo model — not a real LLM; set ANTHROPIC_API_KEY or OPENAI_API_KEY for a real one]';
/** Delay between streamed words, so a person can watch progress in the CLI and the Temporal UI. */
export const DEMO_WORD_DELAY_MS = 40;

/**
 * A scripted, clearly labelled stand-in model used when no provider key is configured, so the whole
 * workflow (tool calls, files, review) can be seen without network access. It plans from the
 * conversation: write a notes file, read it back, then submit for review.
 */
export function createDemoProvider(): LlmProvider {
  return {
    name: 'demo',
    kind: 'demo',
    async chat(request: ChatRequest, callbacks: ChatCallbacks = {}): Promise<ChatResult> {
      const toolResults = request.messages.flatMap((m) => m.content).filter((b) => b.type === 'tool_result').length;
      const taskText = firstUserText(request.messages.map((m) => m.content));
      if (!taskText.startsWith(TASK_PROMPT_HEADER)) {
        // Heartbeats, reflections, reports: answer in one turn without tools.
        const reply = /heartbeat/i.test(taskText)
          ? 'HEARTBEAT_OK'
          : (chatReply(request.messages) ?? `${DEMO_LABEL}\nNothing to add from the offline demo model.`);
        await streamWords(reply, callbacks);
        return {
          content: [{ type: 'text', text: reply }],
          stopReason: 'end_turn',
          usage: estimateUsage(request, reply),
          model: DEMO_MODEL,
          provider: 'demo',
        };
      }
      const title = /^# (.+)$/m.exec(taskText)?.[1] ?? 'the task';
      let text: string;
      const blocks: ChatResult['content'] = [];
      if (toolResults === 0) {
        text = `${DEMO_LABEL}\nI'll start by writing my plan for "${title}" to plan.md in my workspace.`;
        blocks.push(
          { type: 'text', text },
          {
            type: 'tool_use',
            id: `demo_${request.messages.length}_write`,
            name: 'file_write',
            input: {
              path: 'plan.md',
              content: `# Plan for ${title}\n\n1. Understand the request.\n2. Produce the result.\n3. Submit it for review.\n`,
            },
          },
        );
      } else if (toolResults === 1) {
        text = `${DEMO_LABEL}\nPlan written. Reading it back to check it.`;
        blocks.push(
          { type: 'text', text },
          {
            type: 'tool_use',
            id: `demo_${request.messages.length}_read`,
            name: 'file_read',
            input: { path: 'plan.md' },
          },
        );
      } else {
        text = `${DEMO_LABEL}\nThe plan is in place; submitting the work for review.`;
        blocks.push(
          { type: 'text', text },
          {
            type: 'tool_use',
            id: `demo_${request.messages.length}_submit`,
            name: 'task_submit_review',
            input: {
              summary: `Wrote and checked plan.md for "${title}" (offline demo model).`,
              deliverables: ['plan.md'],
            },
          },
        );
      }
      await streamWords(text, callbacks);
      return {
        content: blocks,
        stopReason: 'tool_use',
        usage: estimateUsage(request, JSON.stringify(blocks)),
        model: DEMO_MODEL,
        provider: 'demo',
      };
    },
  };
}

/** Streams `text` word by word so followers see progress; stops at once when aborted. */
async function streamWords(text: string, callbacks: ChatCallbacks): Promise<void> {
  for (const word of text.split(/(?<= )/)) {
    if (callbacks.signal?.aborted) throw callbacks.signal.reason ?? new Error('aborted');
    await sleep(DEMO_WORD_DELAY_MS, callbacks.signal);
    callbacks.onTextDelta?.(word);
    callbacks.onStreamEvent?.();
  }
}

/** A rough token count (4 characters a token): the demo model has no tokenizer and costs nothing. */
function estimateUsage(request: ChatRequest, output: string): ChatResult['usage'] {
  return {
    inputTokens: Math.ceil(JSON.stringify(request).length / 4),
    outputTokens: Math.ceil(output.length / 4),
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
  };
}

/**
 * A person chatting: echo their last message with its place in the conversation (and their first
 * one), which shows the channel's session being reused. What a person wrote is the user text that is
 * not a harness note in brackets: the harness appends `[Current time: …]` after the conversation, and
 * wraps its own prompts (reflections, reports) in brackets; none of those is answered as chat.
 */
function chatReply(messages: ChatRequest['messages']): string | undefined {
  const said = messages
    .filter((m) => m.role === 'user')
    .flatMap((m) => m.content.filter((b) => b.type === 'text').map((b) => b.text.trim()))
    .filter((text) => text !== '' && !text.startsWith('['));
  const last = said.at(-1);
  if (last === undefined) return undefined;
  const lastHumanMessage = messages.findLastIndex(
    (m) => m.role === 'user' && m.content.some((b) => b.type === 'text' && b.text.trim() === last),
  );
  // A harness prompt after the person's last message (a report, a reflection) is not a chat turn.
  const after = messages.slice(lastHumanMessage + 1);
  if (after.some((m) => m.role === 'assistant')) return undefined;
  const first = said.length > 1 ? ` Your first message here was "${said[0]!.slice(0, 200)}".` : '';
  return `${DEMO_LABEL}\nYou said: "${last.slice(0, 200)}" (message ${said.length} in this conversation).${first} A real model would answer here; the offline demo only echoes.`;
}

function firstUserText(contents: ContentBlock[][]): string {
  for (const content of contents) {
    for (const block of content) if (block.type === 'text') return block.text;
  }
  return '';
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason ?? new Error('aborted'));
      },
      { once: true },
    );
  });
}
