/**
 * `prepareMessages`: fits a stored conversation into the model's message budget.
 *
 * Budget: maxOutput = min(model max output, 40% of window); margin = min(15% of window, 30K);
 * messages = window − system − tools − maxOutput − margin.
 *
 * 0. Sanitise (a crash-resumed session becomes valid).
 * 1. More than 60 messages → the head becomes one summary message, keeping at least the last 40. The
 *    cut advances in steps of 20 messages (60 − 40): cut = 20·⌊(n − 40) / 20⌋, so between 40 and 59
 *    recent messages stay verbatim and the summarised head changes once every 20 messages rather
 *    than on every call (see "Summary reuse" below).
 * 2. Every message is capped at max(2000, budget / 8) tokens (middle cut), then sanitised.
 * 3. Still over budget:
 *    a. tool blocks before the current turn are compacted to one-line records; if still over,
 *       every tool block except the latest;
 *    b. all but the latest 40% of messages are summarised;
 *    c. all but the latest 30% are summarised, then every message is re-capped.
 * 4. Still over: the oldest messages are dropped (summaries last, the latest input never); as a last
 *    resort the latest input and then the task prompt are middle-cut.
 * Then sanitise again and place the message cache breakpoint.
 *
 * The task prompt (the first message of kind `task_prompt`, or an untagged first user message carrying
 * a task-prompt marker) is kept verbatim and first through every stage; only stage 4's last resort may shorten it.
 *
 * Summaries use the injected summariser (see `summarize.ts`), or a heuristic summary when none is given
 * or it fails.
 *
 * Summary reuse (our cost fix; the design's numbers unchanged): the design re-summarises on every call once
 * a session passes 60 messages, costing one summariser call per step and changing the head of the
 * conversation each time, which defeats the provider's message cache. With a `summaryCache`, each
 * summary is stored under a hash of the messages it folds; a call whose head is unchanged reuses it
 * byte for byte (no summariser call), and a grown head is summarised incrementally from the cached
 * summary of the longest matching shorter head. Stage 1's stepped cut makes the head repeat: over a
 * tool loop the summariser runs once per 20 new messages and the message prefix stays cacheable in
 * between. Stages 3b/3c are budget-driven and keep the design's plain cut; the cache still makes a
 * retried call over the same messages free. Counting runs in raw tokenizer units internally; the budget is converted once with the
 * model's calibration ratio, and the stats report calibrated tokens.
 */
import type { ChatMessage } from '../llm/types';
import { computeTokenBudget, perMessageCap, type TokenBudget } from './budget';
import {
  FALLBACK_CHARS_PER_TOKEN,
  LOW_MESSAGE_BUDGET_WARN_TOKENS,
  STAGE1_FOLD_STEP_MESSAGES,
  STAGE1_KEEP_MESSAGES,
  STAGE1_TRIGGER_MESSAGES,
  STAGE3B_KEEP_FRACTION,
  STAGE3C_KEEP_FRACTION,
} from './limits';
import { neutralize } from './neutralize';
import { addSanitizeStats, emptySanitizeStats, sanitizeMessageSequence, type SanitizeStats } from './sanitize';
import { capMessage } from './shrink';
import { buildHeuristicSummary, buildSummarizerPrompt, coveredCount, summaryMessage } from './summarize';
import { prefixHashes, type SummaryCache } from './summary-cache';
import { calibrationRatio, countMessageTokensRaw, safeJson } from './tokens';
import { nonResultContent, summarizeToolBlock } from './tool-block';
import {
  blockStart,
  cacheBreakpoint,
  currentTurnStart,
  findTaskPrompt,
  isResultMessage,
  isToolCall,
  lastToolBlockStart,
  trimOldest,
} from './message-units';

export interface PrepareMessagesOptions {
  /** Model context window (catalog); non-positive = unknown (64K). */
  contextWindow: number;
  /** Model max output (catalog); non-positive = unknown (16,384). */
  modelMaxOutput: number;
  /** `buildSystemPrompt(...).tokenEstimate`. */
  systemTokens: number;
  /** `countToolTokens(tools, model)`. */
  toolTokens: number;
  /** Chooses the tokenizer and the calibration ratio. */
  model: string;
  /**
   * Runs the summariser LLM on `buildSummarizerPrompt(...)` output (system SUMMARIZER_SYSTEM_PROMPT,
   * 1,024 output tokens, temperature 0.2, no tools). Absent, throwing or empty → heuristic summary.
   */
  summarize?: (prompt: string) => Promise<string>;
  /** Keeps summaries across calls (see "Summary reuse" above); absent → every summary is made afresh. */
  summaryCache?: SummaryCache;
}

