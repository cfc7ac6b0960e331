/**
 * Group chat rules: who in a `group:<name>` channel receives a message, so that a
 * conversation between several agents and humans converges. Pure; used by the group activities.
 *
 * - G1 nobody receives their own message.
 * - G2 a human's message goes to the agents it @mentions (kind `mention`, they answer); with no
 *   mention it goes to every member agent (kind `chat`, "silence by default": each answers only if
 *   it has something to add, `[NO_RESPONSE]` otherwise).
 * - G3 an agent's message in the group is seen by everyone in the transcript but delivered only to the
 *   agents it @mentions, and only while its depth (agent hops since the human's message) is under
 *   `GROUP_MAX_AGENT_DEPTH`: an agent's plain answer never triggers another agent.
 * - G4 per turn (a human's message and every agent message it causes) at most
 *   `GROUP_TURN_DELIVERY_BUDGET` deliveries to agents (each one LLM run) and at most
 *   `GROUP_TURN_AGENT_MESSAGE_BUDGET` agent messages posted; past either, nothing more is delivered or
 *   posted, and the message's `routing` says so.
 */

/** Group names: `group:<name>`; the name is a short slug. */
export const GROUP_NAME_PATTERN = /^[A-Za-z0-9._-]{1,100}$/;
export const GROUP_CHANNEL_PREFIX = 'group:';
export const groupChannel = (name: string): string => `${GROUP_CHANNEL_PREFIX}${name}`;
export const groupNameOf = (channel: string): string | undefined =>
  channel.startsWith(GROUP_CHANNEL_PREFIX) ? channel.slice(GROUP_CHANNEL_PREFIX.length) : undefined;

/** Members of one group: enough for a team (teams are a handful of agents) and its humans. */
export const GROUP_MAX_MEMBERS = 20;
/**
 * Agent hops after a human's message: an agent may @mention another agent in its answer (depth 1) and
 * that agent answers (depth 2), which is not delivered further. Enough to ask a colleague, not to chain.
 */
export const GROUP_MAX_AGENT_DEPTH = 2;
/** Agent messages posted per turn: each member answers once, plus a few answers to mentions. */
export const GROUP_TURN_AGENT_MESSAGE_BUDGET = 6;
/** Deliveries to agents per turn, so LLM runs per turn: the human's broadcast plus a few mentions. */
export const GROUP_TURN_DELIVERY_BUDGET = 8;
/** Recent group messages shown to an agent before the one it receives (later turns get the last 5). */
export const GROUP_CONTEXT_MESSAGES = 5;
/** Each context line is cut here; the full text is in the transcript. */
export const GROUP_CONTEXT_LINE_CHARS = 300;

export interface GroupMember {
  type: 'agent' | 'human';
  id: string;
}

/** The `@name` tokens of a text (word-bounded; a trailing full stop is not part of the name), in order. */
export function mentionTokens(text: string): string[] {
  return [
    ...new Set([...text.matchAll(/(^|[^A-Za-z0-9._-])@([A-Za-z0-9._-]+)/g)].map((m) => m[2]!.replace(/[.]+$/, ''))),
  ];
}

/** The member agents a text @mentions (`@id`, word-bounded), in roster order. */
export function mentionedAgents(text: string, members: GroupMember[]): string[] {
  const tokens = new Set(mentionTokens(text));
  return members.filter((m) => m.type === 'agent' && tokens.has(m.id)).map((m) => m.id);
}

export interface GroupRecipient {
  agentId: string;
  kind: 'mention' | 'chat';
  /** Mentioned (expected to answer) rather than broadcast to (silent by default). */
  targeted: boolean;
}

/**
 * Who receives a group message (G1–G4). `deliveriesSoFar` counts the turn's earlier deliveries;
 * `depth` is 0 for a human's message. Returns the recipients and a one-line reason.
 */
export function groupRecipients(input: {
  from: GroupMember;
  text: string;
  depth: number;
  members: GroupMember[];
  deliveriesSoFar: number;
}): { recipients: GroupRecipient[]; routing: string } {
  const { from, members } = input;
  const others = members.filter((m) => m.type === 'agent' && !(from.type === 'agent' && m.id === from.id));
  const mentioned = mentionedAgents(input.text, others);
  let recipients: GroupRecipient[];
  let routing: string;
  if (from.type !== 'agent') {
    if (mentioned.length > 0) {
      recipients = mentioned.map((agentId) => ({ agentId, kind: 'mention', targeted: true }));
      routing = `G2: to the mentioned agents (${mentioned.join(', ')})`;
    } else {
      recipients = others.map((m) => ({ agentId: m.id, kind: 'chat', targeted: false }));
      routing = 'G2: no mention, to every member agent (silent by default)';
    }
  } else if (mentioned.length === 0) {
    return { recipients: [], routing: 'G3: an agent message with no mention is delivered to no agent' };
  } else if (input.depth >= GROUP_MAX_AGENT_DEPTH) {
    return {
      recipients: [],
      routing: `G3: depth ${input.depth} reached the limit of ${GROUP_MAX_AGENT_DEPTH} agent hops; mentions not delivered`,
    };
  } else {
    recipients = mentioned.map((agentId) => ({ agentId, kind: 'mention', targeted: true }));
    routing = `G3: to the mentioned agents (${mentioned.join(', ')})`;
  }
  const room = Math.max(0, GROUP_TURN_DELIVERY_BUDGET - input.deliveriesSoFar);
  if (recipients.length > room) {
    const cut = recipients.slice(room).map((r) => r.agentId);
    recipients = recipients.slice(0, room);
    routing += `; G4: the turn's ${GROUP_TURN_DELIVERY_BUDGET} deliveries are used up, not delivered to ${cut.join(', ')}`;
  }
  return { recipients, routing };
}
