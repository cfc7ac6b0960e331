/**
 * The sub-agent and tree-budget part of the contract (ARCHITECTURE.md §3 "Sub-agents"): workflow ids,
 * signals, queries and the input/output types. Imported by workflows, the client and the tests.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { UsageTotals } from './usage';
import type { BudgetNode } from './rules/subagents';
import { FailureType } from './failure-types';

/** The n-th sub-agent (1-based, counted over the parent run's whole life) of a workflow. */
export const subagentWorkflowId = (parentWorkflowId: string, n: number): string => `${parentWorkflowId}-sub-${n}`;
/** A sub-agent's own conversation. */
export const subagentSessionId = (parentWorkflowId: string, n: number): string => `sub_${parentWorkflowId}_${n}`;

export interface SubagentWorkflowInput {
  agentId: string;
  /** The task the parent works on: its LLM calls are counted in the task's cost. */
  taskId?: string;
  parentWorkflowId: string;
  /** 1-based number of this sub-agent under its parent (its workflow id ends in `-sub-{n}`). */
  n: number;
  sessionId: string;
  task: string;
  context?: string;
  /** Tool iterations this sub-agent may take (its share of the aggregate allowance). */
  maxToolIterations: number;
  /** Its cap in USD, drawn from what the parent had left; absent when the task has no budget. */
  budgetUsd?: number;
}

export interface SubagentWorkflowResult {
  /** The final answer (500 chars), or the last reasoning (1,000 chars) when it stopped at its cap. */
  result: string;
  iterations: number;
  capped: boolean;
  usage: UsageTotals;
}

/** `ApplicationFailure.type` of a sub-agent that failed (details: `[{ usage }]`, what it spent). */
export const SUBAGENT_FAILED_TYPE = FailureType.SubagentFailed;
/** `ApplicationFailure.type` of a round stopped by a human's budget decision (never retried). */
export const BUDGET_STOPPED_TYPE = FailureType.BudgetStopped;

/**
 * A human's answer when the task's tree reached its cost budget: `raise` sets the new limit (USD, above
 * what was spent) and every node continues; `stop` cancels the sub-agents and fails the task with
 * BUDGET_STOPPED_TYPE. Sent to `task-{taskId}` (forwarded to its round) or to the round itself.
 */
export interface BudgetDecision {
  decision: 'raise' | 'stop';
  newLimitUsd?: number;
  decidedBy?: string;
}
export const budgetDecisionSignal = defineSignal<[BudgetDecision]>('budgetDecision');

/** What `decideBudget` recorded: the decision and the tree's spend when it was taken. */
export interface RecordedBudgetDecision extends BudgetDecision {
  spentUsd: number;
  decidedAt: string;
}
/**
 * The same decision as an update on `task-{taskId}`: its validator refuses a decision the tree would
 * ignore (no round running, an unknown decision, a raise not above what was spent) with the failure type
 * `InvalidBudgetDecision`, so the caller learns it at once; returns the recorded decision.
 */
export const decideBudgetUpdate = defineUpdate<RecordedBudgetDecision, [BudgetDecision]>('decideBudget');
/** `ApplicationFailure.type` of a budget decision the validator refused. */
export const INVALID_BUDGET_DECISION_TYPE = FailureType.InvalidBudgetDecision;

/** Why the tree would ignore this decision, or undefined when it applies. */
export function budgetDecisionProblem(
  decision: BudgetDecision | undefined,
  spentUsd: number,
  roundRunning: boolean,
): string | undefined {
  if (!roundRunning)
    return 'no round of this task is running; a budget decision applies to the running round and its sub-agents';
  if (decision?.decision === 'stop') return undefined;
  if (decision?.decision !== 'raise')
    return `decision must be "raise" or "stop"; got ${JSON.stringify(decision?.decision)}`;
  if (typeof decision.newLimitUsd !== 'number' || !Number.isFinite(decision.newLimitUsd))
    return 'a raise needs newLimitUsd: the new limit in USD';
  if (!(decision.newLimitUsd > spentUsd))
    return `newLimitUsd ${decision.newLimitUsd} must be above what the task has spent ($${spentUsd.toFixed(4)})`;
  return undefined;
}

/**
 * The task's spend: per node (the round and each sub-agent, by workflow id; earlier rounds and attempts
 * as one node `task-{taskId}`) and in total.
 */
export interface BudgetReport {
  /** The tree's limit in USD; null when the task has no budget (spend is still accounted). */
  limitUsd: number | null;
  spentUsd: number;
  /** True while the tree waits for a `budgetDecision`: no node starts an LLM call. */
  held: boolean;
  nodes: BudgetNode[];
}
/** On the round workflow (exact) and the task workflow (as the round last reported it). */
export const budgetQuery = defineQuery<BudgetReport>('budget');

/** Internal, child → parent: what a sub-agent has spent; `reached`: it hit its cap and holds. */
export interface SubagentSpend {
  workflowId: string;
  spentUsd: number;
  reached: boolean;
}
export const subagentSpendSignal = defineSignal<[SubagentSpend]>('subagentSpend');

/** Internal, parent → child: hold (no new LLM calls) or continue, with a new cap after a raise. */
export interface BudgetHold {
  hold: boolean;
  limitUsd?: number;
}
export const budgetHoldSignal = defineSignal<[BudgetHold]>('budgetHold');

/** What a round carries over continue-as-new about its sub-agents and its tree budget. */
export interface SubagentCarry {
  started: number;
  limitUsd: number | null;
  ownSpentUsd: number;
  /** Finished sub-agents, for the per-node accounting. */
  nodes: BudgetNode[];
}
