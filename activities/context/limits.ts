/**
 * Every number the context engine uses: prompt caps, segment budgets, quantisation thresholds,
 * compression stages, summariser and tokenizer settings. Pure constants, no imports, so workflow code
 * can import this file too.
 *
 * Sources: the two design documents this project implements; docs/seed-coverage.md maps each
 * constant to the rule it comes from. "Ours" marks values neither document fixes.
 */

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;

// ─── System prompt, Tier 2 (semi-stable) ────────────────────────────────────────────────────────────

/** Curated knowledge is ~2K tokens; more would crowd the conversation out of the window. */
export const SYSTEM_KNOWLEDGE_CHARS = 8_000;
/** The observation buffer never enters the prompt; it surfaces only through memory_search. */
export const KNOWLEDGE_OBSERVATIONS_HEADING = '_observations';
/** Colleagues listed in the identity section; the rest are a count plus a hint. */
export const SYSTEM_COLLEAGUES_MAX = 10;
/** Human team members listed in the identity section. */
export const SYSTEM_HUMANS_MAX = 8;
/** One user profile (users/*.md) is a summary, not a biography. */
export const SYSTEM_USER_PROFILE_CHARS = 1_500;

// ─── System prompt, Tier 3 (dynamic) ────────────────────────────────────────────────────────────────

/** The skills catalogue lists only the most relevant skills; discover_tools finds the rest. */
export const SYSTEM_SKILLS_CATALOGUE_MAX = 30;
/** Ours: one catalogue line per skill; the full description is one discover_tools call away. */
export const SKILL_CATALOGUE_DESC_CHARS = 200;
/** Relevance keywords are query words longer than 2 characters ("a", "to" match everything). */
export const SKILL_KEYWORD_MIN_CHARS = 3;
/** Own active tasks shown on the task board; overflow is a count plus a task_list hint. */
export const SYSTEM_MY_TASKS_MAX = 15;
/** Team tasks shown on the task board. */
export const SYSTEM_TEAM_TASKS_MAX = 10;
/** Task descriptions on the board are a reminder, task_get gives the full text. */
export const SYSTEM_TASK_DESC_CHARS = 150;
/** "last 3–5" attention decisions; we show the upper bound. */
export const SYSTEM_MAILBOX_DECISIONS_MAX = 5;
/** Ours: queued mailbox items previewed (the design says only "top items"); same cap as decisions. */
export const SYSTEM_MAILBOX_QUEUE_ITEMS_MAX = 5;
/** Merged content injected by a `merge` attention decision. */
export const SYSTEM_MAILBOX_MERGED_CHARS = 500;
/** One queued-item preview; check_mailbox gives the full item. */
export const SYSTEM_MAILBOX_ITEM_PREVIEW_CHARS = 120;
/** One notebook entry; the notebook is a scratchpad, not a document store. */
export const NOTEBOOK_MAX_CHARS_PER_ENTRY = 6_000;

// ─── Dynamic value quantisation ─────────────────────────────────────────────────────────────

/** Notebook entries younger than this read "just now". */
export const NOTEBOOK_AGE_JUST_NOW_MS = 5 * MINUTE_MS;
/** Notebook entries younger than this read "recent". */
export const NOTEBOOK_AGE_RECENT_MS = 30 * MINUTE_MS;
/** Notebook entries younger than this read "~Nh ago"; older ones "Nh ago". */
export const NOTEBOOK_AGE_APPROX_HOURS_MS = 2 * HOUR_MS;
/** Attention focus younger than this reads "just started". */
export const MAILBOX_ELAPSED_JUST_STARTED_MS = 1 * MINUTE_MS;
/** Attention focus younger than this reads "a few minutes". */
export const MAILBOX_ELAPSED_FEW_MINUTES_MS = 5 * MINUTE_MS;
/** Attention focus younger than this reads "~Nmin"; older ones "Nh". */
export const MAILBOX_ELAPSED_MINUTES_MS = 60 * MINUTE_MS;

// ─── Segment budgets ────────────────────────────────────────────────────────────────────────

