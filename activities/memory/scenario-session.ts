import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { unknownAgent } from '../errors';
import type { TextBlock } from '../llm/types';
import { findAgent } from '../store/agents';
import { appendMessage, ensureSession, findMessage } from '../store/sessions';
import { assistantMessageKey } from '../tools/execute';

/*
 * The session side of the memory workflows' activities: prompts are written straight into the session
 * (PostgreSQL) and replies are read back from it, so no conversation enters workflow history.
 */

/** The idempotency key of a run's opening prompt in its session: a retry appends nothing. */
export const SCENARIO_PROMPT_KEY = 'scenario-prompt';

export function memorySessions(db: Kysely<Database>) {
  async function requireAgent(agentId: string) {
    const agent = await findAgent(db, agentId);
    if (!agent) throw unknownAgent(agentId);
    return agent;
  }

  async function writePrompt(agentId: string, sessionId: string, kind: string, text: string): Promise<void> {
    await ensureSession(db, { id: sessionId, agentId, kind });
    await appendMessage(db, sessionId, SCENARIO_PROMPT_KEY, {
      role: 'user',
      kind: 'task_prompt',
      content: [{ type: 'text', text }],
    });
  }

  async function replyText(sessionId: string, attempt: number, turn: number): Promise<string> {
    const message = await findMessage(db, sessionId, assistantMessageKey(attempt, turn));
    return (message?.content ?? [])
      .filter((b): b is TextBlock => b.type === 'text')
      .map((b) => b.text)
      .join('\n')
      .trim();
  }

  return { requireAgent, writePrompt, replyText };
}

export type MemorySessions = ReturnType<typeof memorySessions>;
