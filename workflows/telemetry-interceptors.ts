/**
 * The workflow-side tracing interceptors (bundled into the workflow code when tracing is on; not a
 * workflow). Temporal's OpenTelemetry interceptors, with these changes so that one task is one trace,
 * and one chat message is one trace:
 *
 * - A signal or update handler joins the trace the workflow was started in, whatever the sender's
 *   context (an HTTP request, a CLI call, the Web UI): every decision on a task shows up in its trace.
 * - The agent's own workflow, which lives as long as the agent and hosts every conversation, is the
 *   exception: it holds no span of its own (one open for months would be exported only when it ends,
 *   and every chat's spans would hang under it, in the trace of whoever started it). Each delivery is
 *   handled in its sender's trace (the HTTP request that posted a chat message, the task whose agent
 *   sent a message), and the chat run that answers it is started in that delivery's trace.
 * - An agent's round (task round, chat run, heartbeat, reflection, sub-agent) runs inside an
 *   `invoke_agent {agentId}` span, the GenAI conventions' agent span, under the workflow's own span.
 * - Queries make no spans: clients poll `status` often, and a read changes nothing worth tracing.
 *
 * Spans leave the sandbox through a sink, never through a command, so none of this changes a
 * workflow's history or its replay.
 */
import * as otel from '@opentelemetry/api';
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
  type StartChildWorkflowExecutionInput,
  type UpdateInput,
  type WorkflowExecuteInput,
  type WorkflowInboundCallsInterceptor,
  type WorkflowInterceptors,
  type WorkflowOutboundCallsInterceptor,
} from '@temporalio/workflow';

/** Workflow types that are one run of an agent's loop: each gets an `invoke_agent` span. */
const AGENT_ROUND_WORKFLOWS = new Set([
  'taskRoundWorkflow',
  'chatRunWorkflow',
  'heartbeatWorkflow',
  'postTaskReflectionWorkflow',
  'subagentWorkflow',
]);

/** The agent's long-lived workflow (workflows/agent.ts), and the child that answers one of its deliveries. */
const AGENT_WORKFLOW = 'agentWorkflow';
const CHAT_RUN_WORKFLOW = 'chatRunWorkflow';
const DELIVER_UPDATE = 'deliver';
/** Deliveries whose answer has not started yet, kept at most (the oldest go first; their chat run starts untraced). */
const PENDING_DELIVERIES_MAX = 1_000;

/** The trace context of each queued delivery, until the chat run that answers it starts. */
class DeliveryContexts {
  private readonly byItem = new Map<string, otel.Context>();

  remember(itemId: string, context: otel.Context): void {
    this.byItem.set(itemId, context);
    if (this.byItem.size > PENDING_DELIVERIES_MAX) this.byItem.delete(this.byItem.keys().next().value!);
  }

  take(itemId: string): otel.Context | undefined {
    const context = this.byItem.get(itemId);
    this.byItem.delete(itemId);
    return context;
  }
}

const isAgentWorkflow = (): boolean => workflowInfo().workflowType === AGENT_WORKFLOW;

class TaskTraceInboundInterceptor extends OpenTelemetryInboundInterceptor {
  /** The trace context the workflow was started with (absent until `execute` runs, or when started untraced). */
  private startContext?: Payload;

  constructor(private readonly deliveries: DeliveryContexts) {
    super();
  }

  override async execute(
    input: WorkflowExecuteInput,
    next: Next<WorkflowInboundCallsInterceptor, 'execute'>,
  ): Promise<unknown> {
    const workflowType = workflowInfo().workflowType;
    if (workflowType === AGENT_WORKFLOW) return next(input);
    this.startContext = input.headers[TRACE_HEADER];
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
    return super.handleSignal(
      isAgentWorkflow() ? input : { ...input, headers: this.inStartTrace(input.headers) },
      next,
    );
  }

  override handleUpdate(
    input: UpdateInput,
    next: Next<WorkflowInboundCallsInterceptor, 'handleUpdate'>,
  ): Promise<unknown> {
    if (!isAgentWorkflow()) return super.handleUpdate({ ...input, headers: this.inStartTrace(input.headers) }, next);
    if (input.name !== DELIVER_UPDATE) return super.handleUpdate(input, next);
    // In the sender's trace; the chat run that answers this delivery starts in it too.
    return super.handleUpdate(input, async (delivery) => {
      const result = (await next(delivery)) as { itemId?: unknown; status?: unknown } | undefined;
      if (typeof result?.itemId === 'string' && result.status === 'queued')
        this.deliveries.remember(result.itemId, otel.context.active());
      return result;
    });
  }

  override validateUpdate(input: UpdateInput, next: Next<WorkflowInboundCallsInterceptor, 'validateUpdate'>): void {
    super.validateUpdate(isAgentWorkflow() ? input : { ...input, headers: this.inStartTrace(input.headers) }, next);
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

/** Starts a delivery's chat run in the delivery's trace rather than in the agent workflow's (it has none). */
class DeliveryTraceOutboundInterceptor extends OpenTelemetryOutboundInterceptor {
  constructor(private readonly deliveries: DeliveryContexts) {
    super();
  }

  override startChildWorkflowExecution(
    input: StartChildWorkflowExecutionInput,
    next: Next<WorkflowOutboundCallsInterceptor, 'startChildWorkflowExecution'>,
  ): ReturnType<OpenTelemetryOutboundInterceptor['startChildWorkflowExecution']> {
    const itemId = (input.options.args?.[0] as { itemId?: unknown } | undefined)?.itemId;
    const delivery =
      input.workflowType === CHAT_RUN_WORKFLOW && typeof itemId === 'string' && isAgentWorkflow()
        ? this.deliveries.take(itemId)
        : undefined;
    if (!delivery) return super.startChildWorkflowExecution(input, next);
    return otel.context.with(delivery, () => super.startChildWorkflowExecution(input, next));
  }
}

export const interceptors = (): WorkflowInterceptors => {
  const deliveries = new DeliveryContexts();
  return {
    inbound: [new TaskTraceInboundInterceptor(deliveries)],
    outbound: [new DeliveryTraceOutboundInterceptor(deliveries)],
    internals: [new OpenTelemetryInternalsInterceptor()],
  };
};
