import { proxyActivities, setCurrentDetails, type ActivityOptions } from '@temporalio/workflow';
import { RUN_TOOL } from './activity-options';
import type { Activities } from '../activities';
import type { Scenario } from '../activities/tools/registry';
import { addUsage, ZERO_USAGE_TOTALS, type UsageTotals } from './contract';
import { NO_APPROVAL_IN_BACKGROUND_RUNS } from '../prompts/conversation';
import { uiSummary } from './rules/call-lines';

const tools = proxyActivities<Activities>(RUN_TOOL);

export interface ToolLoopOptions {
  agentId: string;
  sessionId: string;
  scenario: Scenario;
  maxToolIterations: number;
  /** Retry policy of the LLM step (heartbeats: 3 retries from 3 s). */
  llmOptions: ActivityOptions;
  label: string;
  /** Counted in this task's cost (sub-agents). */
  taskId?: string;
  /** User messages that open the session on the first turn (a sub-agent's brief). */
  opening?: string[];
  /** Awaited before every LLM step (a sub-agent holds here while its tree's budget waits for a human). */
  beforeStep?: () => Promise<void>;
  /** Told the run's usage so far after every LLM step. */
  afterStep?: (usage: UsageTotals) => Promise<void>;
}

export interface ToolLoopResult {
  toolIterations: number;
  /** Turn number of the last LLM step (its reply is read back from the session). */
  lastTurn: number;
  /** The last reply's first characters. */
  lastText: string;
  capped: boolean;
  usage: UsageTotals;
}

/**
 * The small tool loop of background scenarios (heartbeat, reflection): LLM step → each tool call
 * through the ledger → LLM step … until the model answers without tools or the iteration cap is
 * reached. Calls that would need a human approval are declined by policy, since nobody is waiting.
 * The conversation stays in PostgreSQL; this history holds ids and counters only.
 */
export async function runToolLoop(options: ToolLoopOptions): Promise<ToolLoopResult> {
  const llm = proxyActivities<Activities>(options.llmOptions);
  let turn = 0;
  let toolIterations = 0;
  let usage = ZERO_USAGE_TOTALS;
  for (;;) {
    setCurrentDetails(`${options.label} · turn ${turn} · ${toolIterations} tool iterations`);
    await options.beforeStep?.();
    const extra = {
      ...(options.taskId ? { taskId: options.taskId } : {}),
      ...(turn === 0 && options.opening ? { injections: options.opening } : {}),
    };
    const step = await llm.llmStep.executeWithOptions({ summary: `${options.label} · turn ${turn}` }, [
      {
        agentId: options.agentId,
        sessionId: options.sessionId,
        scenario: options.scenario,
        attempt: 1,
        turn,
        ...extra,
      },
    ]);
    usage = addUsage(usage, step.usage);
    await options.afterStep?.(usage);
    const stepTurn = turn;
    turn += 1;
    if (step.toolCalls.length === 0) {
      return { toolIterations, lastTurn: stepTurn, lastText: step.textPreview, capped: false, usage };
    }
    for (const call of step.toolCalls) {
      const base = {
        agentId: options.agentId,
        sessionId: options.sessionId,
        attempt: 1,
        turn: stepTurn,
        toolCallId: call.id,
        scenario: options.scenario,
        ...(options.taskId ? { taskId: options.taskId } : {}),
      };
      const result = await tools.executeTool.executeWithOptions({ summary: uiSummary(call.summary) }, [base]);
      if (result.kind === 'approval-required') {
        await tools.executeTool.executeWithOptions({ summary: uiSummary(`${call.summary} (declined)`) }, [
          {
            ...base,
            approval: {
              requestId: result.requestId,
              decision: 'rejected',
              decidedBy: 'background-run policy',
              comment: NO_APPROVAL_IN_BACKGROUND_RUNS,
            },
          },
        ]);
      }
    }
    toolIterations += 1;
    if (toolIterations >= options.maxToolIterations) {
      return { toolIterations, lastTurn: stepTurn, lastText: step.textPreview, capped: true, usage };
    }
  }
}
