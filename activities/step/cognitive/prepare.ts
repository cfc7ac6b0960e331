/**
 * The cognitive preparation pipeline: before the first main
 * call of a task attempt, cheap calls on the cheapest configured model, without tools, prepare the
 * agent's thinking and write it into its notebook (tag `cpp`), where Tier 3 of the system prompt shows it:
 *
 * - P1 appraisal (reactive and deeper, 512 tokens) → `cognitive-context`, plus up to 3 memory searches to run;
 * - P2 directed retrieval (deliberative and deeper, code only): those searches over observations and knowledge → `relevant-context`;
 * - P3 reflection (deliberative and deeper, 512 tokens) → `reflection`;
 * - P5 evaluation (meta-cognitive only, 256 tokens), after the main call: was the context adequate? → `context-evaluation`.
 *
 * Failure policy: preparation is an optimisation, never a reason to fail the run. A timeout (15 s for
 * the whole preparation, 15 s for the evaluation), a provider error or a database error ends it and
 * the run goes on with whatever was written (possibly nothing); a `cognitive-preparation-skipped`
 * task event says why. Only the activity's own cancellation propagates.
 *
 * Idempotency: every call is recorded in `llm_calls` under the step's key (`…:cpp-appraisal`), and a
 * retried activity that finds one skips preparation: the notebook already holds its output.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../../../schema/database';
import type { AgentConfig } from '../../store/agents';
import type { ChatRouter } from '../../llm/types';
import { auxiliaryCallKey, recordLlmCall } from '../../llm/usage';
import type { ChatResult } from '../../llm/types';
import { searchMemory, upsertNotebookEntry } from '../../memory';
import { addTaskEvent } from '../../store/tasks';
import {
  phasesForDepth,
  selectCognitiveDepth,
  depthLabel,
  type CognitiveDepth,
  type CognitivePhases,
  type CognitiveScenario,
} from './depth';
import {
  APPRAISAL_MAX_TOKENS,
  COGNITIVE_NOTEBOOK_KEYS,
  COGNITIVE_TEMPERATURE,
  COGNITIVE_TIMEOUT_MS,
  EVALUATION_MAX_TOKENS,
  LABEL_CHARS,
  NOTEBOOK_KEY_COGNITIVE_CONTEXT,
  NOTEBOOK_KEY_EVALUATION,
  NOTEBOOK_KEY_REFLECTION,
  NOTEBOOK_KEY_RELEVANT_CONTEXT,
  REFLECTION_MAX_TOKENS,
  RETRIEVAL_HIT_CHARS,
  RETRIEVAL_HITS_PER_QUERY,
  appraisalPrompt,
  evaluationPrompt,
  noteFor,
  parseAppraisal,
  reflectionPrompt,
  type CognitiveSituation,
  type PreparationPrompt,
} from '../../../prompts/cognitive';
import { inline } from '../../context/neutralize';

/** Ours: a failed task this recent upgrades a reflexive scenario to reactive ("failed tasks exist"). */
export const FAILED_TASK_LOOKBACK_MS = 7 * 24 * 60 * 60_000;
/** Ours: a skip reason in a task event; provider errors can carry whole response bodies. */
export const REASON_MAX_CHARS = 500;
/** The purpose suffixes of the pipeline's `llm_calls` keys. */
export const CPP_CALL_PREFIX = 'cpp-';

/** Per-agent configuration (`AgentConfig.cognitive`). Off unless `enabled` (default false). */
export type CognitiveConfig = NonNullable<AgentConfig['cognitive']>;

export interface CognitiveDeps {
  db: Kysely<Database>;
  router: Pick<ChatRouter, 'chat'>;
}

export interface CognitiveRun {
  agentId: string;
  taskId?: string;
  sessionId: string;
  /** The main step's idempotency key; the pipeline's calls are recorded under it. */
  stepKey: string;
  scenario: CognitiveScenario;
  situation: CognitiveSituation;
  maxDepth?: CognitiveDepth;
  timeoutMs?: number;
  /** The activity's cancellation: aborts the calls and propagates. */
  signal?: AbortSignal;
}

export interface CognitiveOutcome {
  depth: CognitiveDepth;
  phases: CognitivePhases;
  /** Phases that completed, in order. */
  completed: Array<'appraisal' | 'retrieval' | 'reflection'>;
  /** Set when preparation stopped early (timeout, error) or was already done by an earlier attempt. */
  skipped?: string;
  /** What was written to the notebook, for the meta-cognitive evaluation. */
  prepared: string;
  costUsd: number;
}

