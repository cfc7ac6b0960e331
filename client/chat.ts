import { WithStartWorkflowOperation, WorkflowUpdateFailedError } from '@temporalio/client';
import { findAgent } from '../activities/store/agents';
import {
  agentWorkflowId,
  chatRunWorkflowId,
  deliverUpdate,
  mailboxQuery,
  type DeliverInput,
  type DeliverResult,
  type MailboxView,
} from '../workflows/agent-contract';
import { deliveryProblem } from '../workflows/rules/mailbox';
import type { agentWorkflow } from '../workflows/agent';
import { UnknownAgentError, type AgentsClient } from './index';
import { compareProducer } from '../workflows/stream-contract';
import { tailStream, type StreamSource } from './streams';

export * from '../workflows/agent-contract';

/** A delivery the agent refused (bad input, unknown task …): nothing was stored. */
export class DeliveryRejectedError extends Error {
  readonly type = 'DeliveryRejected';
  constructor(message: string, override readonly cause?: unknown) {
    super(message);
    this.name = 'DeliveryRejectedError';
  }
}

/** What `chat()` yields while the agent answers. */
export type ChatEvent =
  | { type: 'delta'; text: string; seq: number }
  /** A retried LLM call superseded `chars` characters already yielded for the current step: drop them. */
  | { type: 'rewind'; chars: number; seq: number }
  | { type: 'tool'; names: string[]; seq: number }
  | { type: 'end'; stoppedBy?: string; error?: string; seq: number };

/**
 * Conversations with agents: deliver items to an agent's mailbox, read its mailbox, chat with
 * streamed answers. Uses the AgentsClient's Temporal client and database, plus a PostgreSQL URL for
 * the stream follower's LISTEN connection.
 */
export class ConversationClient {
  private readonly source: StreamSource;

  constructor(
    readonly agents: AgentsClient,
    /** Without a connection string (an embedded database) the stream follower polls instead of LISTENing. */
    options: { connectionString?: string },
  ) {
    this.source = { db: agents.db, ...(options.connectionString ? { connectionString: options.connectionString } : {}) };
  }

  /**
   * Delivers an item to the agent's mailbox (update-with-start: an idle agent's workflow is started).
   * Resolves once the item is stored, with its id. Throws `UnknownAgentError` for an agent that does
   * not exist and `DeliveryRejectedError` for bad input (empty or oversized text, unknown channel or
   * task); either way nothing was stored.
   */
  async deliver(agentId: string, input: DeliverInput): Promise<DeliverResult> {
    const problem = deliveryProblem(input);
    if (problem) throw new DeliveryRejectedError(problem);
    if (!(await findAgent(this.agents.db, agentId))) throw new UnknownAgentError(agentId);
    const start = new WithStartWorkflowOperation<typeof agentWorkflow>('agentWorkflow', {
      workflowId: agentWorkflowId(agentId),
      taskQueue: this.agents.taskQueue,
      args: [{ agentId }],
      workflowIdConflictPolicy: 'USE_EXISTING',
    });
    try {
      return await this.agents.temporal.workflow.executeUpdateWithStart(deliverUpdate, { args: [input], startWorkflowOperation: start });
    } catch (error) {
      if (error instanceof WorkflowUpdateFailedError) throw new DeliveryRejectedError(innermostMessage(error), error);
      throw error;
    }
  }

  /** The agent's mailbox: items with their triage state, and what it is focused on. */
  async mailbox(agentId: string): Promise<MailboxView> {
    return this.agents.temporal.workflow.getHandle(agentWorkflowId(agentId)).query(mailboxQuery);
  }

  /**
   * Sends a chat message and streams the answer: yields text deltas as the model produces them, a
   * `rewind` when a retried call supersedes text already yielded, tool calls, and `end`. The channel's
   * session is reused across messages (default channel: the sender's direct channel with the agent).
   */
  async *chat(agentId: string, text: string, options: { from?: { type: 'human'; id: string }; channel?: string; signal?: AbortSignal } = {}): AsyncGenerator<ChatEvent, void, undefined> {
    const { itemId } = await this.deliver(agentId, { kind: 'chat', from: options.from ?? { type: 'human', id: 'user' }, text, ...(options.channel ? { channel: options.channel } : {}) });
    yield* this.follow(agentId, itemId, options.signal);
  }

  /** Streams the answer to an item already delivered (e.g. after a client restart: from `afterSeq`). */
  async *follow(agentId: string, itemId: string, signal?: AbortSignal, afterSeq = 0): AsyncGenerator<ChatEvent, void, undefined> {
    const yielded = new Map<string, number>();
    const floors = new Map<string, { attempt: number; part: number }>();
    for await (const e of tailStream(this.source, chatRunWorkflowId(agentId, itemId), { afterSeq, ...(signal ? { signal } : {}) })) {
      const step = e.stepKey ?? '';
      const floor = floors.get(step);
      if (e.kind === 'delta' && e.text && (!floor || compareProducer(e, floor) >= 0)) {
        yielded.set(step, (yielded.get(step) ?? 0) + e.text.length);
        yield { type: 'delta', text: e.text, seq: e.seq };
      } else if (e.kind === 'rewind') {
        yield { type: 'rewind', chars: yielded.get(step) ?? 0, seq: e.seq };
        yielded.set(step, 0);
        floors.set(step, { attempt: e.attempt, part: e.part });
      } else if (e.kind === 'step-end' && Array.isArray(e.data?.toolCalls) && e.data.toolCalls.length > 0) {
        yield { type: 'tool', names: e.data.toolCalls as string[], seq: e.seq };
      } else if (e.kind === 'end') {
        yield { type: 'end', seq: e.seq, ...(typeof e.data?.stoppedBy === 'string' ? { stoppedBy: e.data.stoppedBy } : {}), ...(typeof e.data?.error === 'string' ? { error: e.data.error } : {}) };
      }
    }
  }
}

/** The message of the innermost cause: an activity's "unknown task …" rather than "Activity task failed". */
function innermostMessage(error: Error): string {
  let e: Error = error;
  while (e.cause instanceof Error) e = e.cause;
  return e.message;
}