export type CompressionStage =
  | 'count_summary' // stage 1
  | 'message_cap' // stage 2
  | 'tool_block_compaction' // stage 3a
  | 'summary_keep_40' // stage 3b
  | 'summary_keep_30' // stage 3c
  | 'trim' // stage 4
  | 'task_prompt_compaction'; // stage 4, last resort

export interface PrepareMessagesStats {
  budget: TokenBudget;
  /** Per-message cap of stage 2, in calibrated tokens. */
  messageCap: number;
  stagesApplied: CompressionStage[];
  tokensBefore: number;
  tokensAfter: number;
  messagesBefore: number;
  messagesAfter: number;
  /** Original messages folded into summaries by this call. */
  summarizedMessages: number;
  /** Where the last summary came from: the summariser, the heuristic, or the summary cache. */
  summarySource?: 'llm' | 'heuristic' | 'cache';
  summarizerError?: string;
  /** Summariser LLM calls this call made (0 when every summary came from the cache or the heuristic). */
  summarizerCalls: number;
  /** Summaries taken from the cache unchanged. */
  summariesReused: number;
  /** Summaries made incrementally from a cached summary of a shorter head plus the newer messages. */
  summariesExtended: number;
  shrunkMessages: number;
  compactedToolBlocks: number;
  trimmedMessages: number;
  taskPromptProtected: boolean;
  /** The message budget is under 500 tokens: the system prompt or tools are too large for this model. */
  lowBudget: boolean;
  /** Even after every stage the messages exceed the budget (the provider may reject the request). */
  overBudget: boolean;
  sanitize: SanitizeStats;
}

export interface PreparedMessages {
  messages: ChatMessage[];
  /** Index of the last message before the current turn (the trailing user messages). */
  messageCacheBreakpoint?: number;
  maxOutputTokens: number;
  stats: PrepareMessagesStats;
}

