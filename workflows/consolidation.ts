import { log, proxyActivities, setCurrentDetails, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { BACKGROUND_LLM, CONSOLIDATION_STORE } from './activity-options';
import type { Activities } from '../activities';
import {
  AgentIdSearchAttribute,
  systemSessionId,
  type ConsolidationWorkflowInput,
  type ConsolidationWorkflowResult,
} from './contract';

const store = proxyActivities<Activities>(CONSOLIDATION_STORE);
const llm = proxyActivities<Activities>(BACKGROUND_LLM);

/**
 * Daily memory maintenance of an agent, started by the daily Temporal
 * Schedule `consolidation-{agentId}`:
 * 1. the daily report: one tool-less LLM call, 3–5 sentences, written to today's daily log (once a day);
 * 2. the dream, when the agent has at least 50 observations and no dream ran today: the model proposes
 *    a JSON plan of removals, merges and promotions over the 200 most recent entries; the plan is
 *    validated and applied in one transaction, or — malformed or out of bounds — changes nothing and is
 *    recorded as rejected.
 * A failing daily report does not prevent the dream.
 */
export async function memoryConsolidationWorkflow(
  input: ConsolidationWorkflowInput,
): Promise<ConsolidationWorkflowResult> {
  const { agentId } = input;
  upsertSearchAttributes([{ key: AgentIdSearchAttribute, value: agentId }]);
  const started = workflowInfo().startTime.getTime();
  const result: ConsolidationWorkflowResult = {
    agentId,
    dailyReport: 'exists',
    dream: 'too-few',
    removed: 0,
    merged: 0,
    promoted: 0,
  };
  const reasons: string[] = [];

  setCurrentDetails('daily report');
  const reportSession = systemSessionId(agentId, `${started}_report`);
  try {
    const report = await store.dailyReportPrepare({ agentId, sessionId: reportSession });
    if (report.status === 'ready') {
      await llm.llmStep.executeWithOptions({ summary: `daily report ${agentId}` }, [
        { agentId, sessionId: reportSession, scenario: 'consolidation', attempt: 1, turn: 0 },
      ]);
      await store.dailyReportSave({ agentId, sessionId: reportSession, day: report.day, turn: 0 });
      result.dailyReport = 'written';
    }
  } catch (error) {
    log.warn('daily report failed', { agentId, error: String(error) });
    result.dailyReport = 'failed';
    reasons.push(`daily report: ${String(error)}`);
  }

  setCurrentDetails('dream');
  const dreamSession = systemSessionId(agentId, `${started}_dream`);
  try {
    const dream = await store.dreamPrepare({ agentId, sessionId: dreamSession });
    if (dream.status !== 'ready') {
      result.dream = dream.status;
    } else {
      await llm.llmStep.executeWithOptions({ summary: `dream ${agentId} · ${dream.observations} observations` }, [
        { agentId, sessionId: dreamSession, scenario: 'consolidation', attempt: 1, turn: 0 },
      ]);
      const applied = await store.dreamApply({ agentId, sessionId: dreamSession, turn: 0 });
      result.dream = applied.status;
      result.removed = applied.removed;
      result.merged = applied.merged;
      result.promoted = applied.promoted;
      if (applied.reason) reasons.push(applied.reason);
    }
  } catch (error) {
    log.warn('dream failed', { agentId, error: String(error) });
    result.dream = 'failed';
    reasons.push(`dream: ${String(error)}`);
  }
  setCurrentDetails(`report ${result.dailyReport} · dream ${result.dream}`);
  return reasons.length ? { ...result, reason: reasons.join('; ') } : result;
}
