/**
 * The memory system's numbers and the pure
 * rules built on them: the dream plan's bounds and the memory-flush predicate. Imported by the memory
 * activities and tools, by the consolidation workflow and by unit tests; no I/O here.
 */

// ---- notebook (NOTEBOOK.md in the design) --------------------------------------------------------------

/** Agent-written notebook entries kept; the notebook is a scratchpad, so the oldest is evicted. */
export const NOTEBOOK_MAX_AGENT_ENTRIES = 15;
/** One notebook entry; longer text belongs in knowledge (memory_update) or a file. */
export const NOTEBOOK_MAX_CHARS_PER_ENTRY = 6_000;
/** Notebook keys are short labels shown as headings in the prompt. */
export const NOTEBOOK_KEY_MAX_CHARS = 80;
/** Who wrote an entry. Only `agent` entries are capped and clearable by the agent. */
export const NOTEBOOK_TAGS = ['agent', 'system', 'cpp'] as const;
export type NotebookTag = (typeof NOTEBOOK_TAGS)[number];

// ---- observations (the `## _observations` buffer of MEMORY.md) ---------------------------------

/** The observation buffer holds at most this many entries; the oldest are trimmed. */
export const OBSERVATIONS_MAX = 500;
/** One observation is one fact or lesson; a paragraph, not a document. */
export const OBSERVATION_MAX_CHARS = 4_000;
/** Observation types. */
export const OBSERVATION_TYPES = ['fact', 'note', 'task_result', 'conversation', 'insight'] as const;
export type ObservationType = (typeof OBSERVATION_TYPES)[number];
/** Tags are filters (`insight`, `role-evolution`, `domain:<topic>`), a handful per entry. */
export const OBSERVATION_MAX_TAGS = 10;
export const OBSERVATION_TAG_MAX_CHARS = 60;

// ---- curated knowledge (the `## <section>` blocks of MEMORY.md) --------------------------------

/** One curated section. */
export const KNOWLEDGE_SECTION_MAX_CHARS = 3_000;
/** All curated sections of an agent together. */
export const KNOWLEDGE_TOTAL_MAX_CHARS = 15_000;
/** How much curated knowledge enters a prompt (observations never do). */
export const KNOWLEDGE_PROMPT_MAX_CHARS = 8_000;
/** Section titles are headings (`## <title>`). */
export const KNOWLEDGE_TITLE_MAX_CHARS = 100;

// ---- search ------------------------------------------------------------------------------------

/** memory_search returns this many hits unless asked for fewer/more; the list is read by the model. */
export const MEMORY_SEARCH_DEFAULT_LIMIT = 10;
/** Upper bound on one search's hits, to keep the tool result small. */
export const MEMORY_SEARCH_MAX_LIMIT = 50;
/** Each hit is previewed at this length; the model can search more narrowly for the rest. */
export const MEMORY_SEARCH_PREVIEW_CHARS = 500;

// ---- daily report, dream, flush ------------------------------------

/** The daily report is 3–5 sentences; the stored report is capped in case the model rambles. */
export const DAILY_REPORT_MAX_CHARS = 3_000;
/** A dream runs only when the buffer has at least this many observations. */
export const DREAM_MIN_OBSERVATIONS = 50;
/** The dream prompt shows at most this many of the most recent observations. */
export const DREAM_MAX_ENTRIES = 200;
/** Each entry in the dream prompt is previewed at this length. */
export const DREAM_ENTRY_PREVIEW_CHARS = 200;
/** Existing knowledge is shown to the dream at this length, so promotions do not duplicate it. */
export const DREAM_KNOWLEDGE_PREVIEW_CHARS = 1_500;
/** Removals per dream cycle ("conservative, keep rather than delete"). */
export const DREAM_MAX_REMOVALS = 50;
/** Merges per dream cycle. */
export const DREAM_MAX_MERGES = 20;
/** Promotions into curated knowledge per dream cycle. */
export const DREAM_MAX_PROMOTIONS = 20;
/** A promotion needs this many similar observations ("3+ similar → a curated section"). */
export const DREAM_PROMOTION_MIN_SOURCES = 3;
/** A merge combines at least two entries; one entry "merged" is a rewrite the plan does not offer. */
export const DREAM_MERGE_MIN_SOURCES = 2;
/** A session longer than this is flushed to memory before it is compacted. */
export const MEMORY_FLUSH_MIN_MESSAGES = 30;

// ---- dream plan --------------------------------------------------------------------------------

export interface DreamMerge {
  removeIds: string[];
  mergedContent: string;
  tags?: string[];
}

export interface DreamPromotion {
  sourceIds: string[];
  section: string;
  content: string;
}

export interface DreamPlan {
  remove: string[];
  merge: DreamMerge[];
  promote: DreamPromotion[];
}

export type DreamPlanCheck = { ok: true; plan: DreamPlan } | { ok: false; reason: string };

/**
 * Parses and bounds-checks the dream's JSON plan against the entries it was shown. The plan is taken
 * whole or not at all: a malformed plan, an id it was not shown, an id used twice, or a cap exceeded
 * (≤50 removals, ≤20 merges, ≤20 promotions; promotions need ≥3 sources) rejects it.
 */