/** What decides the depth besides the scenario: recent failures and blockers of the agent. */
export async function loadDepthSignals(
  db: Kysely<Database>,
  agentId: string,
  taskId: string | undefined,
  now: Date,
): Promise<{ hasFailedTasks: boolean; hasBlockers: boolean }> {
  const rows = await db
    .selectFrom('tasks')
    .select(['id', 'state', 'updated_at'])
    .where('agent_id', '=', agentId)
    .where('state', 'in', ['failed', 'blocked'])
    .where('updated_at', '>=', new Date(now.getTime() - FAILED_TASK_LOOKBACK_MS))
    .execute();
  return {
    hasFailedTasks: rows.some((r) => r.state === 'failed'),
    hasBlockers: rows.some((r) => r.state === 'blocked' && r.id !== taskId),
  };
}

/**
 * Runs P1–P3 for the depth the situation calls for. Never throws except on the activity's own
 * cancellation. See the module comment for what it writes.
 */
export async function prepareCognitiveContext(
  deps: CognitiveDeps,
  run: CognitiveRun,
  signals: { hasFailedTasks: boolean; hasBlockers: boolean },
): Promise<CognitiveOutcome> {
  const depth = selectCognitiveDepth({
    scenario: run.scenario,
    stimulusChars: run.situation.stimulus.text.length,
    ...signals,
    maxDepth: run.maxDepth,
  });
  const phases = phasesForDepth(depth);
  const outcome: CognitiveOutcome = { depth, phases, completed: [], prepared: '', costUsd: 0 };
  if (!phases.appraisal) return outcome;
  const started = Date.now();
  const eventKey = `cpp:${run.sessionId}:${run.stepKey}`;

  try {
    if (await alreadyPrepared(deps.db, run))
      return { ...outcome, skipped: 'already prepared by an earlier attempt of this step' };
    await withDeadline(run, async (signal) => {
      await deps.db
        .deleteFrom('memory_notebook')
        .where('agent_id', '=', run.agentId)
        .where('tag', '=', 'cpp')
        .where('key', 'in', [...COGNITIVE_NOTEBOOK_KEYS])
        .execute();
      const notes: string[] = [];

      const appraisalText = await cheapCall(
        deps,
        run,
        'appraisal',
        appraisalPrompt(run.situation),
        APPRAISAL_MAX_TOKENS,
        signal,
        outcome,
      );
      const appraisal = parseAppraisal(appraisalText);
      await writeNote(deps, run, NOTEBOOK_KEY_COGNITIVE_CONTEXT, appraisal.note, notes);
      outcome.completed.push('appraisal');

      let retrieved: string[] = [];
      if (phases.retrieval) {
        retrieved = await directedRetrieval(deps, run.agentId, appraisal.queries);
        if (retrieved.length) await writeNote(deps, run, NOTEBOOK_KEY_RELEVANT_CONTEXT, retrieved.join('\n'), notes);
        outcome.completed.push('retrieval');
      }
      if (phases.reflection) {
        signal.throwIfAborted();
        const reflection = await cheapCall(
          deps,
          run,
          'reflection',
          reflectionPrompt(run.situation, appraisal.note, retrieved),
          REFLECTION_MAX_TOKENS,
          signal,
          outcome,
        );
        await writeNote(deps, run, NOTEBOOK_KEY_REFLECTION, reflection, notes);
        outcome.completed.push('reflection');
      }
      outcome.prepared = notes.join('\n\n');
    });
  } catch (error) {
    if (run.signal?.aborted) throw error;
    outcome.skipped = describe(error);
  }

  if (run.taskId) {
    const data = {
      depth: depthLabel(depth),
      completed: outcome.completed,
      costUsd: outcome.costUsd,
      durationMs: Date.now() - started,
    };
    await addTaskEvent(
      deps.db,
      run.taskId,
      outcome.skipped ? 'cognitive-preparation-skipped' : 'cognitive-preparation-finished',
      outcome.skipped ? { ...data, reason: outcome.skipped } : data,
      eventKey,
    ).catch(() => undefined);
  }
  return outcome;
}

/**
 * P5 (meta-cognitive depth only): after the main call, asks whether the prepared context was adequate and notes what
 * was missing. Best effort, like the preparation: never throws except on cancellation.
 */
export async function evaluatePreparedContext(
  deps: CognitiveDeps,
  run: CognitiveRun,
  prepared: CognitiveOutcome,
  response: string,
): Promise<{ ok: boolean; reason?: string }> {
  if (!prepared.phases.evaluation || prepared.skipped !== undefined) return { ok: false, reason: 'not due' };
  const outcome: CognitiveOutcome = { ...prepared, costUsd: 0 };
  try {
    await withDeadline(run, async (signal) => {
      const text = await cheapCall(
        deps,
        run,
        'evaluation',
        evaluationPrompt(run.situation, prepared.prepared, response),
        EVALUATION_MAX_TOKENS,
        signal,
        outcome,
      );
      await writeNote(deps, run, NOTEBOOK_KEY_EVALUATION, text, []);
    });
  } catch (error) {
    if (run.signal?.aborted) throw error;
    if (run.taskId)
      await addTaskEvent(
        deps.db,
        run.taskId,
        'cognitive-evaluation-skipped',
        { reason: describe(error) },
        `cpp-eval:${run.sessionId}:${run.stepKey}`,
      ).catch(() => undefined);
    return { ok: false, reason: describe(error) };
  }
  if (run.taskId)
    await addTaskEvent(
      deps.db,
      run.taskId,
      'cognitive-evaluation-finished',
      { costUsd: outcome.costUsd },
      `cpp-eval:${run.sessionId}:${run.stepKey}`,
    ).catch(() => undefined);
  return { ok: true };
}

