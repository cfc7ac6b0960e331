import { CancelledFailure } from '@temporalio/common';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { INTERRUPTED_RETRY_TEXT, taskPromptText } from '../../prompts/task';
import type { AgentRow } from '../../schema/database';
import type { ChatResult, ChatRouter, ChatTarget, ContentBlock, ToolDefinition, ToolUseBlock } from '../llm/types';
import { assembleContext, createSessionSummaryCache, loadPromptInputs, type AssembledContext } from './prompt';
import { calibrate, countMessageTokens, type PromptInputs } from '../context';
import { auxiliaryCallKey, llmCallInsert, recordLlmCall } from '../llm/usage';
import { evaluatePreparedContext, type CognitiveOutcome, type CognitiveRun } from './cognitive';
import { agentConfig } from '../store/agents';
import { appendMessage, appendMessageQuery, ensureSession, findMessage, SessionMessageCache } from '../store/sessions';
import { addTaskEvent, taskEventInsert } from '../store/tasks';
import { assistantMessageKey, settleUnansweredCalls, startedWithReply } from '../tools/execute';
import { requestMemoryFlushIfDue } from '../memory/flush';
import { toolDefinitions, toolsForAgent, type toolsForScenario, type Scenario } from '../tools/registry';
import { loadTaskNotes } from '../tools/task-tools';
import { withSessionUniqueToolIds } from '../llm/tool-ids';
import { createStepStreamPublisher } from '../streams/publisher';
import { streamAppendCtes } from '../streams/store';
import { guardBudget, recordCrossedThresholds, stepUsage, storedCostUsd, usageOf } from './spend';
import type { LlmStepInput, LlmStepResult } from './types';
import { activityContext, cancellationSignal, heartbeat } from './activity-context';
import { withMcpTools } from '../tools/mcp';
import { prepareCognition, responseDigest } from './step-cognition';
import { checkSeenRows, stepRows } from './seen-sessions';
import { lastUserText, replayRecorded, senderIdentity, summarize } from './step-summary';
import { secretValues } from '../security/secrets';

/** How often a running LLM call heartbeats, independent of stream chunks (time to first token can be long). */
export const LLM_HEARTBEAT_INTERVAL_MS = 1_000;

/**
 * One LLM step: loads the session from PostgreSQL, appends this turn's harness messages, assembles the
 * prompt (summaries reused from `session_summaries`), checks the budget, runs cognitive preparation on
 * the first turn of a task attempt when the agent enables it, calls the provider (streaming,
 * heartbeating, cancellable), and persists the reply, the call's usage and cost in one transaction.
 * Idempotent by (session, attempt, turn): a retry after the reply was stored returns it without calling
 * the provider again. `clock` is the prompt's "now" (a bench replays a paced clock). Returns only a compact summary, so the conversation never enters workflow
 * history; its `usage` covers the main call and the auxiliary calls made for it (summaries, preparation).
 */
export async function runLlmStep(
  db: Kysely<Database>,
  router: ChatRouter,
  input: LlmStepInput,
  clock: () => Date = () => new Date(),
): Promise<LlmStepResult> {
  return (await runLlmStepWithReply(db, router, input, clock)).step;
}

/** What the step knows beyond its result: the reply as stored and the agent row it ran with. */
export interface LlmStepReply {
  step: LlmStepResult;
  /** The assistant message's content blocks as stored (the tool calls the fused step runs without reading them back); empty when unknown. */
  content: ContentBlock[];
  agent: AgentRow;
  /** Tools discover_tools had activated when the step began. */
  activatedTools: ReadonlySet<string>;
  /** This execution stored the reply: no earlier attempt can have run (or started) its tool calls. */
  fresh: boolean;
  /** The reply's first tool call was recorded as started with it (`startedWithReply`): run it at once. */
  firstCallStarted: boolean;
}

