/**
 * Who may give an agent work: the assignee's policy (`config.acceptsWorkFrom`), not only the creator's.
 * It decides, inside one organisation, whether a task another agent creates for it starts at once or
 * waits for a human's approval, and whether another agent's message, comment or mention reaches it.
 * Across organisations nothing reaches anyone: the callers look both agents up inside the caller's
 * organisation first (`tenancy.ts`), so another organisation's agent is "unknown", never "refused".
 */
import type { AgentRow } from '../../schema/database';
import { agentConfig, type WorkSource } from './agents';

/** The policy of an agent whose config says nothing: today's behaviour, any colleague. */
export const DEFAULT_WORK_SOURCE: WorkSource = 'colleagues';

/** What an agent's `acceptsWorkFrom` allows, in words for the sender's model. */
const POLICY_WORDS: Record<Exclude<WorkSource, 'colleagues'>, string> = {
  manager: 'only from its manager (an agent of its organisation whose position is manager) and from humans',
  humans: 'only from humans',
};

/** The agent's policy (the default without one). */
export function workSourceOf(agent: AgentRow): WorkSource {
  return agentConfig(agent).acceptsWorkFrom ?? DEFAULT_WORK_SOURCE;
}

/**
 * Why `recipient` does not take work or messages from the agent `sender` without a human; undefined
 * when it does. Both rows must already be of the same organisation (looked up with `findAgentInOrg`).
 * An agent always takes its own work.
 */
export function agentWorkRefusal(recipient: AgentRow, sender: AgentRow): string | undefined {
  if (recipient.id === sender.id) return undefined;
  const policy = workSourceOf(recipient);
  if (policy === 'colleagues') return undefined;
  if (policy === 'manager' && agentConfig(sender).position === 'manager') return undefined;
  return `${recipient.id} takes work and messages ${POLICY_WORDS[policy]}`;
}
