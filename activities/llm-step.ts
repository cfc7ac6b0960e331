import { Context } from '@temporalio/activity';
import { CancelledFailure } from '@temporalio/common';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../schema/database';
import { INTERRUPTED_RETRY_TEXT, taskPromptText } from '../workflows/rules/harness';
import { addUsage, ZERO_USAGE_TOTALS, type UsageTotals } from '../workflows/contract';
import { costUsd } from './llm/cost';
import type { ChatCallbacks, ChatRequest, ChatResult, ToolUseBlock } from './llm/types';
import { assembleContext, loadPromptInputs } from './prompt';
import { calibrate, countMessageTokens } from './context';
import { budgetExceededFailure, budgetPeriodStart, checkBudget, crossedThresholds, estimateCallCostUsd } from './llm/budget';
import { agentConfig, findAgent } from './store/agents';
import { appendMessage, ensureSession, findMessage, loadMessages } from './store/sessions';
import { addTaskEvent, findTask } from './store/tasks';
import { assistantMessageKey } from './tools/execute';
import { summarizeCall, toolDefinitions, toolsForScenario, type Scenario } from './tools/registry';
import { loadTaskNotes } from './tools/task-tools';
import { unknownAgent } from './errors';

/** How often a running LLM call heartbeats, independent of stream chunks (time to first token can be long). */
export const LLM_HEARTBEAT_INTERVAL_MS = 1_000;
/** Streamed text is published in batches at most this often. */
export const PROGRESS_PUBLISH_INTERVAL_MS = 250;
/** PostgreSQL NOTIFY channel carrying live text deltas: `{ taskId, sessionId, text }`. */
export const PROGRESS_CHANNEL = 'agent_progress';
/** NOTIFY payloads must stay under PostgreSQL's 8,000-byte limit. */
const NOTIFY_MAX_TEXT_CHARS = 2_000;

export interface ChatTarget {
  provider?: string;
  model?: string;
  tier?: 'cheap' | 'standard' | 'premium';
}

/** The part of the LLM router the step needs. */
export interface ChatRouter {
  /** The route's candidates in order; the first is the model the prompt is budgeted for. */
  candidates(target: ChatTarget): Array<{ provider: string; model: string }>;
  chat(
    request: Omit<ChatRequest, 'model' | 'maxTokens'> & { maxTokens?: number },
    target: ChatTarget,
    callbacks?: ChatCallbacks,
  ): Promise<ChatResult>;
}

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

const TEXT_PREVIEW_CHARS = 200;

/**
 * One LLM step: loads the session from PostgreSQL, appends this turn's harness messages, assembles the
 * prompt, calls the provider (streaming, heartbeating, cancellable), and persists the reply, the call's
 * usage and cost in one transaction. Idempotent by (session, attempt, turn): a retry after the reply
 * was stored returns it without calling the provider again. Returns only a compact summary, so the
 * conversation never enters workflow history.
 */