/** TOOLS.md plus granted permissions; the tool schemas themselves travel separately. */
export const TOOLS_SEGMENT_MAX_TOKENS = 1_500;
/** The `maxSkillContextTokens` default: active skill instructions. */
export const ACTIVE_SKILLS_MAX_TOKENS = 4_000;
/** Progressive disclosure shows a collapsed skill as name + description + this much body. */
export const SKILL_DISCLOSURE_BODY_CHARS = 200;
/** Mission / work / project description framing the run. */
export const SCOPE_CONTEXT_MAX_TOKENS = 800;
/** Short-term memory is the last N activity events of the agent's scope. */
export const RECENT_ACTIVITY_MAX_EVENTS = 20;
/** Budget of the recent-activity segment. */
export const RECENT_ACTIVITY_MAX_TOKENS = 1_200;
/** One activity line's detail. */
export const RECENT_ACTIVITY_DETAIL_CHARS = 200;
/** The agent's last N run summaries. */
export const RECENT_RUNS_MAX = 5;
/** Budget of the recent-runs segment. */
export const RECENT_RUNS_MAX_TOKENS = 800;
/** One run summary. */
export const RECENT_RUN_SUMMARY_CHARS = 240;
/** The whole system message; over it, Tier 3 shrinks first (Tiers 1–2 stay byte-stable). */
export const SYSTEM_PROMPT_TARGET_TOKENS = 12_000;
/** Budget pre-flight reserves this many tokens for the response. */
export const BUDGET_PREFLIGHT_RESPONSE_RESERVE_TOKENS = 1_500;

// ─── Message budget ─────────────────────────────────────────────────────────────────────

/** The output reservation never takes more than 40% of the window. */
export const MAX_OUTPUT_WINDOW_FRACTION = 0.4;
/** Headroom for tokenizer error (tiktoken only estimates Claude) is 15% of the window… */
export const SAFETY_MARGIN_WINDOW_FRACTION = 0.15;
/** …but at most 30K tokens, so large windows are not wasted. */
export const SAFETY_MARGIN_MAX_TOKENS = 30_000;
/** Window assumed for a model the catalog does not know. */
export const DEFAULT_CONTEXT_WINDOW_TOKENS = 64_000;
/** Max output assumed for a model the catalog does not know. */
export const DEFAULT_MAX_OUTPUT_TOKENS = 16_384;
/** Below this message budget the call is nearly certain to be over-compressed; warn. */
export const LOW_MESSAGE_BUDGET_WARN_TOKENS = 500;

// ─── Compression stages ─────────────────────────────────────────────────────────────────

/** Stage 1 summarises when the session has more than this many messages… */
export const STAGE1_TRIGGER_MESSAGES = 60;
/** …keeping this many most recent messages verbatim. */
export const STAGE1_KEEP_MESSAGES = 40;
/**
 * Ours, from stage 1's numbers: stage 1's cut advances in steps of 60 − 40 = 20 messages, so the folded
 * head (and its cached summary) stays the same for 20 messages instead of changing on every call.
 */
