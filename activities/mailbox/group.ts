import { randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import type { Client } from '@temporalio/client';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { MAILBOX_TEXT_MAX_CHARS } from '../../workflows/rules/mailbox';
import {
  GROUP_CONTEXT_MESSAGES,
  GROUP_MAX_MEMBERS,
  GROUP_NAME_PATTERN,
  GROUP_TURN_AGENT_MESSAGE_BUDGET,
  groupChannel,
  groupRecipients,
  type GroupMember,
  type GroupRecipient,
} from '../../workflows/rules/group';
import { findAgentInOrg, PLATFORM, type OrgScope } from '../store/tenancy';
import { FailureType } from '../../workflows/failure-types';
import { deliverToAgent } from './deliver-to-agent';
import { groupPrompt } from '../../prompts/conversation';

export interface GroupMessageView {
  id: string;
  from: GroupMember;
  text: string;
  replyTo?: string;
  turnId: string;
  depth: number;
  deliveredTo: string[];
  routing: string;
  createdAt: string;
}

export type GroupPostOutcome = { posted: true; message: GroupMessageView } | { posted: false; reason: string };

const groupProblem = (message: string): ApplicationFailure =>
  ApplicationFailure.nonRetryable(message, FailureType.InvalidGroup);

/**
 * Creates a group channel with its members (agents must exist). Refuses a name in use or bad members.
 * A group belongs to one organisation, its agents': agents of two organisations are refused, and with
 * `org` (an agent's or a token's scope) an agent outside it is refused as unknown, the same words as an
 * agent that does not exist. Posting needs membership, so a group is walled by who could join it.
 */
export async function createGroup(
  db: Kysely<Database>,
  input: { name: string; createdBy: string; members: GroupMember[]; org?: OrgScope },
): Promise<void> {
  if (!GROUP_NAME_PATTERN.test(input.name))
    throw groupProblem(
      `bad group name ${JSON.stringify(input.name)}: use letters, digits, '.', '_' or '-' (at most 100)`,
    );
  const members = [...new Map(input.members.map((m) => [`${m.type}:${m.id}`, m])).values()];
  if (members.filter((m) => m.type === 'agent').length === 0) throw groupProblem('a group needs at least one agent');
  if (members.length > GROUP_MAX_MEMBERS)
    throw groupProblem(`a group has at most ${GROUP_MAX_MEMBERS} members (got ${members.length})`);
  const orgs = new Set<string>();
  for (const m of members) {
    if (!['agent', 'human'].includes(m.type) || !m.id?.trim())
      throw groupProblem('members are { type: "agent" | "human", id }');
    if (m.type !== 'agent') continue;
    const agent = await findAgentInOrg(db, m.id, input.org ?? PLATFORM);
    if (!agent) throw groupProblem(`unknown agent ${JSON.stringify(m.id)}`);
    orgs.add(agent.org);
  }
  if (orgs.size > 1)
    throw groupProblem(
      `a group's agents are of one organisation; these are of ${[...orgs].sort().join(', ')}: make one group per organisation`,
    );
  await db.transaction().execute(async (trx) => {
    const existing = await trx
      .selectFrom('group_channels')
      .select('name')
      .where('name', '=', input.name)
      .executeTakeFirst();
    if (existing) throw groupProblem(`group ${JSON.stringify(input.name)} already exists`);
    await trx.insertInto('group_channels').values({ name: input.name, created_by: input.createdBy }).execute();
    await trx
      .insertInto('group_members')
      .values(members.map((m) => ({ group_name: input.name, member_type: m.type, member_id: m.id })))
      .execute();
  });
}

export async function groupMembers(db: Kysely<Database>, name: string): Promise<GroupMember[] | undefined> {
  const group = await db.selectFrom('group_channels').select('name').where('name', '=', name).executeTakeFirst();
  if (!group) return undefined;
  const rows = await db
    .selectFrom('group_members')
    .select(['member_type', 'member_id'])
    .where('group_name', '=', name)
    .orderBy('joined_at')
    .orderBy('member_id')
    .execute();
  return rows.map((r) => ({ type: r.member_type as GroupMember['type'], id: r.member_id }));
}

/** The group's transcript, oldest first (the last `limit` messages). */
export async function groupTranscript(db: Kysely<Database>, name: string, limit = 200): Promise<GroupMessageView[]> {
  const rows = await db
    .selectFrom('group_messages')
    .selectAll()
    .where('group_name', '=', name)
    .orderBy('seq', 'desc')
    .limit(limit)
    .execute();
  return rows.reverse().map(toView);
}

/**
 * Posts a message to a group and delivers it to the member agents by the group rules
 * (workflows/rules/group.ts). Idempotent by `id`: a retry re-sends the same deliveries (each update is
 * deduplicated by its id) and posts nothing twice. The turn's budgets are counted under a per-turn lock,
 * so concurrent answers cannot overrun them. Refuses (InvalidGroup) an unknown group, a sender who is not a
 * member, and empty or oversized text.
 */
export async function postGroupMessage(
  db: Kysely<Database>,
  client: Client,
  taskQueue: string,
  input: { id?: string; group: string; from: GroupMember; text: string; replyTo?: string },
): Promise<GroupPostOutcome> {
  const members = await groupMembers(db, input.group);
  if (!members) throw groupProblem(`unknown group ${JSON.stringify(input.group)}: create it first`);
  if (!members.some((m) => m.type === input.from.type && m.id === input.from.id))
    throw groupProblem(`${input.from.type}:${input.from.id} is not a member of group ${input.group}`);
  if (typeof input.text !== 'string' || !input.text.trim())
    throw groupProblem('text is empty: there is nothing to post');
  if (input.text.length > MAILBOX_TEXT_MAX_CHARS)
    throw groupProblem(`text is ${input.text.length} characters; the limit is ${MAILBOX_TEXT_MAX_CHARS}`);
  if (input.text.includes('\u0000'))
    throw groupProblem('text contains a NUL character (U+0000), which cannot be stored: remove it');
  const id = input.id ?? randomUUID();

  const decided = await db
    .transaction()
    .execute(async (trx): Promise<GroupPostOutcome & { recipients?: GroupRecipient[]; seq?: string }> => {
      const existing = await trx.selectFrom('group_messages').selectAll().where('id', '=', id).executeTakeFirst();
      if (existing) {
        return {
          posted: true,
          message: toView(existing),
          recipients: recipientsOf(existing.delivered_to, members),
          seq: existing.seq,
        };
      }
      const parent = input.replyTo
        ? await trx
            .selectFrom('group_messages')
            .select(['turn_id', 'depth'])
            .where('id', '=', input.replyTo)
            .where('group_name', '=', input.group)
            .executeTakeFirst()
        : undefined;
      if (input.replyTo && !parent) throw groupProblem(`no message ${input.replyTo} in group ${input.group}`);
      const isAgent = input.from.type === 'agent';
      // A human's message starts a turn; an agent's answer continues the turn of what it answers.
      const turnId = isAgent && parent ? parent.turn_id : id;
      const depth = isAgent ? (parent?.depth ?? 0) + 1 : 0;
      await sql`select pg_advisory_xact_lock(hashtext(${`group-turn:${turnId}`}))`.execute(trx);
      const turn = await trx
        .selectFrom('group_messages')
        .select(['from_type', 'delivered_to'])
        .where('turn_id', '=', turnId)
        .execute();
      if (isAgent && turn.filter((m) => m.from_type === 'agent').length >= GROUP_TURN_AGENT_MESSAGE_BUDGET) {
        return {
          posted: false,
          reason: `G4: the turn's ${GROUP_TURN_AGENT_MESSAGE_BUDGET} agent messages are used up`,
        };
      }
      const deliveriesSoFar = turn.reduce((n, m) => n + m.delivered_to.length, 0);
      const { recipients, routing } = groupRecipients({
        from: input.from,
        text: input.text,
        depth,
        members,
        deliveriesSoFar,
      });
      const row = await trx
        .insertInto('group_messages')
        .values({
          id,
          group_name: input.group,
          from_type: input.from.type,
          from_id: input.from.id,
          text: input.text,
          reply_to: input.replyTo ?? null,
          turn_id: turnId,
          depth,
          delivered_to: JSON.stringify(recipients.map((r) => `${r.kind}:${r.agentId}`)),
          routing,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      return { posted: true, message: toView(row), recipients, seq: row.seq };
    });
  if (!decided.posted) return decided;
  const { message, recipients = [], seq = '0' } = decided;

  // The messages just before this one (later turns get only the last few as context).
  const recent = (
    await db
      .selectFrom('group_messages')
      .select(['from_type', 'from_id', 'text'])
      .where('group_name', '=', input.group)
      .where('seq', '<', seq)
      .orderBy('seq', 'desc')
      .limit(GROUP_CONTEXT_MESSAGES)
      .execute()
  )
    .reverse()
    .map((r) => ({ from: { type: r.from_type as GroupMember['type'], id: r.from_id }, text: r.text }));
  await Promise.all(
    recipients.map(async (r) => {
      await deliverToAgent(
        client,
        taskQueue,
        r.agentId,
        {
          kind: r.kind,
          from: { type: input.from.type, id: input.from.id },
          channel: groupChannel(input.group),
          text: groupPrompt({
            group: input.group,
            agentId: r.agentId,
            members,
            message: { id, from: input.from, text: input.text },
            targeted: r.targeted,
            recent,
          }),
          replyTo: id,
          thread: message.turnId,
        },
        { updateId: `group-${id}-${r.agentId}` },
      );
    }),
  );
  return { posted: true, message };
}

/** The recipients a stored message was routed to (`kind:agentId` entries), for an idempotent re-send. */
function recipientsOf(deliveredTo: string[], members: GroupMember[]): GroupRecipient[] {
  return deliveredTo.flatMap((d) => {
    const [kind, agentId] = [d.slice(0, d.indexOf(':')), d.slice(d.indexOf(':') + 1)];
    return members.some((m) => m.type === 'agent' && m.id === agentId)
      ? [{ agentId, kind: kind as GroupRecipient['kind'], targeted: kind === 'mention' }]
      : [];
  });
}

function toView(r: {
  id: string;
  from_type: string;
  from_id: string;
  text: string;
  reply_to: string | null;
  turn_id: string;
  depth: number;
  delivered_to: string[];
  routing: string;
  created_at: Date;
}): GroupMessageView {
  return {
    id: r.id,
    from: { type: r.from_type as GroupMember['type'], id: r.from_id },
    text: r.text,
    ...(r.reply_to ? { replyTo: r.reply_to } : {}),
    turnId: r.turn_id,
    depth: r.depth,
    deliveredTo: r.delivered_to.map((d) => d.slice(d.indexOf(':') + 1)),
    routing: r.routing,
    createdAt: r.created_at.toISOString(),
  };
}
