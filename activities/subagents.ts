import type { ActivityDeps } from './index';
import { findMessage } from './store/sessions';
import { assistantMessageKey } from './tools/execute';
import type { TextBlock } from './llm/types';

/** Activities of the sub-agent workflow. */
export function createSubagentActivities(deps: ActivityDeps) {
  const { db } = deps;
  return {
    /** The text of a sub-agent's reply at `turn`, cut to `maxChars` (its result for the parent). */
    async subagentReply(input: { sessionId: string; turn: number; maxChars: number }): Promise<string> {
      const message = await findMessage(db, input.sessionId, assistantMessageKey(1, input.turn));
      const text = (message?.content ?? [])
        .filter((b): b is TextBlock => b.type === 'text')
        .map((b) => b.text)
        .join('\n')
        .trim();
      return text.slice(0, input.maxChars);
    },
  };
}