export const STAGE1_FOLD_STEP_MESSAGES = STAGE1_TRIGGER_MESSAGES - STAGE1_KEEP_MESSAGES;
/** Per-message cap is max(this, budget / PER_MESSAGE_CAP_BUDGET_DIVISOR) tokens. */
export const PER_MESSAGE_CAP_MIN_TOKENS = 2_000;
/** No single message may take more than 1/8 of the message budget. */
export const PER_MESSAGE_CAP_BUDGET_DIVISOR = 8;
/** A shrunk text keeps its head (what was asked / the first results)… */
export const SHRINK_HEAD_FRACTION = 0.65;
/** …and its tail (the conclusion / the error); the rest of the cap is slack for the marker. */
export const SHRINK_TAIL_FRACTION = 0.25;
/** Stage 3b keeps the most recent 40% of messages and summarises the rest. */
export const STAGE3B_KEEP_FRACTION = 0.4;
/** Stage 3c keeps only the most recent 30%. */
export const STAGE3C_KEEP_FRACTION = 0.3;
/** Error results survive compaction up to this length; errors help the model self-correct. */
export const TOOL_BLOCK_ERROR_CHARS = 200;
/** Research results (search, read, fetch) keep this much of their findings. */
export const TOOL_BLOCK_RESEARCH_RESULT_CHARS = 500;
/** Ours: other successful results keep only their opening; the action already happened. */
export const TOOL_BLOCK_OTHER_RESULT_CHARS = 100;
/** Ours: compacted tool arguments; enough for a path, a query or a command line. */
export const TOOL_BLOCK_ARGS_CHARS = 200;
/** Rotating summary templates, so the model does not learn to imitate one compaction pattern. */
export const TOOL_BLOCK_TEMPLATE_COUNT = 4;
/** Tools whose results are findings (kept at TOOL_BLOCK_RESEARCH_RESULT_CHARS); `*_search` too. */
export const RESEARCH_TOOL_NAMES: readonly string[] = [
  'web_search',
  'web_fetch',
  'web_extract',
  'file_read',
  'read_file',
  'file_search',
  'grep',
  'glob',
  'list_files',
  'memory_search',
  'deliverable_search',
  'recall_activity',
  'task_get',
  'requirement_get',
];
/** An untagged first user message containing one of these is the task prompt. */
export const TASK_PROMPT_MARKERS: readonly string[] = ['TASK EXECUTION', 'task_submit_review'];
/** Ours (per ARCHITECTURE §5): a tool call with no recorded result is reported to the model as interrupted. */
export const INTERRUPTED_TOOL_RESULT_TEXT =
  'Tool call interrupted / no result recorded. It may or may not have taken effect; check before retrying.';
/** Opening of every summary message; sanitisation never merges it into a neighbour. */
export const SUMMARY_MESSAGE_PREFIX = '[Conversation history summary';

// ─── Summariser ────────────────────────────────────────────────────────────────────────────

/** Each message enters the summariser truncated to this length; the call stays cheap. */
export const SUMMARIZER_MESSAGE_CHARS = 300;
/** The summariser's whole transcript is capped here. */
export const SUMMARIZER_INPUT_CHARS = 8_000;
/** Summariser max output tokens. */
export const SUMMARIZER_MAX_OUTPUT_TOKENS = 1_024;
/** Low temperature: a summary should be faithful, not creative. */
export const SUMMARIZER_TEMPERATURE = 0.2;
/** The summariser is asked for under this many characters; the heuristic obeys it too. */
export const SUMMARY_TARGET_CHARS = 1_500;
/** Ours: the heuristic summary's share for an earlier summary it folds in (a third of the target). */
export const HEURISTIC_PREVIOUS_SUMMARY_CHARS = 500;
/** Ours: one key point (an assistant message's first sentence) in the heuristic summary. */
export const HEURISTIC_POINT_CHARS = 200;

// ─── Token counting ─────────────────────────────────────────────────────────────────────────

/** Fallback estimate when tiktoken is unavailable. */
export const FALLBACK_CHARS_PER_TOKEN = 3.5;
/** Ours: role and delimiter tokens every provider wraps around a message. */
export const MESSAGE_OVERHEAD_TOKENS = 4;
/** Ours: id and wrapper tokens of one tool_use / tool_result block. */
export const TOOL_BLOCK_OVERHEAD_TOKENS = 10;
/** Ours: wrapper tokens of one tool definition (name/description/parameters keys). */
export const TOOL_DEFINITION_OVERHEAD_TOKENS = 8;
/** Ours: tiktoken's BPE is quadratic in a pre-token's length; longer same-class runs are counted in slices. */
export const TOKENIZER_MAX_RUN_CHARS = 256;
/** Ours: calibration ratio bounds (reported / estimated); a wild sample must not wreck budgets. */
export const CALIBRATION_RATIO_MIN = 0.5;
export const CALIBRATION_RATIO_MAX = 2;
/** Ours: weight of a new sample in the calibration moving average. */
export const CALIBRATION_SMOOTHING = 0.3;
/** Ours: samples smaller than this are dominated by fixed overheads and are ignored. */
export const CALIBRATION_MIN_SAMPLE_TOKENS = 256;