async function alreadyPrepared(db: Kysely<Database>, run: CognitiveRun): Promise<boolean> {
  const row = await db
    .selectFrom('llm_calls')
    .select('id')
    .where('session_id', '=', run.sessionId)
    .where('idem_key', '=', auxiliaryCallKey(run.stepKey, `${CPP_CALL_PREFIX}appraisal`))
    .executeTakeFirst();
  return row !== undefined;
}

/** One tool-less call on the cheap tier, recorded in `llm_calls`; returns its text. */
async function cheapCall(
  deps: CognitiveDeps,
  run: CognitiveRun,
  phase: 'appraisal' | 'reflection' | 'evaluation',
  prompt: PreparationPrompt,
  maxTokens: number,
  signal: AbortSignal,
  outcome: CognitiveOutcome,
): Promise<string> {
  const started = Date.now();
  const result: ChatResult = await deps.router.chat(
    {
      system: [{ text: prompt.system, cacheBreakpoint: false }],
      messages: [{ role: 'user', content: [{ type: 'text', text: prompt.user }] }],
      tools: [],
      maxTokens,
      temperature: COGNITIVE_TEMPERATURE,
    },
    { tier: 'cheap' },
    { signal },
  );
  outcome.costUsd += await recordLlmCall(deps.db, {
    agentId: run.agentId,
    taskId: run.taskId,
    sessionId: run.sessionId,
    idemKey: auxiliaryCallKey(run.stepKey, `${CPP_CALL_PREFIX}${phase}`),
    result,
    durationMs: Date.now() - started,
  });
  const text = result.content
    .flatMap((b) => (b.type === 'text' ? [b.text] : []))
    .join('\n')
    .trim();
  if (!text) throw new Error(`the ${phase} call returned no text`);
  return text;
}

async function writeNote(
  deps: CognitiveDeps,
  run: CognitiveRun,
  key: string,
  body: string,
  notes: string[],
): Promise<void> {
  const content = noteFor(run.situation.stimulus, body);
  await upsertNotebookEntry(deps.db, run.agentId, { key, content, tag: 'cpp' });
  notes.push(`## ${key}\n${content}`);
}

/** P2: the appraisal's searches over the agent's observations and knowledge; one line per distinct hit. */
async function directedRetrieval(deps: CognitiveDeps, agentId: string, queries: string[]): Promise<string[]> {
  const seen = new Set<string>();
  const lines: string[] = [];
  for (const query of queries) {
    for (const hit of await searchMemory(deps.db, agentId, query, { limit: RETRIEVAL_HITS_PER_QUERY })) {
      const id = hit.kind === 'observation' ? `o:${hit.id}` : `k:${hit.title}`;
      if (seen.has(id)) continue;
      seen.add(id);
      lines.push(
        hit.kind === 'observation'
          ? `- (${hit.type}) ${inline(hit.content, RETRIEVAL_HIT_CHARS)}`
          : `- [${inline(hit.title, LABEL_CHARS)}] ${inline(hit.content, RETRIEVAL_HIT_CHARS)}`,
      );
    }
  }
  return lines;
}

/**
 * Runs `work` with a signal that fires on the activity's cancellation or after the timeout, and
 * rejects as soon as it fires even if `work` does not notice (a database call cannot be aborted).
 */
async function withDeadline(run: CognitiveRun, work: (signal: AbortSignal) => Promise<void>): Promise<void> {
  const timeoutMs = run.timeoutMs ?? COGNITIVE_TIMEOUT_MS;
  const signal = AbortSignal.any([AbortSignal.timeout(timeoutMs), ...(run.signal ? [run.signal] : [])]);
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () =>
      reject(
        run.signal?.aborted ? run.signal.reason : new Error(`cognitive preparation timed out after ${timeoutMs} ms`),
      );
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    await Promise.race([work(signal), aborted]);
  } finally {
    if (onAbort) signal.removeEventListener('abort', onAbort);
    aborted.catch(() => undefined);
  }
}

function describe(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.length > REASON_MAX_CHARS ? `${message.slice(0, REASON_MAX_CHARS - 1)}…` : message;
}
