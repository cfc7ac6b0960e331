import type { Kysely } from 'kysely';
import type { AgentRow, Database } from '../../schema/database';
import type { ToolUseBlock } from '../llm/types';
import type { ChatRouter } from '../llm/types';
import type { LlmStepInput, LlmStepResult } from './types';
import { runLlmStepWithReply } from './llm-step';
import { agentConfig, ensureWorkspace, findAgent, InvalidAgentError } from '../store/agents';
import { assistantMessageKey, executeToolCall, type ExecuteToolInput, type ExecuteToolResult } from '../tools/execute';
import { mayCallExternalTools, withMcpTools } from '../tools/mcp';
import { toolsForAgent, type Scenario } from '../tools/registry';
import { unknownAgent } from '../errors';
import { loadActivations } from '../store/skills';
import { DISCOVER_TOOLS } from '../tools/discover-tools';
import { inToolSpan } from '../tracing';
import { activityContext, cancellationSignal, heartbeat } from './activity-context';
import { forkedAgent, loadFork } from '../fork/runtime';
import { forkWorkspaceRoot } from '../fork/workspace';
import type { ToolSpec } from '../tools/types';

/** How often a running tool heartbeats, so cancellation and worker death are noticed in seconds. */
export const TOOL_HEARTBEAT_INTERVAL_MS = 1_000;

/** A tool call the step did not run: it needs a human (or follows one that does), so the workflow runs it. */
export interface DeferredToolCall {
  id: string;
  name: string;
  summary: string;
  /** Set on the first deferred call: governance asked for approval (the ledger has no row yet). */
  approval?: Extract<ExecuteToolResult, { kind: 'approval-required' }>;
  /** Set on the first deferred call: a tool that runs in the workflow (sub-agents), validated, not yet run. */
  inWorkflow?: Extract<ExecuteToolResult, { kind: 'run-in-workflow' }>;
}

export interface StepWithToolsResult extends LlmStepResult {
  /** The calls this step ran, in the model's order, with their ledger outcome (previews only). */
  toolResults: Array<{ id: string; summary: string; result: Extract<ExecuteToolResult, { kind: 'done' }> }>;
  /** The first call that needs approval (or runs in the workflow) and every call after it, in order; empty when all ran. */
  deferred: DeferredToolCall[];
  /** Wall time inside the step activity, ms, as the step measured it (the loop bench reports it from history). */
  elapsedMs?: number;
}

/**
 * Runs one tool call through the exactly-once ledger (`executeToolCall`) with a 1 s heartbeat, so a
 * cancelled or dead activity is noticed in seconds. Shared by the `executeTool` activity and the fused
 * step. Outside an activity (the bench's in-process driver) it runs without heartbeats.
 */
export async function runToolWithLedger(
  db: Kysely<Database>,
  input: ExecuteToolInput & { scenario: Scenario },
  heartbeatDetails?: unknown,
  /**
   * What the fused step already holds, not read again: the agent row it ran with, the call as stored,
   * the activated tools (unless a discover_tools call may have changed them) and whether the reply is
   * fresh (stored by this execution, so no ledger row can exist for its calls yet).
   */
  known?: { agent: AgentRow; call: ToolUseBlock; activated?: ReadonlySet<string>; fresh?: boolean; started?: boolean },
): Promise<ExecuteToolResult> {
  const found = known?.agent ?? (await findAgent(db, input.agentId));
  if (!found) throw unknownAgent(input.agentId);
  // A fork runs in its own workspace with its overrides (the fused step's agent already has them).
  const fork = await loadFork(db, input.taskId);
  const agent = fork && !known ? forkedAgent(found, fork) : found;
  // Tools run in the workspace: a missing folder would surface as `spawn … ENOENT` from every command.
  // One the roots do not allow (a row written before the rule, or around the API) runs no tool at all.
  // A fork's folder lies under the forks' root, which only the worker's check of a fork accepts.
  const placement = fork ? { extraRoots: [forkWorkspaceRoot()] } : {};
  const workspaceRefusal = await ensureWorkspace(agent, agent.workspace_dir, { ...placement, gitIdentity: false }).then(
    () => undefined,
    (error: unknown) => {
      if (error instanceof InvalidAgentError) return error.message;
      throw error;
    },
  );
  const ctx = activityContext();
  const beat = (): void => heartbeat(ctx, heartbeatDetails);
  const beating = setInterval(beat, TOOL_HEARTBEAT_INTERVAL_MS);
  const config = agentConfig(agent);
  try {
    // Tools discover_tools activated in this session or task are dispatched too.
    const activations =
      known?.activated && !mayCallExternalTools(config)
        ? undefined
        : await loadActivations(db, input.sessionId, input.taskId);
    const activated = known?.activated ?? activations!.tools;
    // The MCP tools the call's step offered, from its snapshot; none (no server started) in a refused workspace.
    const tools = workspaceRefusal
      ? refuseEveryTool(toolsForAgent(input.scenario, config, activated), workspaceRefusal)
      : activations
        ? await withMcpTools(db, toolsForAgent(input.scenario, config, activated), {
            agent,
            config,
            scenario: input.scenario,
            sessionId: input.sessionId,
            stepKey: assistantMessageKey(input.attempt, input.turn),
            activations: { ...activations, tools: new Set(activated) },
            signal: cancellationSignal(ctx),
          })
        : toolsForAgent(input.scenario, config, activated);
    // The workspace's repositories get the agent's git identity before a call that runs programs (or
    // one not known here); a call known to only touch files skips that scan.
    const fileOnly = known?.call !== undefined && tools.get(known.call.name)?.runsPrograms !== true;
    if (!fileOnly && !workspaceRefusal) await ensureWorkspace(agent, agent.workspace_dir, placement);
    return await inToolSpan({ toolCallId: input.toolCallId, ...(known?.call ? { tool: known.call.name } : {}) }, () =>
      executeToolCall(
        input,
        tools,
        {
          db,
          agentId: input.agentId,
          // The agents row read above (or the one the fused step holds): no query per tool call.
          org: agent.org,
          taskId: input.taskId,
          sessionId: input.sessionId,
          workspaceDir: agent.workspace_dir,
          signal: cancellationSignal(ctx) ?? new AbortController().signal,
          agentConfig: config,
          heartbeat: beat,
          ...(fork ? { fork } : {}),
        },
        known?.call,
        // A call recorded as started with its reply is closed as denied when the workspace is refused.
        { fresh: known?.fresh === true, started: known?.started === true && !workspaceRefusal },
      ),
    );
  } finally {
    clearInterval(beating);
  }
}

