import type { ActivityDeps } from '../deps';
import type { ExecuteToolInput } from '../tools/execute';
import type { Scenario } from '../tools/registry';
import { runLlmStep } from './llm-step';
import { recordRoundStop, stoppableStep } from './round-stop';
import type { LlmStepInput } from './types';
import { runStepWithTools, runToolWithLedger, type StepWithToolsResult } from './with-tools';

/** Activities of the LLM loop: the step, the step with its auto-allowed tools, one tool call. */
export function createStepActivities(deps: ActivityDeps) {
  const { db, router } = deps;
  return {
    /** See `runLlmStep`: one idempotent, cancellable LLM call over the session stored in PostgreSQL. */
    async llmStep(input: LlmStepInput) {
      return runLlmStep(db, router, input);
    },

    /**
     * One loop iteration in one activity: the LLM step, then the auto-allowed tool calls it asked for,
     * through the ledger (see `runStepWithTools`). Calls that need a human come back as `deferred`.
     */
    async llmStepWithTools(input: LlmStepInput): Promise<StepWithToolsResult> {
      const started = performance.now();
      const { stopKey, taskId } = input;
      const run = () => runStepWithTools(db, router, input);
      const result = await (stopKey && taskId ? stoppableStep(db, { taskId, stopKey }, run) : run());
      return { ...result, elapsedMs: Math.round(performance.now() - started) };
    },

    /** Records that a round attempt is being stopped, for its local step to see (see `stoppableStep`). */
    async recordRoundStop(input: Parameters<typeof recordRoundStop>[1]): Promise<void> {
      await recordRoundStop(db, input);
    },

    /**
     * A history line, not work: a round's step summaries name the calls of the step before them, and
     * the last step's calls have no step after them, so the round ends with this local activity, whose
     * summary names them. Does nothing; the summary is the point.
     */
    async showLastStepCalls(): Promise<void> {},

    /** Runs one tool call exactly once (ledger), or reports that it needs approval. */
    async executeTool(input: ExecuteToolInput & { scenario: Scenario }) {
      return runToolWithLedger(db, input);
    },
  };
}
