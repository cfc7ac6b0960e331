/**
 * Spans made inside activities, through OpenTelemetry's global API: no-ops until the worker registers
 * a tracer provider (worker/tracing.ts), so activities never depend on whether tracing is on.
 */
import { context, SpanKind, SpanStatusCode, trace, type Context } from '@opentelemetry/api';

/** Context key of the conversation (session) an activity works on, for its LLM and tool spans. */
const CONVERSATION_KEY = Symbol.for('durable-agents.gen_ai.conversation.id');

export function withConversation(ctx: Context, conversationId: string): Context {
  return ctx.setValue(CONVERSATION_KEY, conversationId);
}

/** The conversation the running activity works on, when its input named a session. */
export function activeConversation(): string | undefined {
  const value = context.active().getValue(CONVERSATION_KEY);
  return typeof value === 'string' ? value : undefined;
}

/** What a tool call ended as, for its span: `kind` and, when it ran, whether it failed. */
interface ToolOutcome {
  kind: string;
  tool?: string;
  isError?: boolean;
}

/**
 * Runs one tool call inside an `execute_tool {tool}` span (GenAI conventions). The tool's name is
 * known once its call is loaded, so the span is renamed when the outcome names it. A tool that
 * reports an error result ends with `error.type` = `tool_error`; one that throws, with the exception.
 */
export async function inToolSpan<T extends ToolOutcome>(
  call: { toolCallId: string; tool?: string },
  run: () => Promise<T>,
): Promise<T> {
  const tracer = trace.getTracer('durable-agents');
  const conversation = activeConversation();
  return tracer.startActiveSpan(
    call.tool ? `execute_tool ${call.tool}` : 'execute_tool',
    {
      kind: SpanKind.INTERNAL,
      attributes: {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.call.id': call.toolCallId,
        'gen_ai.tool.type': 'function',
        ...(call.tool ? { 'gen_ai.tool.name': call.tool } : {}),
        ...(conversation ? { 'gen_ai.conversation.id': conversation } : {}),
      },
    },
    async (span) => {
      try {
        const outcome = await run();
        if (outcome.tool) {
          span.updateName(`execute_tool ${outcome.tool}`);
          span.setAttribute('gen_ai.tool.name', outcome.tool);
        }
        span.setAttribute(
          'durable_agents.tool.outcome',
          outcome.kind === 'done' ? (outcome.isError ? 'error' : 'ok') : outcome.kind,
        );
        if (outcome.isError) {
          span.setAttribute('error.type', 'tool_error');
          span.setStatus({ code: SpanStatusCode.ERROR });
        }
        return outcome;
      } catch (error) {
        span.recordException(error as Error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
        span.setAttribute('error.type', (error as Error).name);
        throw error;
      } finally {
        span.end();
      }
    },
  );
}