export async function prepareMessages(
  input: readonly ChatMessage[],
  opts: PrepareMessagesOptions,
): Promise<PreparedMessages> {
  const { model } = opts;
  const budget = computeTokenBudget(opts);
  const ratio = calibrationRatio(model);
  const rawBudget = Math.floor(budget.messageBudget / ratio);
  const rawCap = Math.floor(perMessageCap(budget.messageBudget) / ratio);
  const tokensOf = (m: ChatMessage) => countMessageTokensRaw(m, model);
  const sum = (ms: readonly ChatMessage[]) => ms.reduce((acc, m) => acc + tokensOf(m), 0);

  const sanitizeStats = emptySanitizeStats();
  const sanitize = (ms: readonly ChatMessage[]) => {
    const result = sanitizeMessageSequence(ms);
    addSanitizeStats(sanitizeStats, result.stats);
    return result.messages;
  };
  const stats: PrepareMessagesStats = {
    budget,
    messageCap: Math.ceil(rawCap * ratio),
    stagesApplied: [],
    tokensBefore: 0,
    tokensAfter: 0,
    messagesBefore: input.length,
    messagesAfter: 0,
    summarizedMessages: 0,
    summarizerCalls: 0,
    summariesReused: 0,
    summariesExtended: 0,
    shrunkMessages: 0,
    compactedToolBlocks: 0,
    trimmedMessages: 0,
    taskPromptProtected: false,
    lowBudget: budget.messageBudget < LOW_MESSAGE_BUDGET_WARN_TOKENS,
    overBudget: false,
    sanitize: sanitizeStats,
  };

  // 0. Sanitise and set the task prompt aside (tagged while we work, so it never merges).
  const sanitized = sanitize(input);
  const taskIndex = findTaskPrompt(sanitized);
  const originalTaskPrompt = sanitized[taskIndex];
  let taskPrompt: ChatMessage | undefined = originalTaskPrompt && { ...originalTaskPrompt, kind: 'task_prompt' };
  let work = taskIndex >= 0 ? sanitized.filter((_, i) => i !== taskIndex) : sanitized;
  stats.taskPromptProtected = taskPrompt !== undefined;
  const all = () => (taskPrompt ? [taskPrompt, ...work] : work);
  const over = () => sum(all()) > rawBudget;
  const resanitize = () => {
    const messages = sanitize(all());
    work = taskPrompt ? messages.slice(1) : messages;
  };

  /** Folds `work[0, cut)` (moved back to a tool-block boundary) into one summary; returns what it folded. */
  const summarizeBefore = async (proposedCut: number): Promise<ChatMessage[]> => {
    const cut = blockStart(work, Math.max(0, proposedCut));
    if (cut <= 0) return [];
    const older = work.slice(0, cut);
    work = [await summarizeMessages(older, opts, stats), ...work.slice(cut)];
    return older;
  };
  const summarizeHead = (keep: number) => summarizeBefore(work.length - keep);
  const capAll = () => {
    let changed = false;
    work = work.map((m) => {
      const capped = capMessage(m, rawCap, model);
      if (capped !== m) {
        stats.shrunkMessages += 1;
        changed = true;
      }
      return capped;
    });
    return changed;
  };

  // 1. Count-based summarisation, before anything is tokenised: what it folds is never counted exactly
  //    (the summariser reads 300 characters of each), so `tokensBefore` estimates those at chars / 3.5.
  let foldedEstimate = 0;
  if (all().length > STAGE1_TRIGGER_MESSAGES) {
    const folded = await summarizeBefore(stage1Cut(work.length));
    if (folded.length) {
      stats.stagesApplied.push('count_summary');
      foldedEstimate = folded.reduce((acc, m) => acc + estimateMessageTokens(m), 0);
    }
  }
  const keptOriginals = stats.stagesApplied.includes('count_summary') ? all().filter((m) => m !== work[0]) : all();
  stats.tokensBefore = Math.ceil((sum(keptOriginals) + foldedEstimate) * ratio);

  // 2. Per-message cap.
  if (capAll()) stats.stagesApplied.push('message_cap');
  resanitize();

  // 3. Budget-driven compression.
  if (over()) {
    const compactedBefore = stats.compactedToolBlocks;
    work = compactToolBlocks(work, currentTurnStart(work), stats);
    if (over()) work = compactToolBlocks(work, lastToolBlockStart(work), stats);
    resanitize();
    if (stats.compactedToolBlocks > compactedBefore) stats.stagesApplied.push('tool_block_compaction');
  }
  const base = work.length;
  if (over() && (await summarizeHead(Math.max(1, Math.floor(base * STAGE3B_KEEP_FRACTION)))).length)
    stats.stagesApplied.push('summary_keep_40');
  if (over() && (await summarizeHead(Math.max(1, Math.floor(base * STAGE3C_KEEP_FRACTION)))).length) {
    stats.stagesApplied.push('summary_keep_30');
    capAll();
  }

  // 4. Last-resort trimming.
  if (over()) {
    const trimmed = trimOldest(work, rawBudget - (taskPrompt ? tokensOf(taskPrompt) : 0), tokensOf);
    stats.trimmedMessages += work.length - trimmed.length;
    work = trimmed;
    if (stats.trimmedMessages > 0) stats.stagesApplied.push('trim');
    // Still over: only the task prompt and the latest input are left. Shorten the input first, unless
    // the task prompt alone overflows the budget, in which case it has to give way first.
    const shortenInput = () => {
      const room = rawBudget - (taskPrompt ? tokensOf(taskPrompt) : 0);
      const share = Math.floor(room / Math.max(1, work.length));
      work = work.map((m) => {
        const capped = capMessage(m, share, model);
        if (capped !== m) stats.shrunkMessages += 1;
        return capped;
      });
    };
    const shortenTaskPrompt = () => {
      if (!taskPrompt) return;
      const shortened = capMessage(taskPrompt, rawBudget - sum(work), model);
      if (shortened === taskPrompt) return;
      taskPrompt = shortened;
      stats.stagesApplied.push('task_prompt_compaction');
    };
    const steps =
      taskPrompt && tokensOf(taskPrompt) >= rawBudget
        ? [shortenTaskPrompt, shortenInput]
        : [shortenInput, shortenTaskPrompt];
    for (const step of steps) if (over()) step();
  }

  const messages = sanitize(all());
  if (taskPrompt && originalTaskPrompt) {
    // Give the task prompt back its own kind (an untagged one stays untagged).
    messages[0] =
      taskPrompt.content === originalTaskPrompt.content
        ? originalTaskPrompt
        : {
            role: 'user',
            content: taskPrompt.content,
            ...(originalTaskPrompt.kind !== undefined ? { kind: originalTaskPrompt.kind } : {}),
          };
  }
  stats.tokensAfter = Math.ceil(sum(messages) * ratio);
  stats.messagesAfter = messages.length;
  stats.overBudget = sum(messages) > rawBudget;
  const breakpoint = cacheBreakpoint(messages);
  return {
    messages,
    ...(breakpoint !== undefined ? { messageCacheBreakpoint: breakpoint } : {}),
    maxOutputTokens: budget.maxOutputTokens,
    stats,
  };
}