export async function runLlmStep(db: Kysely<Database>, router: ChatRouter, input: LlmStepInput): Promise<LlmStepResult> {
  const key = assistantMessageKey(input.attempt, input.turn);
  const agent = await findAgent(db, input.agentId);
  if (!agent) throw unknownAgent(input.agentId);
  const tools = toolsForScenario(input.scenario);

  const recorded = await findMessage(db, input.sessionId, key);
  if (recorded) return replayRecorded(db, input, recorded.content, tools);

  const task = input.taskId ? await findTask(db, input.taskId) : undefined;
  await ensureSession(db, { id: input.sessionId, agentId: input.agentId, taskId: input.taskId, kind: input.scenario });
  if (input.opening && task) {
    const existing = await findMessage(db, input.sessionId, 'task-prompt');
    if (!existing) {
      const notes = await loadTaskNotes(db, task.id);
      const text = taskPromptText({ id: task.id, title: task.title, description: task.description, notes }, input.opening.revisionFeedback);
      await appendMessage(db, input.sessionId, 'task-prompt', { role: 'user', kind: 'task_prompt', content: [{ type: 'text', text }] });
    } else if (input.attempt > 1) {
      await appendMessage(db, input.sessionId, `a${input.attempt}-interrupted`, {
        role: 'user',
        kind: 'injection',
        content: [{ type: 'text', text: INTERRUPTED_RETRY_TEXT }],
      });
    }
  }
  for (const [i, text] of (input.injections ?? []).entries()) {
    await appendMessage(db, input.sessionId, `a${input.attempt}-t${input.turn}-inj${i}`, { role: 'user', kind: 'injection', content: [{ type: 'text', text }] });
  }

  const messages = await loadMessages(db, input.sessionId);
  const config = agentConfig(agent);
  const target: ChatTarget = { provider: config.provider, model: config.model, tier: config.tier };
  const model = router.candidates(target)[0]?.model ?? 'unknown';
  const toolDefs = toolDefinitions(tools);
  const inputs = await loadPromptInputs(db, agent, input.scenario, task, toolDefs, new Date(), model);
  const context = await assembleContext(router, inputs, messages, toolDefs);
  if (input.taskId) {
    for (const warning of context.warnings) {
      await addTaskEvent(db, input.taskId, 'prompt-truncated', { ...warning }, `trunc:${input.sessionId}:${key}:${warning.segment}`);
    }
  }
  const spent = await guardBudget(db, input, config, context.systemTokens, countMessageTokens(context.messages, model), model);

  const ctx = activityContext();
  const publisher = new ProgressPublisher(db, input.taskId, input.sessionId);
  const heartbeat = setInterval(() => ctx?.heartbeat({ turn: input.turn }), LLM_HEARTBEAT_INTERVAL_MS);
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
      { signal: ctx?.cancellationSignal, onTextDelta: (t) => publisher.push(t), onStreamEvent: () => undefined },
    );
  } catch (error) {
    if (ctx?.cancellationSignal.aborted) throw new CancelledFailure('LLM call cancelled', undefined, error as Error);
    throw error;
  } finally {
    clearInterval(heartbeat);
    await publisher.flush().catch(() => undefined);
  }
  if (result.provider === 'anthropic') {
    const estimated = context.systemTokens + countMessageTokens(context.messages, result.model);
    const reported = result.usage.inputTokens + result.usage.cacheReadTokens + result.usage.cacheWriteTokens;
    if (reported > 0) calibrate(result.model, estimated, reported);
  }

  const usage = addUsage(ZERO_USAGE_TOTALS, { ...result.usage, costUsd: costUsd(result.usage, result.model) });
  await db.transaction().execute(async (trx) => {
    await appendMessage(trx, input.sessionId, key, { role: 'assistant', content: result.content });
    await trx
      .insertInto('llm_calls')
      .values({
        agent_id: input.agentId,
        task_id: input.taskId ?? null,
        session_id: input.sessionId,
        idem_key: key,
        provider: result.provider,
        model: result.model,
        input_tokens: usage.inputTokens,
        output_tokens: usage.outputTokens,
        cache_read_tokens: usage.cacheReadTokens,
        cache_write_tokens: usage.cacheWriteTokens,
        cost_usd: usage.costUsd,
        duration_ms: Date.now() - started,
        stop_reason: result.stopReason,
      })
      .onConflict((oc) => oc.columns(['session_id', 'idem_key']).doNothing())
      .execute();
    if (input.taskId) {
      await addTaskEvent(trx, input.taskId, 'llm-call-finished', { model: result.model, stopReason: result.stopReason, ...usage }, `llm:${input.sessionId}:${key}`);
    }
  });
  if (spent && input.taskId) {
    for (const percent of crossedThresholds(spent.before, spent.before + usage.costUsd, spent.limit)) {
      await addTaskEvent(db, input.taskId, 'budget-threshold-crossed', { percent, limitUsd: spent.limit, spentUsd: spent.before + usage.costUsd }, `budget:${spent.periodStart}:${percent}`);
    }
  }
  return summarize(result.content, result.stopReason, usage, result.model, result.provider, tools, false);
}

/**
 * Seed D2's budget guard, before any provider request: what the agent spent this period plus this
 * call's estimate (system + messages + 1,500 reserved for the answer) must fit its budget unless
 * overage is allowed. Over budget → a "Budget exceeded" event and a non-retryable failure.
 */
