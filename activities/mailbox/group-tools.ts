import { createHash } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import { Context } from '@temporalio/activity';
import { z } from 'zod';
import { defineTool, type ToolContext, type ToolOutput } from '../tools/types';
import { channelSessionId } from '../../workflows/agent-contract';
import { GROUP_NAME_PATTERN, groupChannel } from '../../workflows/rules/group';
import { MAILBOX_TEXT_MAX_CHARS } from '../../workflows/rules/mailbox';
import { createGroup, postGroupMessage } from './group';
import { findAgentInOrg } from '../store/tenancy';
import { agentWorkRefusal } from '../store/work-policy';
import { FailureType } from '../../workflows/failure-types';

/** Groups listed by agent_list_group_chats: more than an agent is in for any real team setup. */
const GROUP_LIST_MAX = 50;
/** Colleagues listed by agent_list_colleagues; the count of the rest is given. */
const COLLEAGUES_LIST_MAX = 50;
/** Each colleague's description is cut here: enough to see what they do. */
const COLLEAGUE_DESCRIPTION_CHARS = 150;

const groupName = z
  .string()
  .regex(GROUP_NAME_PATTERN, 'a group name: letters, digits, ".", "_" or "-"')
  .describe('The group name (without "group:")');

/**
 * Post to a group chat the agent belongs to, under the same rules as a group answer (G1–G4): everyone
 * sees it, it is delivered only to the agents it @mentions, within the turn's budgets. Posted while
 * answering a message of that group, it continues that message's turn (so it shares its budgets);
 * otherwise it starts a turn of its own one agent hop deep, so the agents it mentions answer and their
 * answers go no further. Idempotent by tool call: a retry posts nothing twice.
 */
export const agentSendGroupMessage = defineTool({
  name: 'agent_send_group_message',
  description:
    'Post a message to a group chat you are a member of. Everyone in the group sees it; only the agents you @mention (by id) receive it and may answer. Asynchronous: answers appear in the group later.',
  schema: z.object({ group: groupName, text: z.string().min(1).max(MAILBOX_TEXT_MAX_CHARS) }).strict(),
  sideEffecting: true,
  summarize: (a) => `agent_send_group_message → group:${a.group}: ${a.text.slice(0, 100)}`,
  run: async (args, ctx) =>
    asToolError(async () => {
      // A group the agent is not in reads as one that does not exist, whichever organisation it is in.
      if (!(await isGroupMember(ctx, args.group))) return noSuchGroup(args.group);
      const answering = await answeredGroupMessage(ctx, args.group);
      const activity = Context.current();
      const outcome = await postGroupMessage(ctx.db, activity.client, activity.info.taskQueue, {
        id: `tool-${createHash('sha256').update(`${ctx.sessionId}\0${ctx.toolCallId}`).digest('hex').slice(0, 32)}`,
        group: args.group,
        from: { type: 'agent', id: ctx.agentId },
        text: args.text,
        ...(answering ? { replyTo: answering } : {}),
      });
      if (!outcome.posted) return { content: `Not posted: ${outcome.reason}.`, isError: true };
      const { message } = outcome;
      const to = message.deliveredTo.length
        ? `delivered to ${message.deliveredTo.join(', ')}`
        : 'delivered to no agent (mention one by @id to ask it)';
      return {
        content: `Posted to group:${args.group} (message ${message.id}), ${to}. Answers appear in the group later; do not wait for them.`,
      };
    }),
});

export const agentListGroupChats = defineTool({
  name: 'agent_list_group_chats',
  description: 'List the group chats you are a member of, with their members and when the last message was posted.',
  schema: z.object({}).strict(),
  sideEffecting: false,
  run: async (_args, ctx) => {
    const groups = await ctx.db
      .selectFrom('group_members as me')
      .innerJoin('group_channels as g', 'g.name', 'me.group_name')
      .select((eb) => [
        'g.name',
        eb
          .selectFrom('group_messages')
          .select((m) => m.fn.max('created_at').as('last'))
          .whereRef('group_messages.group_name', '=', 'g.name')
          .as('last_message_at'),
      ])
      .where('me.member_type', '=', 'agent')
      .where('me.member_id', '=', ctx.agentId)
      .orderBy('g.name')
      .limit(GROUP_LIST_MAX)
      .execute();
    if (groups.length === 0) return { content: 'You are not a member of any group chat.' };
    const members = await ctx.db
      .selectFrom('group_members')
      .select(['group_name', 'member_type', 'member_id'])
      .where(
        'group_name',
        'in',
        groups.map((g) => g.name),
      )
      .orderBy('joined_at')
      .orderBy('member_id')
      .execute();
    const lines = groups.map((g) => {
      const roster = members.filter((m) => m.group_name === g.name).map((m) => `${m.member_id} (${m.member_type})`);
      const last = g.last_message_at
        ? `last message ${new Date(g.last_message_at as unknown as string).toISOString().slice(0, 16).replace('T', ' ')} UTC`
        : 'no messages yet';
      return `- group:${g.name} · ${roster.length} members: ${roster.join(', ')} · ${last}`;
    });
    return { content: lines.join('\n') };
  },
});

