/**
 * The workflow-side tracing interceptors (bundled into the workflow code when tracing is on; not a
 * workflow). Temporal's OpenTelemetry interceptors, with three changes so that one task is one trace:
 *
 * - A signal or update handler joins the trace the workflow was started in, whatever the sender's
 *   context (an HTTP request, a CLI call, the Web UI): every decision on a task shows up in its trace.
 * - An agent's round (task round, chat run, heartbeat, reflection, sub-agent) runs inside an
 *   `invoke_agent {agentId}` span, the GenAI conventions' agent span, under the workflow's own span.
 * - Queries make no spans: clients poll `status` often, and a read changes nothing worth tracing.
 *
 * Spans leave the sandbox through a sink, never through a command, so none of this changes a
 * workflow's history or its replay.
 */
import type { Payload } from '@temporalio/common';
import { instrument, TRACE_HEADER } from '@temporalio/interceptors-opentelemetry/lib/instrumentation';
import {
  OpenTelemetryInboundInterceptor,
  OpenTelemetryInternalsInterceptor,
  OpenTelemetryOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry/lib/workflow';
import {
  workflowInfo,
  type Next,
  type QueryInput,
  type SignalInput,
  type UpdateInput,
  type WorkflowExecuteInput,
  type WorkflowInboundCallsInterceptor,
  type WorkflowInterceptors,
} from '@temporalio/workflow';

/** Workflow types that are one run of an agent's loop: each gets an `invoke_agent` span. */
const AGENT_ROUND_WORKFLOWS = new Set([
  'taskRoundWorkflow',
  'chatRunWorkflow',
  'heartbeatWorkflow',
  'postTaskReflectionWorkflow',
  'subagentWorkflow',
]);

class TaskTraceInboundInterceptor extends OpenTelemetryInboundInterceptor {
  /** The trace context the workflow was started with (absent until `execute` runs, or when started untraced). */
  private startContext?: Payload;

  override async execute(
    input: WorkflowExecuteInput,
    next: Next<WorkflowInboundCallsInterceptor, 'execute'>,
  ): Promise<unknown> {
    this.startContext = input.headers[TRACE_HEADER];
    const workflowType = workflowInfo().workflowType;
    const first = input.args[0] as { agentId?: unknown; sessionId?: unknown } | undefined;
    if (!AGENT_ROUND_WORKFLOWS.has(workflowType) || typeof first?.agentId !== 'string')
      return super.execute(input, next);
    const agentId = first.agentId;
    return super.execute(input, (inner) =>
      instrument({
        tracer: this.tracer,
        spanName: `invoke_agent ${agentId}`,
        fn: async (span) => {
          span.setAttributes({
            'gen_ai.operation.name': 'invoke_agent',
            'gen_ai.agent.id': agentId,
            'gen_ai.agent.name': agentId,
            ...(typeof first.sessionId === 'string' ? { 'gen_ai.conversation.id': first.sessionId } : {}),
            'durable_agents.workflow.type': workflowType,
          });
          return next(inner);
        },
      }),
    );
  }

  override handleSignal(
    input: SignalInput,
    next: Next<WorkflowInboundCallsInterceptor, 'handleSignal'>,
  ): Promise<void> {
    return super.handleSignal({ ...input, headers: this.inStartTrace(input.headers) }, next);
  }

  override handleUpdate(
    input: UpdateInput,
    next: Next<WorkflowInboundCallsInterceptor, 'handleUpdate'>,
  ): Promise<unknown> {
    return super.handleUpdate({ ...input, headers: this.inStartTrace(input.headers) }, next);
  }

  override validateUpdate(input: UpdateInput, next: Next<WorkflowInboundCallsInterceptor, 'validateUpdate'>): void {
    super.validateUpdate({ ...input, headers: this.inStartTrace(input.headers) }, next);
  }

  override handleQuery(
    input: QueryInput,
    next: Next<WorkflowInboundCallsInterceptor, 'handleQuery'>,
  ): Promise<unknown> {
    return next(input);
  }

  /** The headers with the workflow's start context in place of the sender's (kept when there is none). */
  private inStartTrace(headers: Record<string, Payload>): Record<string, Payload> {
    return this.startContext ? { ...headers, [TRACE_HEADER]: this.startContext } : headers;
  }
}

export const interceptors = (): WorkflowInterceptors => ({
  inbound: [new TaskTraceInboundInterceptor()],
  outbound: [new OpenTelemetryOutboundInterceptor()],
  internals: [new OpenTelemetryInternalsInterceptor()],
});
