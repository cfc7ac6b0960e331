import { createHash } from 'node:crypto';
import { sql, type CompiledQuery, type Kysely } from 'kysely';
import { jsonArrayFrom, jsonObjectFrom } from 'kysely/helpers/postgres';
import type { AgentRow, Database, TaskRow } from '../../schema/database';
import {
  buildSummarizerPrompt,
  buildSystemPrompt,
  countToolTokens,
  currentTimeText,
  prepareMessages,
  withCurrentTurnTail,
  SUMMARIZER_MAX_OUTPUT_TOKENS,
  SUMMARIZER_TEMPERATURE,
  SUMMARY_CACHE_CANDIDATES,
  SYSTEM_MY_TASKS_MAX,
  type PromptInputs,
  type PromptTask,
  type PromptWarning,
  type SummaryCache,
} from '../context';
import { lookupModel } from '../llm/catalog';
import type { ChatMessage, ChatResult, SystemSegment, ToolDefinition } from '../llm/types';
import { notebookQuery } from '../memory/store';
import { KNOWLEDGE_PROMPT_MAX_CHARS } from '../../workflows/rules/memory-limits';
import type { ChatRouter } from '../llm/types';
import { agentConfig } from '../store/agents';
import { PRIORITY_RANK } from '../store/task-graph';
import { grantedPermissions, type Scenario } from '../tools/registry';
import { worldFromRow, worldSelections } from './prompt-world';
import { activationsQuery, loadActivations, type Activations } from '../store/skills';
import { promptPriority } from '../../workflows/rules/priority';
import { SUMMARIZER_SYSTEM_PROMPT } from '../../prompts/system';
import { capKnowledge, knowledgeQuery } from '../memory/knowledge-store';

/** Task-board rows fetched for the prompt: the context engine shows my top 15 by priority. */
const TASK_BOARD_FETCH = SYSTEM_MY_TASKS_MAX;
/** The task states the board lists; every other state is only counted. */
const OPEN_TASK_STATES = ['pending', 'in_progress', 'blocked', 'review'];
/** Recent activity events fetched (the last 20). */
const RECENT_ACTIVITY_FETCH = 20;
/** Recent runs fetched (the last 5). */
const RECENT_RUNS_FETCH = 5;
/**
 * The events recent activity shows, and the states a recent run is in. Written into the statement as
 * literals: the partial indexes that serve the two reads (migration 042) name these exact lists, and a
 * prepared statement's generic plan can match an index predicate against literals only.
 */
const ACTIVITY_EVENT_TYPES = ['task-created', 'state-changed', 'review-submitted', 'approval-decided', 'note-added'];
const RUN_STATES = ['completed', 'failed', 'cancelled', 'review'];
const literals = (values: readonly string[]) => values.map((value) => sql.lit(value));

export interface AssembledContext {
  system: SystemSegment[];
  messages: ChatMessage[];
  messageCacheBreakpoint?: number;
  maxTokens: number;
  /** The model the prompt was budgeted for (the first candidate of the agent's route). */
  model: string;
  systemTokens: number;
  warnings: PromptWarning[];
  stages: string[];
  /** Summariser calls made for this call (0 when the summaries came from the cache). */
  summarizerCalls: number;
  /** The conversation before compression and the budget it had to fit (calibrated tokens): how near compaction is. */
  messageTokens: number;
  messageBudget: number;
}

export interface AssembleOptions {
  /** Keeps conversation summaries across calls (`createSessionSummaryCache`). */
  summaryCache?: SummaryCache;
  /** Aborts a summariser call (the activity's cancellation). */
  signal?: AbortSignal;
  /** Told about every summariser call, to record its usage; `purpose` is unique per summary prompt. */
  onSummarizerCall?: (result: ChatResult, purpose: string, durationMs: number) => Promise<void>;
}

/** Purpose label of a summariser call in `llm_calls`: `summary-` and a hash of its prompt. */
export const SUMMARY_CALL_PREFIX = 'summary-';
/** Hex digits of the prompt hash in the label: unique enough within one step. */
const SUMMARY_CALL_HASH_CHARS = 16;

/** What `loadPromptInputs` reads from PostgreSQL (one statement), before it is shaped into inputs. */
export type PromptRows = Awaited<ReturnType<typeof fetchPromptRows>>;