/** `runLlmStep`, also returning the stored reply and the agent (for the fused step; never enters workflow history). */
export async function runLlmStepWithReply(
  db: Kysely<Database>,
  router: ChatRouter,
  input: LlmStepInput,
  clock: () => Date = () => new Date(),
  /** `startFirstCall`: the caller runs the reply's tool calls next (the fused step). */
  options: { startFirstCall?: boolean } = {},
): Promise<LlmStepReply> {
  const key = assistantMessageKey(input.attempt, input.turn);
  // The prompt's rows, checked against what this worker saw at the session's last step (one statement).
  const rowsChecked = checkSeenRows(db, input);
  // A session this worker has loaded: its new messages are read alongside too (again below if this step appends any).
  const knownSession = sessionMessages.has(input.sessionId);
  // Independent reads in one round trip's time.
  const [check, read, loaded] = await Promise.all([
    rowsChecked,
    // A loaded session's reply for this key, if stored, comes with its new messages (one statement fewer).
    knownSession ? undefined : findMessage(db, input.sessionId, key),
    knownSession ? sessionMessages.load(db, input.sessionId) : undefined,
  ]);
  const { agent, task, fork, activations, prefetchedRows } = await stepRows(db, input, check);
  const recorded = loaded ? sessionMessages.findLoaded(input.sessionId, key) : read;
  // MCP servers' tools join the agent's own from the step's recorded snapshot (activities/tools/mcp).
  const tools = await withMcpTools(db, toolsForAgent(input.scenario, agentConfig(agent), activations.tools), {
    agent,
    config: agentConfig(agent),
    scenario: input.scenario,
    sessionId: input.sessionId,
    stepKey: key,
    activations,
    signal: cancellationSignal(activityContext()),
  });
  if (recorded)
    return {
      step: await replayRecorded(db, input, recorded.content, tools),
      content: recorded.content,
      agent,
      activatedTools: activations.tools,
      fresh: false,
      firstCallStarted: false,
    };

  // A session this worker has loaded exists; a new one (or one this worker has not seen) is created idempotently.
  if (!knownSession)
    await ensureSession(db, {
      id: input.sessionId,
      agentId: input.agentId,
      taskId: input.taskId,
      kind: input.scenario,
    });
  let appended = !knownSession;
  if (input.opening && task) {
    appended = true;
    const existing = await findMessage(db, input.sessionId, 'task-prompt');
    if (!existing) {
      const notes = await loadTaskNotes(db, task.id);
      const text = taskPromptText(
        { id: task.id, title: task.title, description: task.description, notes },
        input.opening.revisionFeedback,
      );
      await appendMessage(db, input.sessionId, 'task-prompt', {
        role: 'user',
        kind: 'task_prompt',
        content: [{ type: 'text', text }],
      });
    } else if (input.attempt > 1) {
      // The attempt before stopped mid-turn: its calls without a result are answered from the ledger first.
      await settleUnansweredCalls(await sessionMessages.load(db, input.sessionId), tools, {
        db,
        agentId: input.agentId,
        org: agent.org,
        taskId: input.taskId,
        sessionId: input.sessionId,
        workspaceDir: agent.workspace_dir,
        signal: cancellationSignal(activityContext()) ?? new AbortController().signal,
        agentConfig: agentConfig(agent),
        heartbeat: () => heartbeat(activityContext()),
      });
      await appendMessage(db, input.sessionId, `a${input.attempt}-interrupted`, {
        role: 'user',
        kind: 'injection',
        content: [{ type: 'text', text: INTERRUPTED_RETRY_TEXT }],
      });
    }
  }
  for (const [i, text] of (input.injections ?? []).entries()) {
    appended = true;
    await appendMessage(db, input.sessionId, `a${input.attempt}-t${input.turn}-inj${i}`, {
      role: 'user',
      kind: 'injection',
      content: [{ type: 'text', text }],
    });
  }

  let messages = loaded && !appended ? loaded : await sessionMessages.load(db, input.sessionId);
  const config = agentConfig(agent);
  const target: ChatTarget = { provider: config.provider, model: config.model, tier: config.tier };
  const model = router.candidates(target)[0]?.model ?? 'unknown';
  const toolDefs = toolDefinitionsFor(input.scenario, tools);
  const ctx = activityContext();
  const signal = cancellationSignal(ctx);
  const summaryCache = createSessionSummaryCache(db, input.sessionId);
  const recordAuxiliary = async (result: ChatResult, purpose: string, durationMs: number): Promise<void> => {
    await recordLlmCall(db, {
      agentId: input.agentId,
      taskId: input.taskId,
      sessionId: input.sessionId,
      idemKey: auxiliaryCallKey(key, purpose),
      result,
      durationMs,
    });
  };
  const sender = input.sender ? await senderIdentity(db, input.sender) : undefined;
  let prefetched = prefetchedRows;
  const assemble = async (): Promise<{ inputs: PromptInputs; context: AssembledContext }> => {
    // Skills relevance: a task's title and description (set by the loader), else the latest user message.
    const query = task ? undefined : lastUserText(messages);
    const extra = { ...(sender ? { sender } : {}), ...(query ? { skillQuery: query } : {}) };
    // The prefetched reads serve the first assembly only: a rebuild follows a write (memory flush, notebook).
    const rows = prefetched;
    prefetched = undefined;
    const inputs = await loadPromptInputs(db, agent, input.scenario, task, toolDefs, clock(), model, extra, {
      activations,
      ...(rows ? { rows } : {}),
    });
    const context = await assembleContext(router, inputs, messages, toolDefs, {
      summaryCache,
      signal,
      onSummarizerCall: recordAuxiliary,
    });
    return { inputs, context };
  };

  let { inputs, context } = await assemble();
  // Before compression drops messages, the agent is asked once to save what matters.
  if (
    await requestMemoryFlushIfDue(db, input.sessionId, tools, {
      messageCount: messages.length,
      messageTokens: context.messageTokens,
      messageBudget: context.messageBudget,
    })
  ) {
    messages = await sessionMessages.load(db, input.sessionId);
    ({ inputs, context } = await assemble());
  }
  const spent = await guardBudget(
    db,
    input,
    config,
    context.systemTokens,
    countMessageTokens(context.messages, model),
    model,
  );

  // Cognitive preparation, once per task attempt, before its first main call.
  let cognitive: { run: CognitiveRun; outcome: CognitiveOutcome } | undefined;
  if (config.cognitive?.enabled === true && input.opening && task) {
    cognitive = await prepareCognition(db, router, { input, key, agent, task, config, inputs, signal });
    // The notebook changed: rebuild the prompt (Tier 3 only; the summaries come from the cache).
    if (cognitive.outcome.completed.length > 0) ({ inputs, context } = await assemble());
  }
  if (input.taskId) {
    for (const warning of context.warnings) {
      await addTaskEvent(
        db,
        input.taskId,
        'prompt-truncated',
        { ...warning },
        `trunc:${input.sessionId}:${key}:${warning.segment}`,
      );
    }
  }

  const publisher = createStepStreamPublisher(db, input, key, ctx);
  const beating = setInterval(() => heartbeat(ctx, { turn: input.turn }), LLM_HEARTBEAT_INTERVAL_MS);
  const started = Date.now();
  let result: ChatResult;
  try {
    result = await router.chat(
      {
        system: context.system,
        messages: context.messages,
        messageCacheBreakpoint: context.messageCacheBreakpoint,
        tools: toolDefs,
        maxTokens: context.maxTokens,
      },
      target,
      { signal, ...publisher.callbacks, onStreamEvent: () => undefined },
    );
  } catch (error) {
    await publisher.flush().catch(() => undefined);
    if (signal?.aborted) throw new CancelledFailure('LLM call cancelled', undefined, error as Error);
    throw error;
  } finally {
    clearInterval(beating);
  }
  result = { ...result, content: withSessionUniqueToolIds(result.content, messages, key) };
  if (result.provider === 'anthropic') {
    const estimated = context.systemTokens + countMessageTokens(context.messages, result.model);
    const reported = result.usage.inputTokens + result.usage.cacheReadTokens + result.usage.cacheWriteTokens;
    if (reported > 0) calibrate(result.model, estimated, reported);
  }

  // The reply, its usage row and the task event: one atomic statement (one round trip), each part
  // idempotent by its key, so a retry after a lost answer writes nothing twice.
  const { query: callInsert, cost: mainCost } = llmCallInsert(db, {
    agentId: input.agentId,
    taskId: input.taskId,
    sessionId: input.sessionId,
    idemKey: key,
    result,
    durationMs: Date.now() - started,
  });
  const { usage: u } = result;
  const taskEvent = input.taskId
    ? taskEventInsert(
        db,
        input.taskId,
        'llm-call-finished',
        {
          provider: result.provider,
          model: result.model,
          stopReason: result.stopReason,
          inputTokens: u.inputTokens,
          outputTokens: u.outputTokens,
          cacheReadTokens: u.cacheReadTokens,
          cacheWriteTokens: u.cacheWriteTokens,
          costUsd: mainCost,
        },
        `llm:${input.sessionId}:${key}`,
      )
    : undefined;
  // The stream's last text and its step-end join the same statement: one round trip instead of two or three.
  const closing = await publisher.closing({
    stopReason: result.stopReason,
    toolCalls: result.content.flatMap((b) => (b.type === 'tool_use' ? [b.name] : [])),
  });
  const stream = streamAppendCtes(closing.owner, closing.events);
  // The fused step's first call, when it runs as it is: its ledger row joins the same statement.
  const firstCall = result.content.find((b): b is ToolUseBlock => b.type === 'tool_use');
  // The worker's secret values, read once for the redactions of this reply's calls (summaries, arguments).
  const secrets = firstCall ? secretValues() : undefined;
  const firstStart = options.startFirstCall
    ? startedWithReply(
        firstCall,
        tools,
        {
          sessionId: input.sessionId,
          taskId: input.taskId,
          agentId: input.agentId,
          ...(fork ? { fork } : {}),
        },
        secrets,
      )
    : undefined;
  const { rows: written } = await sql<{
    inserted: boolean;
    started: boolean;
  }>`with reply as (${appendMessageQuery(db, input.sessionId, key, { role: 'assistant', content: result.content })}), usage as (${callInsert})${
    taskEvent ? sql`, event as (${taskEvent})` : sql``
  }${firstStart ? sql`, started as (${firstStart})` : sql``}, ${stream.ctes} select exists (select 1 from reply) as inserted, ${
    firstStart ? sql`exists (select 1 from started)` : sql`false`
  } as started, (select ${stream.notify} from stream_head) as notified`.execute(db);
  // Another attempt of this step stored its reply first (a zombie): ours is not the conversation's, so
  // the tools read theirs back by id (as the executeTool activity does) instead of running ours.
  const fresh = written[0]?.inserted === true;
  const stored = fresh ? result.content : [];
  if (cognitive)
    await evaluatePreparedContext({ db, router }, cognitive.run, cognitive.outcome, responseDigest(result.content));

  // The step's usage is its main call plus auxiliary calls recorded under its key. On a first attempt
  // that made none, that is the main call alone; otherwise (a retry may follow an attempt that paid for
  // a summary) it is read back.
  const auxiliary = context.summarizerCalls > 0 || cognitive !== undefined || (ctx?.info.attempt ?? 1) > 1;
  const usage = auxiliary
    ? await stepUsage(db, input.sessionId, key)
    : { ...usageOf(result), costUsd: storedCostUsd(mainCost) };
  if (spent && input.taskId) await recordCrossedThresholds(db, input.agentId, input.taskId, spent);
  return {
    step: summarize(result.content, result.stopReason, usage, result.model, result.provider, tools, false, secrets),
    content: stored,
    agent,
    activatedTools: activations.tools,
    fresh,
    firstCallStarted: fresh && written[0]?.started === true,
  };
}

/** Messages of the sessions this worker runs, loaded incrementally (see `SessionMessageCache`). */
const sessionMessages = new SessionMessageCache();

/** Tool definitions per scenario, built once: the same objects each call, so their token counts are memoised. */
const toolDefinitionCache = new Map<string, ToolDefinition[]>();

function toolDefinitionsFor(scenario: Scenario, tools: ReturnType<typeof toolsForScenario>): ToolDefinition[] {
  // A server's definitions can change under the same names: they are part of the key.
  const served = [...tools.values()].flatMap((t) =>
    t.inputJsonSchema ? [JSON.stringify([t.description, t.inputJsonSchema])] : [],
  );
  const key = `${scenario}\0${[...tools.keys()].join(',')}${served.length ? `\0${served.join('\0')}` : ''}`;
  let defs = toolDefinitionCache.get(key);
  if (!defs) toolDefinitionCache.set(key, (defs = toolDefinitions(tools)));
  return defs;
}
