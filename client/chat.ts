import { ApplicationFailure } from '@temporalio/common';
import {
  createGroup,
  groupMembers,
  groupTranscript,
  postGroupMessage,
  type GroupMessageView,
} from '../activities/mailbox/group';
import type { GroupMember } from '../workflows/rules/group';
import {
  agentWorkflowId,
  chatRunWorkflowId,
  mailboxQuery,
  type DeliverInput,
  type DeliverResult,
  type MailboxView,
} from '../workflows/agent-contract';
import type { AgentsClient } from './index';
import { commentOnTask, deliverToAgent, type CommentResult } from './deliver';
import { DeliveryRejectedError } from './errors';
import { compareProducer } from '../workflows/stream-contract';
import { tailStream, type StreamSource } from './streams';

export * from '../workflows/agent-contract';
export type { GroupMember } from '../workflows/rules/group';
export type { GroupMessageView } from '../activities/mailbox/group';

export { DeliveryRejectedError } from './errors';

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
    this.source = {
      db: agents.db,
      ...(options.connectionString ? { connectionString: options.connectionString } : {}),
    };
  }

  /**
   * Delivers an item to the agent's mailbox (update-with-start: an idle agent's workflow is started).
   * Resolves once the item is stored, with its id. Throws `UnknownAgentError` for an agent that does
   * not exist and `DeliveryRejectedError` for bad input (empty or oversized text, unknown channel or
   * task); either way nothing was stored.
   */
  async deliver(agentId: string, input: DeliverInput): Promise<DeliverResult> {
    return deliverToAgent(this.agents, agentId, input);
  }

  /**
   * Comments on a task: the task's agent gets a `comment` item (forwarded to its running round and
   * answered in the thread), and every other agent the text @mentions gets a `mention` item it answers
   * in the task's thread (@mentions always notify; the author is skipped; once per comment).
   * Throws `DeliveryRejectedError` for an unknown task or bad text.
   */
  async comment(taskId: string, text: string, from: DeliverInput['from']): Promise<CommentResult> {
    return commentOnTask(this.agents, taskId, text, from);
  }

  /**
   * Creates a group channel `group:<name>` with its members (agents must exist). Throws
   * `DeliveryRejectedError` for a bad or taken name, an unknown agent or a group without agents.
   */
  async createGroup(name: string, members: GroupMember[], createdBy = 'user'): Promise<void> {
    await rejecting(() => createGroup(this.agents.db, { name, createdBy, members }));
  }

  /**
   * Posts to a group as one of its members and delivers the message to the member agents by the group
   * rules (mentioned agents answer; with no mention every agent gets it and stays silent unless it has
   * something to add). Resolves once every delivery is stored; the answers appear in `groupTranscript`.
   */
  async postToGroup(name: string, from: GroupMember, text: string): Promise<GroupMessageView> {
    const outcome = await rejecting(() =>
      postGroupMessage(this.agents.db, this.agents.temporal, this.agents.taskQueue, { group: name, from, text }),
    );
    if (!outcome.posted) throw new DeliveryRejectedError(outcome.reason);
    return outcome.message;
  }

  /** The group's members and its transcript, oldest first (the last `limit` messages). */
  async group(name: string, limit?: number): Promise<{ members: GroupMember[]; messages: GroupMessageView[] }> {
    const members = await groupMembers(this.agents.db, name);
    if (!members) throw new DeliveryRejectedError(`unknown group ${JSON.stringify(name)}`);
    return { members, messages: await groupTranscript(this.agents.db, name, limit) };
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
  async *chat(
    agentId: string,
    text: string,
    options: { from?: { type: 'human'; id: string }; channel?: string; signal?: AbortSignal } = {},
  ): AsyncGenerator<ChatEvent, void, undefined> {
    const { itemId } = await this.deliver(agentId, {
      kind: 'chat',
      from: options.from ?? { type: 'human', id: 'user' },
      text,
      ...(options.channel ? { channel: options.channel } : {}),
    });
    yield* this.follow(agentId, itemId, options.signal);
  }

  /** Streams the answer to an item already delivered (e.g. after a client restart: from `afterSeq`). */
  async *follow(
    agentId: string,
    itemId: string,
    signal?: AbortSignal,
    afterSeq = 0,
  ): AsyncGenerator<ChatEvent, void, undefined> {
    const yielded = new Map<string, number>();
    const floors = new Map<string, { attempt: number; part: number }>();
    for await (const e of tailStream(this.source, chatRunWorkflowId(agentId, itemId), {
      afterSeq,
      ...(signal ? { signal } : {}),
    })) {
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
        yield {
          type: 'end',
          seq: e.seq,
          ...(typeof e.data?.stoppedBy === 'string' ? { stoppedBy: e.data.stoppedBy } : {}),
          ...(typeof e.data?.error === 'string' ? { error: e.data.error } : {}),
        };
      }
    }
  }
}

/** Runs a group operation, turning its refusals (ApplicationFailure `InvalidGroup`) into `DeliveryRejectedError`. */
async function rejecting<T>(op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (error) {
    if (error instanceof ApplicationFailure) throw new DeliveryRejectedError(error.message, error);
    throw error;
  }
}