/**
 * The reads behind `loadPromptInputs`, on their own so that a step can start them alongside its other
 * reads (with the agent, task and activations it saw last) and pass them in as `world.rows` once it
 * has checked that those were unchanged.
 */
function promptRowsQuery(
  db: Kysely<Database>,
  agent: AgentRow,
  scenario: Scenario,
  task: TaskRow | undefined,
  activations: Activations | undefined,
  sessionId: string | undefined,
) {
  const config = agentConfig(agent);
  const context = { scenario, task, ...(activations ? { activations } : {}) };
  // The agent's own board, activity, runs and memory (each list a JSON array in the order its subquery
  // sorts, so timestamps arrive as ISO strings) and the organisation's world (colleagues, skills,
  // announcements, team status, attention): one statement.
  return db.selectNoFrom((eb) => [
    // Whether the agent row, the task row and the activations are still the ones the rows were read
    // for: the row versions (`xmin`, see `readVersioned`) and the activations as they are now.
    eb
      .selectFrom('agents')
      .select(sql<string>`xmin::text`.as('v'))
      .where('id', '=', agent.id)
      .as('agent_version'),
    eb
      .selectFrom('tasks')
      .select(sql<string>`xmin::text`.as('v'))
      .where('id', '=', task?.id ?? '')
      .as('task_version'),
    jsonArrayFrom(activationsQuery(db, sessionId ?? '', task?.id)).as('activation_rows'),
    ...worldSelections(eb, agent, config, context),
    // The board's top: open tasks by priority (urgent first), then the most recently updated.
    jsonArrayFrom(
      eb
        .selectFrom('tasks')
        .select(['id', 'title', 'priority', 'state', 'description'])
        .where('agent_id', '=', agent.id)
        .where('state', 'in', OPEN_TASK_STATES)
        .orderBy(PRIORITY_RANK)
        .orderBy('updated_at', 'desc')
        .limit(TASK_BOARD_FETCH),
    ).as('own'),
    // …and the counts the board shows beyond it: open tasks in all (overflow hint) and closed ones.
    jsonObjectFrom(
      eb
        .selectFrom('tasks')
        .select((c) => [
          c.fn.count<string>(c.case().when('state', 'in', OPEN_TASK_STATES).then(1).end()).as('open'),
          c.fn.count<string>(c.case().when('state', 'not in', OPEN_TASK_STATES).then(1).end()).as('closed'),
        ])
        .where('agent_id', '=', agent.id),
    ).as('boardCounts'),
    // The newest lifecycle events of the agent's tasks, read newest first from their partial index
    // (migration 042), then named by their task's title.
    jsonArrayFrom(
      eb
        .selectFrom(
          db
            .selectFrom('task_events')
            .select(['task_id', 'type', 'created_at', 'id'])
            .where('agent_id', '=', agent.id)
            .where('type', 'in', literals(ACTIVITY_EVENT_TYPES))
            .orderBy('id', 'desc')
            .limit(RECENT_ACTIVITY_FETCH)
            .as('recent'),
        )
        .innerJoin('tasks', 'tasks.id', 'recent.task_id')
        .select(['recent.type', 'recent.created_at', 'tasks.title'])
        .orderBy('recent.id', 'desc'),
    ).as('events'),
    jsonArrayFrom(
      eb
        .selectFrom('tasks')
        .select(['title', 'state', 'result_summary', 'updated_at'])
        .where('agent_id', '=', agent.id)
        .where('state', 'in', literals(RUN_STATES))
        .orderBy('updated_at', 'desc')
        .limit(RECENT_RUNS_FETCH),
    ).as('runs'),
    // Curated knowledge (≤ 8,000 chars, Tier 2) and the notebook (Tier 3); observations never.
    jsonArrayFrom(knowledgeQuery(db, agent.id)).as('knowledge'),
    jsonArrayFrom(notebookQuery(db, agent.id)).as('notebook'),
  ]);
}

type PromptRowsRow = Awaited<ReturnType<ReturnType<typeof promptRowsQuery>['executeTakeFirstOrThrow']>>;

/**
 * The prompt read's statement is a pure function of the agent row, scenario, task row and activations,
 * and a session's steps repeat them: its compiled form (text and parameters, about 0.5 ms of CPU to
 * build) is kept per input, oldest forgotten first, bounded like the sessions a worker remembers.
 */
const PROMPT_READS_CACHED_MAX = 2_000;
const compiledPromptReads = new Map<string, CompiledQuery<PromptRowsRow>>();

