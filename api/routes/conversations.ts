/** `/v1/agents/:agentId/chat` and the mailbox: chat with an agent and stream its answer, resume it, read the mailbox. */
import { WorkflowNotFoundError } from '@temporalio/client';
import { ConversationClient, DeliveryRejectedError } from '../../client/chat';
import type { StreamEvent } from '../../client/streams';
import { chatRunWorkflowId, directChannel } from '../../workflows/agent-contract';
import { replayedChat, scopedIdempotencyKey } from '../chat-idempotency';
import { ApiError } from '../errors';
import type { ApiContext } from '../route-kit';
import * as S from '../schemas';
import { openSse, resumeAfter, streamEnded } from '../sse';
import { followChatAnswer, runStreamEndSeq, type ChatStreamSettled } from '../streams';

export function registerConversationRoutes({
  route,
  client,
  db,
  databaseUrl,
  runStreams,
  withTimeout,
  requireAgent,
}: ApiContext): void {
  const conversations = new ConversationClient(client, databaseUrl ? { connectionString: databaseUrl } : {});
  const streamSource = { db, ...(databaseUrl ? { connectionString: databaseUrl } : {}) };
  /**
   * Follows a chat answer to its run's `end` event, or until the item it answers is settled with nothing
   * more to send (a run stopped from outside writes no `end`): then the closing `end` says so.
   */
  const followRun = async (
    agentId: string,
    itemId: string,
    afterSeq: number,
    deliver: (e: StreamEvent) => void,
    signal: AbortSignal,
  ): Promise<{ endData?: unknown }> => {
    const outcome = await followChatAnswer(
      streamSource,
      { agentId, itemId },
      chatRunWorkflowId(agentId, itemId),
      afterSeq,
      deliver,
      signal,
    );
    return outcome.ended === 'settled' ? { endData: settledEndData(outcome.settled) } : {};
  };

  route({
    method: 'POST',
    url: '/v1/agents/:agentId/chat',
    scope: 'service',
    summary:
      "Send a chat message to the agent's mailbox and stream the answer (Server-Sent Events): first an `item` event `{ itemId, status, channel }`, then the chat run's stream (`step-start`, `delta` with `text`, `rewind`, `step-end`, `end`), ids = sequence numbers. Resume with `GET /v1/agents/{agentId}/chat/{itemId}/stream` and `Last-Event-ID`. `from` defaults to the token's name as a human; the channel to that sender's direct channel. With an `Idempotency-Key` header, a POST retried with the same key (same agent, same token name) starts no second turn: it gets the first one's item (`replayed: true`) and its answer, after `Last-Event-ID` if sent; the key reused for another message answers 422 `idempotency_key_reused`",
    params: S.AgentIdParams,
    body: S.ChatBody,
    stream: true,
    handler: async ({ params, body, principal, request, reply }) => {
      await requireAgent(params.agentId, principal);
      // A message in another agent's name stays inside the caller's organisation too.
      if (body.from?.type === 'agent') await requireAgent(body.from.id, principal);
      const from = body.from ?? { type: 'human' as const, id: principal.name };
      const idempotencyKey = scopedIdempotencyKey(request, principal);
      const message = { kind: 'chat', from, channel: body.channel ?? directChannel(from), text: body.text };
      // A retry of a POST whose item is stored: that item, without asking the agent again.
      let delivered = idempotencyKey ? await replayedChat(db, params.agentId, idempotencyKey, message) : undefined;
      delivered ??= await withTimeout('delivering the chat message', () =>
        conversations.deliver(params.agentId, {
          kind: 'chat',
          from,
          text: body.text,
          ...(body.channel ? { channel: body.channel } : {}),
          ...(idempotencyKey ? { idempotencyKey } : {}),
        }),
      ).catch((error: unknown) => {
        if (error instanceof DeliveryRejectedError) throw new ApiError(400, 'invalid_request', error.message);
        throw error;
      });
      // A retry that raced its first attempt to the agent got the first one's item: the same message?
      if (delivered.replayed && idempotencyKey) await replayedChat(db, params.agentId, idempotencyKey, message);
      // A replayed POST resumes like the stream route: after `Last-Event-ID` when the client sends it.
      const after = delivered.replayed ? resumeAfter(request) : 0;
      const sse = openSse(request, reply);
      sse.send({ event: 'item', data: delivered });
      runStreams.pipe(sse, (deliver, signal) =>
        followRun(params.agentId, delivered.mergedInto ?? delivered.itemId, after, deliver, signal),
      );
      return reply;
    },
  });
  route({
    method: 'GET',
    url: '/v1/agents/:agentId/chat/:itemId/stream',
    scope: 'read',
    summary:
      'The answer to a chat message as Server-Sent Events (the chat run stream), from the start or after `Last-Event-ID`, with no gap and no duplicate on any API process; ends with `end`; a resume at or after `end` gets 204 at once. A run stopped from outside writes no `end`: once the agent has settled the item, the stream closes with an `end` without an id whose data names the status of the item (and `error` for a dropped one). A merged message follows the item it was merged into',
    params: S.ChatItemParams,
    stream: true,
    handler: async ({ params, principal, request, reply }) => {
      await requireAgent(params.agentId, principal);
      const item = await db
        .selectFrom('mailbox_items')
        .select(['id', 'merged_into'])
        .where('id', '=', params.itemId)
        .where('agent_id', '=', params.agentId)
        .executeTakeFirst();
      if (!item)
        throw new ApiError(
          404,
          'item_not_found',
          `agent ${params.agentId} has no mailbox item ${JSON.stringify(params.itemId)}`,
        );
      const after = resumeAfter(request);
      const answered = item.merged_into ?? item.id;
      // A resume at or past the answer's `end` would wait for events that never come: 204 at once.
      const endSeq = await runStreamEndSeq(db, chatRunWorkflowId(params.agentId, answered));
      if (endSeq !== undefined && after >= endSeq) return streamEnded(reply);
      const sse = openSse(request, reply);
      runStreams.pipe(sse, (deliver, signal) => followRun(params.agentId, answered, after, deliver, signal));
      return reply;
    },
  });
  route({
    method: 'GET',
    url: '/v1/agents/:agentId/mailbox',
    scope: 'read',
    summary:
      "The agent's mailbox (the agent workflow's `mailbox` query): items with their triage state and result, what it is focused on, counters. An agent that never received anything has an empty, idle mailbox",
    params: S.AgentIdParams,
    response: S.MailboxResponse,
    handler: async ({ params, principal }) => {
      await requireAgent(params.agentId, principal);
      return withTimeout('the mailbox query', () => conversations.mailbox(params.agentId)).catch((error: unknown) => {
        if (error instanceof WorkflowNotFoundError)
          return {
            agentId: params.agentId,
            attention: 'idle',
            items: [],
            counters: { delivered: 0, completed: 0, merged: 0, preempted: 0 },
          };
        throw error;
      });
    },
  });
}

/**
 * The closing `end` event's data for an answer whose run wrote no `end`: not a stream event (no `seq`,
 * like the bare `end` that closes any stream), but the item, how the agent settled it and, for a dropped
 * one, why (`error`, as a run's own `end` names a failure).
 */
function settledEndData(settled: ChatStreamSettled) {
  return {
    itemId: settled.itemId,
    itemStatus: settled.status,
    ...(settled.status === 'dropped'
      ? { error: `the agent dropped the message without an answer: ${settled.result ?? 'no reason recorded'}` }
      : {}),
  };
}
