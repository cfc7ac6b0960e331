/**
 * Which scenario answers a conversation item, and the texts a conversation run opens with. Pure: the
 * agent workflow picks the scenario, the scenario run applies its cap, and the LLM step builds the
 * scenario's prompt section and offers its tool set (activities/tools/registry.ts).
 *
 * | scenario | answers | the final answer goes to |
 * | --- | --- | --- |
 * | chat | a human in a direct channel | the human, streamed |
 * | a2a | another agent's message | the sending agent, on the same thread |
 * | comment_response | a task comment, or a mention in one | the task's comment thread (`comment-answered`) |
 * | group_chat | any message in a `group:` channel | the group, routed by the group rules |
 */
import { groupNameOf } from './group';
import { CHAT_MAX_TOOL_ITERATIONS } from './harness';

export type ConversationScenario = 'chat' | 'a2a' | 'comment_response' | 'group_chat';

/** Every conversation scenario, for code and tests that must cover them all. */
export const CONVERSATION_SCENARIOS: readonly ConversationScenario[] = [
  'chat',
  'a2a',
  'comment_response',
  'group_chat',
];

/**
 * Safety cap on tool iterations per run. The design gives every message-driven scenario the chat's cap
 * (200; group chat runs through the same handler): a net against a runaway model, not a
 * budget a normal answer comes near.
 */
export const CONVERSATION_MAX_TOOL_ITERATIONS: Readonly<Record<ConversationScenario, number>> = {
  chat: CHAT_MAX_TOOL_ITERATIONS,
  a2a: CHAT_MAX_TOOL_ITERATIONS,
  comment_response: CHAT_MAX_TOOL_ITERATIONS,
  group_chat: CHAT_MAX_TOOL_ITERATIONS,
};

/**
 * The scenario that answers an item. A group channel decides first: whoever wrote, the answer is posted
 * to the group (the design answers an agent's chain reply in a group with its A2A scenario; here the group
 * rules already bound chains, and the model must know its answer is seen by every member). Then a task
 * comment or a mention in one, then an agent's message; everything else is a chat.
 */
export function conversationScenario(item: {
  kind: string;
  from: { type: string };
  channel: string;
  taskId?: string;
}): ConversationScenario {
  if (groupNameOf(item.channel) !== undefined) return 'group_chat';
  if (
    item.kind === 'comment' ||
    (item.kind === 'mention' && (item.taskId !== undefined || item.channel.startsWith('task:')))
  )
    return 'comment_response';
  if (item.from.type === 'agent') return 'a2a';
  return 'chat';
}
