import type { ActivityDeps } from './deps';
import { findMessage } from './store/sessions';
import { assistantMessageKey } from './tools/execute';
import type { TextBlock } from './llm/types';
import { budgetTreeCostUsd } from './store/task-budget';

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

    /**
     * What a task's LLM calls cost so far, sub-agents included, and those of every task created under
     * its budget (store/task-budget.ts): what a new round's tree has already spent.
     */
    async taskCostUsd(input: { taskId: string }): Promise<number> {
      return budgetTreeCostUsd(db, input.taskId);
    },
  };
}