export const agentCreateGroupChat = defineTool({
  name: 'agent_create_group_chat',
  description:
    'Create a group chat with other agents (by id) and humans; you are a member. Post to it with agent_send_group_message.',
  schema: z
    .object({
      name: groupName,
      agents: z.array(z.string().min(1).max(100)).min(1).max(19).describe('Agent ids to add (you are added yourself)'),
      humans: z.array(z.string().min(1).max(100)).max(19).optional().describe('Human user ids to add'),
    })
    .strict(),
  sideEffecting: true,
  summarize: (a) => `agent_create_group_chat group:${a.name} with ${a.agents.join(', ')}`,
  run: async (args, ctx) =>
    asToolError(async () => {
      const members = [
        { type: 'agent' as const, id: ctx.agentId },
        ...args.agents.map((id) => ({ type: 'agent' as const, id })),
        ...(args.humans ?? []).map((id) => ({ type: 'human' as const, id })),
      ];
      // Adding an agent to a group lets this agent address it there: its policy decides, as for a message.
      const me = await findAgentInOrg(ctx.db, ctx.agentId, ctx.org);
      for (const id of args.agents) {
        const agent = await findAgentInOrg(ctx.db, id, ctx.org);
        if (!agent) return { content: `Not created: unknown agent ${JSON.stringify(id)}.`, isError: true };
        const refusal = me ? agentWorkRefusal(agent, me) : undefined;
        if (refusal) return { content: `Not created: ${refusal}; a human can add it to a group.`, isError: true };
      }
      // A name is unique across organisations: a taken one is refused in the same words wherever it is.
      const taken = await ctx.db
        .selectFrom('group_channels')
        .select('name')
        .where('name', '=', args.name)
        .executeTakeFirst();
      if (taken)
        return {
          content: `Not created: the group name ${JSON.stringify(args.name)} is taken; choose another.`,
          isError: true,
        };
      await createGroup(ctx.db, { name: args.name, createdBy: `agent:${ctx.agentId}`, members, org: ctx.org });
      return { content: `Created ${groupChannel(args.name)} with ${members.map((m) => m.id).join(', ')}.` };
    }),
});

export const agentListColleagues = defineTool({
  name: 'agent_list_colleagues',
  description: 'List the other agents you can message (id, name, what they do).',
  schema: z.object({}).strict(),
  sideEffecting: false,
  run: async (_args, ctx) => {
    // Colleagues are the agents of the caller's organisation; no other organisation's agent is named.
    const rows = await ctx.db
      .selectFrom('agents')
      .select(['id', 'name', 'description'])
      .where('org', '=', ctx.org)
      .where('id', '!=', ctx.agentId)
      .orderBy('name')
      .orderBy('id')
      .limit(COLLEAGUES_LIST_MAX + 1)
      .execute();
    if (rows.length === 0) return { content: 'There are no other agents.' };
    const lines = rows
      .slice(0, COLLEAGUES_LIST_MAX)
      .map(
        (r) =>
          `- ${r.id}${r.name && r.name !== r.id ? ` (${r.name})` : ''}${r.description ? `: ${oneLine(r.description)}` : ''}`,
      );
    if (rows.length > COLLEAGUES_LIST_MAX) lines.push(`- …and more: only the first ${COLLEAGUES_LIST_MAX} are listed`);
    return { content: lines.join('\n') };
  },
});

/** The group tools (the agent-to-agent set), offered where agents converse; gated by `messageAgents`. */
export const groupTools = [agentSendGroupMessage, agentListGroupChats, agentCreateGroupChat, agentListColleagues];

/**
 * The group message this run answers, when the call comes from the agent's session for that group:
 * the item being processed there names it (`reply_to`). A post from anywhere else starts a turn.
 */
async function answeredGroupMessage(ctx: ToolContext, group: string): Promise<string | undefined> {
  const channel = groupChannel(group);
  if (ctx.sessionId !== channelSessionId(channel, ctx.agentId)) return undefined;
  const item = await ctx.db
    .selectFrom('mailbox_items')
    .select('reply_to')
    .where('agent_id', '=', ctx.agentId)
    .where('channel', '=', channel)
    .where('status', '=', 'processing')
    .orderBy('updated_at', 'desc')
    .executeTakeFirst();
  return item?.reply_to ?? undefined;
}

/** Whether the calling agent is a member of the group (a group it is not in does not exist for it). */
async function isGroupMember(ctx: ToolContext, group: string): Promise<boolean> {
  const row = await ctx.db
    .selectFrom('group_members')
    .select('group_name')
    .where('group_name', '=', group)
    .where('member_type', '=', 'agent')
    .where('member_id', '=', ctx.agentId)
    .executeTakeFirst();
  return row !== undefined;
}

/** The answer for a group the agent is not a member of, whether or not it exists anywhere. */
function noSuchGroup(group: string): ToolOutput {
  return {
    content: `Not posted: you are in no group chat ${JSON.stringify(group)}. agent_list_group_chats lists yours.`,
    isError: true,
  };
}

/** A refused group operation (unknown group, not a member, bad name) becomes an error the model reads. */
async function asToolError(run: () => Promise<ToolOutput>): Promise<ToolOutput> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof ApplicationFailure && error.type === FailureType.InvalidGroup)
      return { content: `${error.message}.`, isError: true };
    throw error;
  }
}

function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > COLLEAGUE_DESCRIPTION_CHARS ? `${flat.slice(0, COLLEAGUE_DESCRIPTION_CHARS - 1)}…` : flat;
}
