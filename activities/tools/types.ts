import type { Kysely } from 'kysely';
import type { z } from 'zod';
import type { Database } from '../../schema/database';
import type { ForkRecord } from '../fork/runtime';
import type { ToolResultImage } from '../llm/types';

/** Governance outcome for one call (allow / approval / deny). */
export type GovernanceDecision =
  { tier: 'allow' } | { tier: 'approval'; reason: string } | { tier: 'deny'; reason: string };

export interface ToolContext {
  db: Kysely<Database>;
  agentId: string;
  /**
   * The calling agent's organisation, resolved once per step from the agents row the step already read.
   * Every id a tool takes is looked up inside it (`store/tenancy.ts`): another organisation's task,
   * agent, group or output answers exactly as an id that was never used.
   */
  org: string;
  taskId?: string;
  sessionId: string;
  toolCallId: string;
  workspaceDir: string;
  /** The activity's cancellation signal: long-running tools must stop when it fires. */
  signal: AbortSignal;
  /** A human's comment attached to the approval that let this call run. */
  approvalComment?: string;
  /** True when a human approved this call (its governance asked for approval). */
  approved?: boolean;
  agentConfig: { protectedBranches?: string[] };
  heartbeat: () => void;
  /** Set when the task is a fork: its calls replay, run in its own workspace, or are refused (`fork/tool-calls.ts`). */
  fork?: ForkRecord;
}

export interface ToolOutput {
  content: string;
  isError?: boolean;
  /** Images for the model, checked by `checkToolImage` (the text describes each one too). */
  images?: ToolResultImage[];
  /** Secrets the tool already cut out of `content` itself (shell output redacted before truncation). */
  redactions?: number;
}

/**
 * One tool, defined once: its zod schema gives both the JSON Schema sent to the model and the
 * validator for the model's arguments.
 */
export interface ToolSpec<S extends z.ZodType = z.ZodType> {
  name: string;
  description: string;
  schema: S;
  /**
   * The JSON Schema sent to the model, when it is not the zod schema's (a tool server's own
   * definition; `schema` then validates against it).
   */
  inputJsonSchema?: Record<string, unknown>;
  /**
   * True when running the tool changes the world. A side-effecting call whose outcome is unknown
   * (the worker died mid-run) is reported as interrupted instead of being run again.
   */
  sideEffecting: boolean;
  /**
   * Runs in the workflow, not in an activity (sub-agents are child workflows): the ledger returns the
   * validated call as `run-in-workflow` and the workflow records its result with `workflowResult`.
   */
  runsInWorkflow?: boolean;
  /**
   * Whether the worker offers the tool at all (its configuration can withdraw it: no search provider,
   * web fetching switched off). Default: offered. A withdrawn tool is in no tool list and no prompt.
   */
  offered?: () => boolean;
  /**
   * Runs programs in the workspace (commands, a tool server): its repositories get the agent's git
   * identity before the call, so a commit it makes is the agent's. Tools that only read and write
   * files skip that scan.
   */
  runsPrograms?: boolean;
  /** Default: allow. */
  govern?: (args: z.infer<S>, ctx: ToolContext) => Promise<GovernanceDecision> | GovernanceDecision;
  /**
   * Cleans up after a side-effecting call the worker was killed in (never run again): what a cut-off
   * run may leave behind, such as a write's partial file. A tool whose effect is one atomic step can
   * also tell what happened: `landed` with the result a finished run returns, or not landed (nothing
   * changed); without a verdict the call is reported as interrupted, its outcome unknown.
   */
  interrupted?: (args: z.infer<S>, ctx: ToolContext) => Promise<void | InterruptedVerdict>;
  /** One-line, human-readable description of the call, for approvals and activity summaries. */
  summarize?: (args: z.infer<S>) => string;
  run: (args: z.infer<S>, ctx: ToolContext) => Promise<ToolOutput>;
}

/** What a tool's `interrupted` hook found of a cut-off run's effect. */
export type InterruptedVerdict = { landed: true; content: string } | { landed: false };

export function defineTool<S extends z.ZodType>(spec: ToolSpec<S>): ToolSpec {
  return spec as unknown as ToolSpec;
}