/**
 * Stage 1's cut: a multiple of STAGE1_FOLD_STEP_MESSAGES (20) that leaves at least STAGE1_KEEP_MESSAGES
 * (40) verbatim. Constant for 20 messages at a time, so the folded head (and its cached summary) repeats.
 */
export function stage1Cut(messages: number): number {
  return (
    STAGE1_FOLD_STEP_MESSAGES * Math.floor(Math.max(0, messages - STAGE1_KEEP_MESSAGES) / STAGE1_FOLD_STEP_MESSAGES)
  );
}

/** chars / 3.5 estimate of a message, without tokenising it. */
function estimateMessageTokens(message: ChatMessage): number {
  let chars = 0;
  for (const b of message.content)
    chars +=
      b.type === 'text'
        ? b.text.length
        : b.type === 'tool_result'
          ? b.content.length
          : b.name.length + safeJson(b.input).length;
  return Math.ceil(chars / FALLBACK_CHARS_PER_TOKEN);
}

/** Compacts every tool block that starts before `boundary`. */
function compactToolBlocks(
  messages: readonly ChatMessage[],
  boundary: number,
  stats: PrepareMessagesStats,
): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i] as ChatMessage;
    if (i < boundary && isToolCall(message) && isResultMessage(messages[i + 1])) {
      const results = messages[i + 1];
      out.push(summarizeToolBlock(message, results));
      const rest = nonResultContent(results);
      if (rest) out.push(rest);
      stats.compactedToolBlocks += 1;
      i += 1;
    } else {
      out.push(message);
    }
  }
  return out;
}

async function summarizeMessages(
  older: readonly ChatMessage[],
  opts: PrepareMessagesOptions,
  stats: PrepareMessagesStats,
): Promise<ChatMessage> {
  stats.summarizedMessages += older.reduce((acc, m) => acc + (m.kind === 'summary' && m.role === 'user' ? 0 : 1), 0);
  const cache = opts.summaryCache;
  if (!cache) return (await freshSummary(older, opts, stats)).message;

  const hashes = prefixHashes(older);
  const hash = hashes[older.length]!;
  const candidates = await cache.candidates(older.length).catch(() => []);
  const exact = candidates.find((c) => c.length === older.length && c.hash === hash);
  if (exact) {
    stats.summariesReused += 1;
    stats.summarySource = 'cache';
    return summaryFromText(exact.text);
  }
  // The longest cached head of these messages: fold its summary with the newer messages only.
  const base = candidates.find((c) => c.length > 0 && c.length < older.length && hashes[c.length] === c.hash);
  if (base) stats.summariesExtended += 1;
  const { message, source } = await freshSummary(
    base ? [summaryFromText(base.text), ...older.slice(base.length)] : older,
    opts,
    stats,
  );
  const text = message.content[0]?.type === 'text' ? message.content[0].text : '';
  await cache.store({ length: older.length, hash, text, source }).catch(() => undefined);
  return message;
}

function summaryFromText(text: string): ChatMessage {
  return { role: 'user', kind: 'summary', content: [{ type: 'text', text }] };
}

async function freshSummary(
  older: readonly ChatMessage[],
  opts: PrepareMessagesOptions,
  stats: PrepareMessagesStats,
): Promise<{ message: ChatMessage; source: 'llm' | 'heuristic' }> {
  const covered = older.reduce((acc, m) => acc + coveredCount(m), 0);
  if (opts.summarize) {
    try {
      stats.summarizerCalls += 1;
      const text = (await opts.summarize(buildSummarizerPrompt(older))).trim();
      if (text) {
        stats.summarySource = 'llm';
        return { message: summaryMessage(neutralize(text), covered, 'llm'), source: 'llm' };
      }
      stats.summarizerError = 'the summariser returned an empty text';
    } catch (error) {
      stats.summarizerError = error instanceof Error ? error.message : String(error);
    }
  }
  stats.summarySource = 'heuristic';
  return { message: summaryMessage(buildHeuristicSummary(older), covered, 'heuristic'), source: 'heuristic' };
}