export function checkDreamPlan(raw: string, offeredIds: ReadonlySet<string>): DreamPlanCheck {
  const json = extractJsonObject(raw);
  if (json === undefined) return { ok: false, reason: 'the reply contains no JSON object' };
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (error) {
    return { ok: false, reason: `the plan is not valid JSON: ${(error as Error).message}` };
  }
  if (!isRecord(value)) return { ok: false, reason: 'the plan is not a JSON object' };
  const remove = value.remove ?? [];
  const merge = value.merge ?? [];
  const promote = value.promote ?? [];
  if (!isStringArray(remove)) return { ok: false, reason: '`remove` must be an array of entry ids' };
  if (!Array.isArray(merge)) return { ok: false, reason: '`merge` must be an array' };
  if (!Array.isArray(promote)) return { ok: false, reason: '`promote` must be an array' };
  if (remove.length > DREAM_MAX_REMOVALS)
    return { ok: false, reason: `${remove.length} removals exceed the cap of ${DREAM_MAX_REMOVALS}` };
  if (merge.length > DREAM_MAX_MERGES)
    return { ok: false, reason: `${merge.length} merges exceed the cap of ${DREAM_MAX_MERGES}` };
  if (promote.length > DREAM_MAX_PROMOTIONS)
    return { ok: false, reason: `${promote.length} promotions exceed the cap of ${DREAM_MAX_PROMOTIONS}` };

  const merges: DreamMerge[] = [];
  for (const [i, m] of merge.entries()) {
    if (!isRecord(m) || !isStringArray(m.removeIds) || typeof m.mergedContent !== 'string') {
      return { ok: false, reason: `merge ${i} needs removeIds (string[]) and mergedContent (string)` };
    }
    if (m.removeIds.length < DREAM_MERGE_MIN_SOURCES)
      return { ok: false, reason: `merge ${i} combines fewer than ${DREAM_MERGE_MIN_SOURCES} entries` };
    if (!m.mergedContent.trim() || m.mergedContent.length > OBSERVATION_MAX_CHARS) {
      return { ok: false, reason: `merge ${i} has empty content or more than ${OBSERVATION_MAX_CHARS} characters` };
    }
    if (m.tags !== undefined && !isStringArray(m.tags))
      return { ok: false, reason: `merge ${i}: tags must be strings` };
    merges.push({
      removeIds: m.removeIds,
      mergedContent: m.mergedContent.trim(),
      ...(m.tags ? { tags: m.tags.slice(0, OBSERVATION_MAX_TAGS) } : {}),
    });
  }
  const promotions: DreamPromotion[] = [];
  for (const [i, p] of promote.entries()) {
    if (!isRecord(p) || !isStringArray(p.sourceIds) || typeof p.section !== 'string' || typeof p.content !== 'string') {
      return { ok: false, reason: `promotion ${i} needs sourceIds (string[]), section and content (strings)` };
    }
    if (p.sourceIds.length < DREAM_PROMOTION_MIN_SOURCES) {
      return {
        ok: false,
        reason: `promotion ${i} has ${p.sourceIds.length} sources; a promotion needs at least ${DREAM_PROMOTION_MIN_SOURCES}`,
      };
    }
    const section = p.section.trim().replace(/^#+\s*/, '');
    if (!section || section.length > KNOWLEDGE_TITLE_MAX_CHARS || section === '_observations') {
      return { ok: false, reason: `promotion ${i} has an invalid section title` };
    }
    if (!p.content.trim() || p.content.length > KNOWLEDGE_SECTION_MAX_CHARS) {
      return {
        ok: false,
        reason: `promotion ${i} has empty content or more than ${KNOWLEDGE_SECTION_MAX_CHARS} characters`,
      };
    }
    promotions.push({ sourceIds: p.sourceIds, section, content: p.content.trim() });
  }

  const seen = new Set<string>();
  const all = [...remove, ...merges.flatMap((m) => m.removeIds), ...promotions.flatMap((p) => p.sourceIds)];
  for (const id of all) {
    if (!offeredIds.has(id)) return { ok: false, reason: `unknown entry id ${JSON.stringify(id)}` };
    if (seen.has(id)) return { ok: false, reason: `entry ${id} is used more than once` };
    seen.add(id);
  }
  return { ok: true, plan: { remove, merge: merges, promote: promotions } };
}

/** The first balanced `{…}` in a reply (models wrap JSON in prose or ``` fences). */
export function extractJsonObject(text: string): string | undefined {
  const start = text.indexOf('{');
  if (start < 0) return undefined;
  let depth = 0;
  let inString = false;
  let escaped = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (escaped) escaped = false;
      else if (c === '\\') escaped = true;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return text.slice(start, i + 1);
  }
  return undefined;
}

// ---- memory flush ---------------------------------------------------------------

/**
 * Whether to ask the agent to `memory_save` what matters before its session is compacted:
 * the session has more than 30 messages, a compaction is about to drop some, and this session has not
 * been flushed yet (one flush per session, as the reference code plans it).
 */
export function shouldFlushMemory(session: {
  messageCount: number;
  aboutToCompact: boolean;
  alreadyFlushed?: boolean;
}): boolean {
  return session.aboutToCompact && !session.alreadyFlushed && session.messageCount > MEMORY_FLUSH_MIN_MESSAGES;
}

// ---- helpers -----------------------------------------------------------------------------------

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isStringArray(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((v) => typeof v === 'string');
}

// ---- post-task reflection -----------------------------------------------------------

/** Reflections per agent per day; each is an LLM conversation, so they are rationed. */
export const REFLECTION_MAX_PER_DAY = 5;
/** The trace shows the task's last 8 notes … */
export const REFLECTION_NOTES = 8;
/** … each cut to 200 characters. */
export const REFLECTION_NOTE_CHARS = 200;
/** The result summary in the trace. */
export const REFLECTION_RESULT_SUMMARY_CHARS = 300;
/** Procedures of this many steps or more should become a skill. */
export const REFLECTION_SKILL_MIN_STEPS = 5;
/** A reflection saves a few insights; more tool rounds than this means it is doing work, not reflecting. */
export const REFLECTION_MAX_TOOL_ITERATIONS = 10;
