/**
 * What a conversation's recipient reads around a message: an agent's message, a task comment, a
 * group message with its roster, a sub-agent's opening brief and its parent's report, and the refusal
 * a conversation gives a call that would need a human. Pure; the routing rules stay in workflows/rules/.
 */
import type { ConversationScenario } from '../workflows/rules/conversation';
import { GROUP_CONTEXT_LINE_CHARS, groupChannel, type GroupMember } from '../workflows/rules/group';
import {
  preview,
  SUBAGENT_ERROR_PREVIEW_CHARS,
  SUBAGENT_LOG_ENTRY_CHARS,
  SUBAGENT_RESULT_PREVIEW_CHARS,
  SUBAGENT_TASK_PREVIEW_CHARS,
  SUBAGENT_THINKING_PREVIEW_CHARS,
  type SubagentBrief,
  type SubagentReport,
} from '../workflows/rules/subagents';

/** An agent's message as its recipient reads it: sender and item id first, so it can answer with reply_to. */
export function agentMessageText(from: string, itemId: string, text: string, taskId?: string): string {
  return `[MESSAGE from agent ${from} · item ${itemId}${taskId ? ` · about task ${taskId}` : ''}]\n${text}`;
}

/** A task comment as its assignee reads it. */
export function taskCommentText(taskId: string, from: string, itemId: string, text: string): string {
  return `[COMMENT on task ${taskId} from ${from} · item ${itemId}]\n${text}`;
}

/** A conversation has no approver at hand: a risky call is refused with a way forward instead of waiting. */
export const CONVERSATION_APPROVAL_REFUSAL: Readonly<Record<ConversationScenario, string>> = {
  chat: 'Risky actions need a human approval, which chat cannot ask for: create a task for this work instead, or tell the human what you would run.',
  a2a: 'Risky actions need a human approval, which an agent-to-agent message cannot ask for: create a task for this work instead, or tell the agent what you would run.',
  comment_response:
    'Risky actions need a human approval, which a comment answer cannot ask for: create a task for this work instead, or say in your answer what you would run.',
  group_chat:
    'Risky actions need a human approval, which a group chat cannot ask for: create a task for this work instead, or say in the group what you would run.',
};

/** The per-message prefix an agent receives: channel header, targeting, roster and recent context, then the message. */
export function groupPrompt(input: {
  group: string;
  agentId: string;
  members: GroupMember[];
  message: { id: string; from: GroupMember; text: string };
  targeted: boolean;
  recent: Array<{ from: GroupMember; text: string }>;
}): string {
  const roster = input.members.map((m) => `${m.id} (${m.type})`).join(', ');
  const targeting = input.targeted
    ? 'You were @mentioned: answer in the group.'
    : 'You were not mentioned: stay silent unless you add something new. To stay silent reply exactly [NO_RESPONSE].';
  const lines = [
    `[GROUP ${groupChannel(input.group)} · ${input.members.length} members · you are ${input.agentId} · message ${input.message.id} from ${input.message.from.type}:${input.message.from.id}]`,
    targeting,
    // The static rules (silence by default, answers posted to the group, when to @mention) are in the
    // group_chat scenario section of the system prompt, which is cached; only what varies is here.
    `Members: ${roster}.`,
  ];
  if (input.recent.length > 0) {
    lines.push('Recent messages:');
    for (const r of input.recent)
      lines.push(`- ${r.from.id}: ${r.text.replace(/\s+/g, ' ').slice(0, GROUP_CONTEXT_LINE_CHARS)}`);
  }
  lines.push('---', input.message.text);
  return lines.join('\n');
}

/** The opening user message of a sub-agent's session. */
export function subagentOpeningText(brief: SubagentBrief, parent: { workflowId: string; taskId?: string }): string {
  const header = `[SUB-AGENT TASK — from ${parent.workflowId}${parent.taskId ? `, task ${parent.taskId}` : ''}]`;
  const context = brief.context?.trim() ? `\n\n## Context from the parent agent\n${brief.context.trim()}` : '';
  return (
    `${header}\n${brief.task.trim()}${context}\n\n` +
    'Work on this alone with the tools you have. Nobody can answer questions while you work. ' +
    'When you are done, reply with your findings or result as plain text and no tool call: that reply is what the parent agent receives (its first 500 characters).'
  );
}

/**
 * The parent's tool result for one spawn call: one entry per child in call order, the answer
 * (500 chars) or the error (500 chars), the whole entry cut at SUBAGENT_LOG_ENTRY_CHARS.
 */
export function formatSubagentReports(reports: SubagentReport[]): string {
  const failed = reports.filter((r) => r.status !== 'completed').length;
  const lines = [
    `${reports.length} sub-agent${reports.length === 1 ? '' : 's'} finished: ${reports.length - failed} completed, ${failed} failed.`,
  ];
  reports.forEach((r, i) => {
    lines.push(
      '',
      `### Sub-agent ${i + 1} (${r.workflowId}): ${r.status}`,
      `Task: ${preview(r.task, SUBAGENT_TASK_PREVIEW_CHARS)}`,
    );
    if (r.status === 'completed') {
      lines.push(
        `Result${r.capped ? ` (stopped at its cap of ${r.iterations} tool iterations)` : ''}: ${preview(r.result, r.capped ? SUBAGENT_THINKING_PREVIEW_CHARS : SUBAGENT_RESULT_PREVIEW_CHARS) || '(no text)'}`,
      );
    } else {
      lines.push(`Error: ${preview(r.error, SUBAGENT_ERROR_PREVIEW_CHARS)}`);
    }
  });
  return preview(lines.join('\n'), SUBAGENT_LOG_ENTRY_CHARS);
}

/** A background run (heartbeat, reflection, consolidation) refuses a call that needs a human decision. */
export const NO_APPROVAL_IN_BACKGROUND_RUNS =
  'Background runs cannot wait for a human decision. Create a task for work that needs approval, or tell a human in their inbox.';

/** An @mention in a task comment, as the mentioned agent reads it. */
export function mentionText(taskId: string, from: string, text: string): string {
  return `[MENTION in a comment on task ${taskId} from ${from}: answer in the task's thread]\n${text}`;
}