/**
 * The tool set with every tool denied by policy, naming why: the call is recorded in the ledger as a
 * failed call the model reads ("Denied by policy: …"), exactly once, and nothing runs.
 */
function refuseEveryTool(tools: ReadonlyMap<string, ToolSpec>, refusal: string): Map<string, ToolSpec> {
  const reason = `the agent's workspace folder is refused, so no tool runs until an operator moves it (${refusal})`;
  return new Map(
    [...tools].map(([name, spec]): [string, ToolSpec] => [name, { ...spec, govern: () => ({ tier: 'deny', reason }) }]),
  );
}

/**
 * One loop iteration in one activity: the LLM step (`runLlmStep`), then the tool calls it asked for,
 * sequentially in the model's order, each through the exactly-once ledger, until one needs a human.
 * That call and every later one are returned as `deferred`, and the workflow runs them after the
 * decision exactly as before. One activity and one workflow task per iteration instead of 1 + n
 * activities and ~2 workflow tasks.
 *
 * Retries are safe: the step's reply is found by its key and not requested again, a finished tool call
 * is read back from the ledger, and a side-effecting call that was cut off mid-run is reported to the
 * model as interrupted and never run twice. The heartbeat details name the call being run, so the
 * Temporal UI shows what a long step is doing; the result lists every call with its summary and preview.
 */
export async function runStepWithTools(
  db: Kysely<Database>,
  router: ChatRouter,
  input: LlmStepInput,
  clock?: () => Date,
): Promise<StepWithToolsResult> {
  const { step, content, agent, activatedTools, fresh, firstCallStarted } = await runLlmStepWithReply(
    db,
    router,
    input,
    clock,
    { startFirstCall: true },
  );
  const stored = new Map(content.flatMap((b) => (b.type === 'tool_use' ? [[b.id, b] as const] : [])));
  let activated: ReadonlySet<string> | undefined = activatedTools;
  const toolResults: StepWithToolsResult['toolResults'] = [];
  const deferred: DeferredToolCall[] = [];
  for (const call of step.toolCalls) {
    if (deferred.length > 0) {
      deferred.push(call);
      continue;
    }
    const result = await runToolWithLedger(
      db,
      {
        agentId: input.agentId,
        taskId: input.taskId,
        sessionId: input.sessionId,
        attempt: input.attempt,
        turn: input.turn,
        toolCallId: call.id,
        scenario: input.scenario,
      },
      { turn: input.turn, tool: call.name, summary: call.summary },
      stored.has(call.id)
        ? {
            agent,
            call: stored.get(call.id)!,
            activated,
            fresh,
            started: firstCallStarted && call === step.toolCalls[0],
          }
        : undefined,
    );
    // discover_tools may have activated tools for the calls after it: those read the activations again.
    if (call.name === DISCOVER_TOOLS) activated = undefined;
    if (result.kind === 'approval-required') deferred.push({ ...call, approval: result });
    else if (result.kind === 'run-in-workflow') deferred.push({ ...call, inWorkflow: result });
    else toolResults.push({ id: call.id, summary: call.summary, result });
  }
  return { ...step, toolResults, deferred };
}