async function guardBudget(
  db: Kysely<Database>,
  input: LlmStepInput,
  config: ReturnType<typeof agentConfig>,
  systemTokens: number,
  userTokens: number,
  model: string,
): Promise<{ before: number; limit: number; periodStart: number } | undefined> {
  if (config.budgetUsd === undefined) return undefined;
  const period = config.budgetPeriod ?? 'month';
  const periodStart = budgetPeriodStart(period, Date.now());
  const row = await db
    .selectFrom('llm_calls')
    .select((eb) => eb.fn.coalesce(eb.fn.sum<string>('cost_usd'), eb.lit(0)).as('spent'))
    .where('agent_id', '=', input.agentId)
    .where('created_at', '>=', new Date(periodStart))
    .executeTakeFirstOrThrow();
  const before = Number(row.spent);
  const check = checkBudget({
    unit: 'usd',
    spent: before,
    limit: config.budgetUsd,
    estimate: estimateCallCostUsd(systemTokens, userTokens, model),
    allowOverage: config.allowBudgetOverage === true,
  });
  if (!check.ok) {
    const failure = budgetExceededFailure(check, { agentId: input.agentId, period });
    if (input.taskId) await addTaskEvent(db, input.taskId, 'budget-exceeded', { message: failure.message }, `budget-exceeded:${input.sessionId}:${input.attempt}:${input.turn}`);
    throw failure;
  }
  return { before, limit: config.budgetUsd, periodStart };
}

async function replayRecorded(
  db: Kysely<Database>,
  input: LlmStepInput,
  content: unknown[],
  tools: ReturnType<typeof toolsForScenario>,
): Promise<LlmStepResult> {
  const call = await db
    .selectFrom('llm_calls')
    .selectAll()
    .where('session_id', '=', input.sessionId)
    .where('idem_key', '=', assistantMessageKey(input.attempt, input.turn))
    .executeTakeFirst();
  const usage: UsageTotals = call
    ? { inputTokens: call.input_tokens, outputTokens: call.output_tokens, cacheReadTokens: call.cache_read_tokens, cacheWriteTokens: call.cache_write_tokens, costUsd: Number(call.cost_usd) }
    : ZERO_USAGE_TOTALS;
  const blocks = content as ChatResult['content'];
  const stopReason = (call?.stop_reason as ChatResult['stopReason'] | null) ?? (blocks.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn');
  return summarize(blocks, stopReason, usage, call?.model ?? 'unknown', call?.provider ?? 'unknown', tools, true);
}

function summarize(
  content: ChatResult['content'],
  stopReason: ChatResult['stopReason'],
  usage: UsageTotals,
  model: string,
  provider: string,
  tools: ReturnType<typeof toolsForScenario>,
  replayed: boolean,
): LlmStepResult {
  const toolCalls = content
    .filter((b): b is ToolUseBlock => b.type === 'tool_use')
    .map((b) => ({ id: b.id, name: b.name, summary: summarizeCall(tools, b.name, b.input) }));
  const text = content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('\n');
  return { stopReason, toolCalls, textPreview: text.slice(0, TEXT_PREVIEW_CHARS), usage, model, provider, replayed };
}

function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}

/** Batches streamed text and publishes it with NOTIFY for live followers (CLI, services). Best effort. */
class ProgressPublisher {
  private buffer = '';
  private lastFlush = 0;
  private pending: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly taskId: string | undefined,
    private readonly sessionId: string,
  ) {}

  push(text: string): void {
    this.buffer += text;
    if (Date.now() - this.lastFlush >= PROGRESS_PUBLISH_INTERVAL_MS) this.pending = this.pending.then(() => this.flush()).catch(() => undefined);
  }

  async flush(): Promise<void> {
    if (!this.buffer) return;
    const text = this.buffer.slice(0, NOTIFY_MAX_TEXT_CHARS);
    this.buffer = this.buffer.slice(text.length);
    this.lastFlush = Date.now();
    const payload = JSON.stringify({ taskId: this.taskId, sessionId: this.sessionId, text });
    await sql`select pg_notify(${PROGRESS_CHANNEL}, ${payload})`.execute(this.db);
  }
}
