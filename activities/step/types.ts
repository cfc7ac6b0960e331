/**
 * What the LLM step takes and returns: ids and a compact summary, so the conversation itself stays in
 * PostgreSQL and never enters workflow history. Workflows import these as types.
 */
import type { UsageTotals } from '../../workflows/contract';
import type { ChatResult } from '../llm/types';
import type { Scenario } from '../tools/registry';

export interface LlmStepInput {
  agentId: string;
  taskId?: string;
  sessionId: string;
  scenario: Scenario;
  /** Round attempt (1-based) and turn within it: together the step's idempotency key. */
  attempt: number;
  turn: number;
  /** First step of an attempt: open the session with the task prompt, or the "interrupted" notice. */
  opening?: { revisionFeedback?: string };
  /** Harness text merged into this turn ([SYSTEM REMINDER], comments, continuation…). */
  injections?: string[];
  /**
   * Set on a task's local step: the idempotency key of its round attempt's stop request, which the step
   * polls for (a local activity hears of a cancellation only when its workflow task ends).
   */
  stopKey?: string;
  /** Who the conversation's message is from: shown in Tier 3 as the sender's identity (seed D1 B4, E14). */
  sender?: { type: string; id: string };
}

export interface LlmStepResult {
  stopReason: ChatResult['stopReason'];
  toolCalls: Array<{ id: string; name: string; summary: string }>;
  /** The start of the assistant's text, for the workflow's status and the UI. */
  textPreview: string;
  usage: UsageTotals;
  model: string;
  provider: string;
  /** The step had already completed (an activity retry): nothing was sent to the provider. */
  replayed: boolean;
}
