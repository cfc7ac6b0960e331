/**
 * The eval workflow's contract (issue 25): its input and result, its workflow id, the ids of the forks
 * it makes. Imported by the workflow, the activities, the client and the API.
 */
import type { CandidateTotals, EvalRow } from '../activities/fork/graders';
import type { EvalCandidate } from '../activities/fork/spec';
import type { ForkInput } from './contract';

export const evalWorkflowId = (evalId: string): string => `eval-${evalId}`;
/** The fork of the i-th selected task under the j-th candidate: stable, so a replayed eval finds its forks. */
export const evalForkTaskId = (evalId: string, taskIndex: number, candidateIndex: number): string =>
  `${evalId}.t${taskIndex + 1}.c${candidateIndex + 1}`;

/** Forks running at once unless the input says otherwise: a few, so an eval does not crowd out live work. */
export const EVAL_DEFAULT_CONCURRENCY = 4;
/** The most forks one eval runs at once. */
export const EVAL_MAX_CONCURRENCY = 20;
/**
 * A fork's tool call that asks a human waits this long, then is answered "timed out": nobody reviews
 * forks' calls, and the grader counts the request as needing a human.
 */
export const EVAL_APPROVAL_TIMEOUT_MS = 1_000;

/** Recorded tasks by id, or by a Temporal list query over task workflows (`AgentId="scribe" AND TaskState="completed"`). */
export interface EvalSelection {
  taskIds?: string[];
  query?: string;
}

/** An LLM judge: its rubric (the text of the rubric file) and the model that grades. */
export interface EvalJudge {
  rubric: string;
  provider?: string;
  model?: string;
}

export interface EvalWorkflowInput {
  evalId: string;
  selection: EvalSelection;
  candidates: EvalCandidate[];
  /** The whole eval's cost budget in USD (every fork and the judge); absent: no limit. */
  budgetUsd?: number;
  concurrency?: number;
  judge?: EvalJudge;
}

export interface EvalRunRef {
  evalId: string;
  sourceTaskId: string;
  forkTaskId: string;
}

export interface EvalWorkflowResult {
  evalId: string;
  rows: EvalRow[];
  totals: CandidateTotals[];
  spentUsd: number;
  table: string;
}

/** The fork an eval makes of a task under a candidate: step 0, the candidate's changes as overrides. */
export function candidateForkInput(sourceTaskId: string, c: EvalCandidate): ForkInput {
  const overrides = {
    ...(c.provider ? { provider: c.provider } : {}),
    ...(c.model ? { model: c.model } : {}),
    ...(c.tier ? { tier: c.tier } : {}),
    ...(c.identity ? { identity: c.identity } : {}),
    ...(c.instructions ? { instructions: c.instructions } : {}),
  };
  return {
    sourceTaskId,
    atStep: 0,
    ...(Object.keys(overrides).length ? { overrides } : {}),
    ...(c.allowTools?.length ? { allowTools: c.allowTools } : {}),
  };
}
