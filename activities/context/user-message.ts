/**
 * The user message of a run (seed D2 §3): the immediate input, then the recent conversation (task and
 * chat runs), then attachments and knowledge references, each fenced as data.
 *
 * | trigger | immediate input | conversation |
 * | --- | --- | --- |
 * | heartbeat | "What's the next action you should take? Choose ONE." | none |
 * | task | the task description | the task's last 20 chat messages, newest last |
 * | chat | the new chat message | the task's last 20 chat messages, newest last |
 */
import { TASK_CHAT_CONTEXT_MESSAGES } from './limits';
import { attribute, neutralize } from './neutralize';
import { HEARTBEAT_USER_MESSAGE } from './prompt-text';
import { formatMinuteUtc, type Instant } from './quantize';

export interface RunUserMessageInput {
  trigger: 'heartbeat' | 'task' | 'chat';
  /** Task runs: the task description. */
  taskDescription?: string;
  /** Chat runs: the message that mentioned the agent. */
  chatMessage?: { from: string; body: string };
  /** Task chat messages, oldest first; the last 20 are used (not for heartbeats). */
  conversation?: Array<{ from: string; body: string; at?: Instant }>;
  /** Attached files or documents, shown as fenced blocks. */
  attachments?: Array<{ name: string; body: string }>;
  /** Knowledge-base references, inlined as their instructions (D2 §3). */
  knowledgeReferences?: Array<{ title: string; instructionsMd: string }>;
}

export function buildRunUserMessage(input: RunUserMessageInput): string {
  const parts: string[] = [];
  switch (input.trigger) {
    case 'heartbeat':
      return HEARTBEAT_USER_MESSAGE;
    case 'task':
      parts.push(input.taskDescription?.trim() ? neutralize(input.taskDescription.trim()) : '(The task has no description.)');
      break;
    case 'chat':
      parts.push(input.chatMessage ? messageBlock(input.chatMessage.from, input.chatMessage.body) : '(No message.)');
      break;
  }
  const conversation = input.conversation?.slice(-TASK_CHAT_CONTEXT_MESSAGES) ?? [];
  if (conversation.length) {
    parts.push(`## Recent task chat (oldest first)\n${conversation.map((m) => messageBlock(m.from, m.body, m.at)).join('\n')}`);
  }
  for (const attachment of input.attachments ?? []) {
    parts.push(`## Attachment: ${neutralize(attachment.name)}\n<untrusted source=${attribute(`attachment:${attachment.name}`)}>\n${neutralize(attachment.body)}\n</untrusted>`);
  }
  for (const reference of input.knowledgeReferences ?? []) {
    parts.push(`## Knowledge reference: ${neutralize(reference.title)}\n<untrusted source=${attribute(`kb:${reference.title}`)}>\n${neutralize(reference.instructionsMd)}\n</untrusted>`);
  }
  return parts.join('\n\n');
}

function messageBlock(from: string, body: string, at?: Instant): string {
  const time = at !== undefined ? ` at=${attribute(formatMinuteUtc(at))}` : '';
  return `<message from=${attribute(from)}${time}>\n${neutralize(body.trim())}\n</message>`;
}