/** The prompt read's statement for these inputs, compiled (and kept, see above). */
export function promptRowsStatement(
  db: Kysely<Database>,
  agent: AgentRow,
  scenario: Scenario,
  task: TaskRow | undefined,
  activations: Activations | undefined,
  sessionId?: string,
): CompiledQuery<PromptRowsRow> {
  const key = JSON.stringify([
    agent,
    scenario,
    task ?? null,
    activations ? [[...activations.tools], [...activations.skills]] : null,
    sessionId ?? null,
  ]);
  let compiled = compiledPromptReads.get(key);
  if (compiled) compiledPromptReads.delete(key);
  else compiled = promptRowsQuery(db, agent, scenario, task, activations, sessionId).compile();
  compiledPromptReads.set(key, compiled);
  if (compiledPromptReads.size > PROMPT_READS_CACHED_MAX)
    compiledPromptReads.delete(compiledPromptReads.keys().next().value!);
  return compiled;
}

/**
 * `sessionId`: the session whose activations the row reports (`activation_rows`, with `agent_version`
 * and `task_version`), for a step that read these rows with what it saw last.
 */
export async function fetchPromptRows(
  db: Kysely<Database>,
  agent: AgentRow,
  scenario: Scenario,
  task: TaskRow | undefined,
  activations: Activations | undefined,
  sessionId?: string,
) {
  const compiled = promptRowsStatement(db, agent, scenario, task, activations, sessionId);
  const row = (await db.executeQuery(compiled)).rows[0];
  if (!row) throw new Error('the prompt read returned no row');
  const context = { scenario, task, ...(activations ? { activations } : {}) };
  return [row, worldFromRow(row, agent, agentConfig(agent), context)] as const;
}

/**
 * Loads what the prompt shows about the agent's world from PostgreSQL: tasks, activity, runs, memory,
 * and (`prompt-world.ts`) its organisation, colleagues, skills, announcements and mailbox. `world`
 * gives the discover_tools activations (or the session to read them from): activated skills are shown
 * in full and leave the catalogue. `extra` overrides any field (e.g. `skillQuery` for chat runs).
 */
export async function loadPromptInputs(
  db: Kysely<Database>,
  agent: AgentRow,
  scenario: Scenario,
  task: TaskRow | undefined,
  tools: ToolDefinition[],
  now: Date,
  model: string,
  extra: Partial<PromptInputs> = {},
  world: { sessionId?: string; activations?: Activations; rows?: PromptRows } = {},
): Promise<PromptInputs> {
  const config = agentConfig(agent);
  const activations =
    world.activations ?? (world.sessionId ? await loadActivations(db, world.sessionId, task?.id) : undefined);
  const [rows, found] = world.rows ?? (await fetchPromptRows(db, agent, scenario, task, activations));
  const { installedSkills, manager, capabilities, teamTasks, ...worldInputs } = found;
  const own = rows.own;
  const boardCounts = rows.boardCounts ?? { open: 0, closed: 0 };
  const events = rows.events.map((e) => ({ ...e, created_at: new Date(e.created_at) }));
  const runs = rows.runs.map((r) => ({ ...r, updated_at: new Date(r.updated_at) }));
  const memory = {
    knowledge: capKnowledge(rows.knowledge, KNOWLEDGE_PROMPT_MAX_CHARS),
    notebook: rows.notebook.map((n) => ({
      key: n.key,
      content: n.content,
      tag: n.tag,
      updatedAt: new Date(n.updated_at),
    })),
  };
  return {
    scenario,
    agent: {
      id: agent.id,
      name: agent.name,
      role: agent.description || undefined,
      files: { soul: agent.soul_md, agents: agent.agents_md, heartbeat: agent.heartbeat_md, tools: agent.tools_md },
      permissions: { canEditOwnFiles: config.canEditOwnFiles === true, ...grantedPermissions(config) },
      ...(config.position ? { position: config.position } : {}),
      ...(capabilities ? { capabilities } : {}),
      ...(installedSkills ? { installedSkills } : {}),
      ...(manager ? { manager } : {}),
    },
    model,
    now,
    timezone: config.timezone,
    workspace: { root: agent.workspace_dir },
    knowledge: memory.knowledge.map((k) => ({ heading: k.title, body: k.content })),
    notebook: memory.notebook.map((n) => ({ key: n.key, content: n.content, tag: n.tag, updatedAt: n.updatedAt })),
    tasks: {
      mine: own.map((t): PromptTask => ({
        id: t.id,
        title: t.title,
        priority: promptPriority(t.priority),
        status: t.id === task?.id ? `${t.state} (current)` : t.state,
        description: t.description,
      })),
      myOpenTotal: Number(boardCounts.open),
      myClosedTotal: Number(boardCounts.closed),
      ...(teamTasks ? { team: teamTasks } : {}),
    },
    recentActivity: events.reverse().map((e) => ({ at: e.created_at, type: e.type, detail: e.title })),
    recentRuns: runs.reverse().map((r) => ({
      at: r.updated_at,
      kind: 'task',
      status: r.state,
      summary: `${r.title}${r.result_summary ? `: ${r.result_summary}` : ''}`,
    })),
    tools,
    ...worldInputs,
    ...extra,
  };
}

