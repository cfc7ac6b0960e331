/**
 * The context engine: system prompt assembly, message compression and token counting.
 * Pure modules (no I/O, no clock): the LLM-step activity loads the inputs and calls these.
 */
export * from './budget';
export * from './limits';
export { buildSystemPrompt, systemPromptText } from './system-prompt';
export type * from './prompt-types';
export { filterSkillsByRelevance, LIGHTWEIGHT_SCENARIOS, relevanceKeywords, relevanceScore } from './sections-dynamic';
export {
  CHAT_PREAMBLE,
  DEFAULT_HEARTBEAT_CHECKLIST,
  HEARTBEAT_USER_MESSAGE,
  TASK_PREAMBLE,
} from '../../prompts/system';
export { prepareMessages, stage1Cut } from './prepare-messages';
export { cacheBreakpoint, findTaskPrompt } from './message-units';
export {
  createMemorySummaryCache,
  messageHash,
  prefixHashes,
  SUMMARY_CACHE_CANDIDATES,
  type CachedSummary,
  type SummaryCache,
} from './summary-cache';
export type {
  CompressionStage,
  PrepareMessagesOptions,
  PrepareMessagesStats,
  PreparedMessages,
} from './prepare-messages';
export { sanitizeMessageSequence, type SanitizeStats } from './sanitize';
export { buildHeuristicSummary, buildSummarizerPrompt } from './summarize';
export { SUMMARIZER_SYSTEM_PROMPT } from '../../prompts/system';
export { summarizeToolBlock } from './tool-block';
export { currentTimeText, withCurrentTurnTail } from './current-turn';
export { formatMinuteTimestamp, mailboxElapsedLabel, notebookAgeLabel, type Instant } from './quantize';
export { fence, neutralize } from './neutralize';
export {
  calibrate,
  calibrationRatio,
  countMessageTokens,
  countTokens,
  countTokensRaw,
  countToolTokens,
  encodingForModel,
  freeEncoders,
  resetCalibration,
} from './tokens';
