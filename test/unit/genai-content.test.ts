import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { ChatResult, ChatRouter } from '../../activities/llm/types';
import { captureContentFromEnv } from '../../worker/genai-conventions';
import { Telemetry } from '../../worker/telemetry';

/**
 * Content capture on `chat` spans, as OpenTelemetry's GenAI conventions shape it, through the router
 * wrapper the worker uses: off unless OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.
 */
describe('GenAI message content on chat spans', () => {
  const answer: ChatResult = {
    content: [
      { type: 'text', text: 'reading it' },
      { type: 'tool_use', id: 'call-2', name: 'file_read', input: { path: 'plan.md' } },
    ],
    stopReason: 'tool_use',
    usage: { inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 },
    model: 'fake-model',
    provider: 'anthropic',
  };
  const router: ChatRouter = {
    candidates: () => [{ provider: 'anthropic', model: 'fake-model' }],
    chat: async () => answer,
  };
  const request = {
    system: [{ text: 'You are the scribe.', cacheBreakpoint: true }],
    messages: [
      { role: 'user' as const, content: [{ type: 'text' as const, text: 'write plan.md' }] },
      {
        role: 'assistant' as const,
        content: [{ type: 'tool_use' as const, id: 'call-1', name: 'file_write', input: { path: 'plan.md' } }],
      },
      {
        role: 'user' as const,
        content: [{ type: 'tool_result' as const, toolUseId: 'call-1', content: 'wrote 12 bytes' }],
      },
    ],
    tools: [],
  };

  const spanOf = async (captureContent: boolean) => {
    const exporter = new InMemorySpanExporter();
    const telemetry = new Telemetry({
      spanProcessor: new SimpleSpanProcessor(exporter),
      metrics: false,
      captureContent,
    });
    await telemetry.instrumentRouter(router).chat(request, {});
    await telemetry.flush();
    const span = exporter.getFinishedSpans().find((s) => s.name.startsWith('chat '))!;
    await telemetry.shutdown();
    return span;
  };

  test('switched on: system instructions, input and output messages in the conventions shape', async () => {
    const span = await spanOf(true);
    expect(JSON.parse(String(span.attributes['gen_ai.system_instructions']))).toEqual([
      { type: 'text', content: 'You are the scribe.' },
    ]);
    expect(JSON.parse(String(span.attributes['gen_ai.input.messages']))).toEqual([
      { role: 'user', parts: [{ type: 'text', content: 'write plan.md' }] },
      {
        role: 'assistant',
        parts: [{ type: 'tool_call', id: 'call-1', name: 'file_write', arguments: { path: 'plan.md' } }],
      },
      { role: 'tool', parts: [{ type: 'tool_call_response', id: 'call-1', response: 'wrote 12 bytes' }] },
    ]);
    expect(JSON.parse(String(span.attributes['gen_ai.output.messages']))).toEqual([
      {
        role: 'assistant',
        parts: [
          { type: 'text', content: 'reading it' },
          { type: 'tool_call', id: 'call-2', name: 'file_read', arguments: { path: 'plan.md' } },
        ],
        finish_reason: 'tool_call',
      },
    ]);
  });

  test('off by default: no content on the span', async () => {
    const span = await spanOf(false);
    for (const key of ['gen_ai.system_instructions', 'gen_ai.input.messages', 'gen_ai.output.messages'])
      expect([key, span.attributes[key]]).toEqual([key, undefined]);
    expect(captureContentFromEnv({})).toBe(false);
    expect(captureContentFromEnv({ OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true' })).toBe(true);
    expect(captureContentFromEnv({ OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'false' })).toBe(false);
    // Only the conventions' spelling: another word is refused at start, never read as off.
    expect(() => captureContentFromEnv({ OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: '1' })).toThrow(
      'OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="1" is not allowed: "true" or "false", or unset',
    );
  });
});