/**
 * Builds what one LLM call sends: the three-tier system prompt (with its segment budgets)
 * and the session's messages prepared by the compression pipeline, with the cheap
 * tier as the summariser.
 */
export async function assembleContext(
  router: ChatRouter,
  inputs: PromptInputs,
  messages: ChatMessage[],
  tools: ToolDefinition[],
  options: AssembleOptions = {},
): Promise<AssembledContext> {
  const model = inputs.model ?? 'unknown';
  const info = lookupModel(model);
  const prompt = buildSystemPrompt(inputs);
  const prepared = await prepareMessages(messages, {
    contextWindow: info.contextWindow,
    modelMaxOutput: info.maxOutput,
    systemTokens: prompt.tokenEstimate,
    toolTokens: countToolTokens(tools, model),
    model,
    ...(options.summaryCache ? { summaryCache: options.summaryCache } : {}),
    summarize: async (text) => {
      const started = Date.now();
      const result = await router.chat(
        {
          system: [{ text: SUMMARIZER_SYSTEM_PROMPT, cacheBreakpoint: false }],
          messages: [{ role: 'user', content: [{ type: 'text', text }] }],
          tools: [],
          maxTokens: SUMMARIZER_MAX_OUTPUT_TOKENS,
          temperature: SUMMARIZER_TEMPERATURE,
        },
        { tier: 'cheap' },
        options.signal ? { signal: options.signal } : undefined,
      );
      const purpose = `${SUMMARY_CALL_PREFIX}${createHash('sha256').update(text).digest('hex').slice(0, SUMMARY_CALL_HASH_CHARS)}`;
      await options.onSummarizerCall?.(result, purpose, Date.now() - started);
      return result.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('\n');
    },
  });
  return {
    system: prompt.segments,
    // The time changes every minute: after the cache breakpoint, which sits on the last stored message.
    ...withCurrentTurnTail(prepared.messages, currentTimeText(inputs)),
    maxTokens: prepared.maxOutputTokens,
    model,
    systemTokens: prompt.tokenEstimate,
    warnings: prompt.warnings,
    stages: prepared.stats.stagesApplied,
    summarizerCalls: prepared.stats.summarizerCalls,
    messageTokens: prepared.stats.tokensBefore,
    messageBudget: prepared.stats.budget.messageBudget,
  };
}

/**
 * The summaries of one session in `session_summaries` (see `activities/context/summary-cache.ts`):
 * a later call over the same folded messages reuses a summary instead of paying for it again.
 */
export function createSessionSummaryCache(db: Kysely<Database>, sessionId: string): SummaryCache {
  return {
    async candidates(maxLength) {
      const rows = await db
        .selectFrom('session_summaries')
        .select(['prefix_length', 'prefix_hash', 'text', 'source'])
        .where('session_id', '=', sessionId)
        .where('prefix_length', '<=', maxLength)
        .orderBy('prefix_length', 'desc')
        .limit(SUMMARY_CACHE_CANDIDATES)
        .execute();
      return rows.map((r) => ({ length: r.prefix_length, hash: r.prefix_hash, text: r.text, source: r.source }));
    },
    async store(summary) {
      await db
        .insertInto('session_summaries')
        .values({
          session_id: sessionId,
          prefix_hash: summary.hash,
          prefix_length: summary.length,
          text: summary.text,
          source: summary.source,
        })
        .onConflict((oc) => oc.columns(['session_id', 'prefix_hash']).doNothing())
        .execute();
    },
  };
}

export { buildSummarizerPrompt };
