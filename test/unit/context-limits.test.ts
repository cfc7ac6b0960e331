/**
 * Pins every context-engine number to its design value. A change
 * here is a change of the spec: update the inventory reference in the same commit.
 */
import * as limits from '../../activities/context/limits';
import { computeTokenBudget, perMessageCap, preflightTokenUpperBound } from '../../activities/context/budget';

describe('context limits', () => {
  test('system prompt caps (D1 B6, B10, B13–B15, B20)', () => {
    expect(limits.SYSTEM_KNOWLEDGE_CHARS).toBe(8_000);
    expect(limits.KNOWLEDGE_OBSERVATIONS_HEADING).toBe('_observations');
    expect(limits.SYSTEM_COLLEAGUES_MAX).toBe(10);
    expect(limits.SYSTEM_HUMANS_MAX).toBe(8);
    expect(limits.SYSTEM_USER_PROFILE_CHARS).toBe(1_500);
    expect(limits.SYSTEM_SKILLS_CATALOGUE_MAX).toBe(30);
    expect(limits.SKILL_KEYWORD_MIN_CHARS).toBe(3);
    expect(limits.SYSTEM_MY_TASKS_MAX).toBe(15);
    expect(limits.SYSTEM_TEAM_TASKS_MAX).toBe(10);
    expect(limits.SYSTEM_TASK_DESC_CHARS).toBe(150);
    expect(limits.SYSTEM_MAILBOX_DECISIONS_MAX).toBe(5);
    expect(limits.SYSTEM_MAILBOX_MERGED_CHARS).toBe(500);
    expect(limits.SYSTEM_MAILBOX_ITEM_PREVIEW_CHARS).toBe(120);
    expect(limits.NOTEBOOK_MAX_CHARS_PER_ENTRY).toBe(6_000);
  });

  test('quantisation thresholds (D1 B8)', () => {
    expect(limits.NOTEBOOK_AGE_JUST_NOW_MS).toBe(5 * 60_000);
    expect(limits.NOTEBOOK_AGE_RECENT_MS).toBe(30 * 60_000);
    expect(limits.NOTEBOOK_AGE_APPROX_HOURS_MS).toBe(2 * 3_600_000);
    expect(limits.MAILBOX_ELAPSED_JUST_STARTED_MS).toBe(60_000);
    expect(limits.MAILBOX_ELAPSED_FEW_MINUTES_MS).toBe(5 * 60_000);
    expect(limits.MAILBOX_ELAPSED_MINUTES_MS).toBe(60 * 60_000);
  });

  test('segment budgets (D2 §2, §3, §5)', () => {
    expect(limits.TOOLS_SEGMENT_MAX_TOKENS).toBe(1_500);
    expect(limits.ACTIVE_SKILLS_MAX_TOKENS).toBe(4_000);
    expect(limits.SKILL_DISCLOSURE_BODY_CHARS).toBe(200);
    expect(limits.SCOPE_CONTEXT_MAX_TOKENS).toBe(800);
    expect(limits.RECENT_ACTIVITY_MAX_EVENTS).toBe(20);
    expect(limits.RECENT_ACTIVITY_MAX_TOKENS).toBe(1_200);
    expect(limits.RECENT_ACTIVITY_DETAIL_CHARS).toBe(200);
    expect(limits.RECENT_RUNS_MAX).toBe(5);
    expect(limits.RECENT_RUNS_MAX_TOKENS).toBe(800);
    expect(limits.RECENT_RUN_SUMMARY_CHARS).toBe(240);
    expect(limits.SYSTEM_PROMPT_TARGET_TOKENS).toBe(12_000);
    expect(limits.BUDGET_PREFLIGHT_RESPONSE_RESERVE_TOKENS).toBe(1_500);
  });

  test('message budget and compression (D1 C1–C12)', () => {
    expect(limits.MAX_OUTPUT_WINDOW_FRACTION).toBe(0.4);
    expect(limits.SAFETY_MARGIN_WINDOW_FRACTION).toBe(0.15);
    expect(limits.SAFETY_MARGIN_MAX_TOKENS).toBe(30_000);
    expect(limits.DEFAULT_CONTEXT_WINDOW_TOKENS).toBe(64_000);
    expect(limits.DEFAULT_MAX_OUTPUT_TOKENS).toBe(16_384);
    expect(limits.LOW_MESSAGE_BUDGET_WARN_TOKENS).toBe(500);
    expect(limits.STAGE1_TRIGGER_MESSAGES).toBe(60);
    expect(limits.STAGE1_KEEP_MESSAGES).toBe(40);
    expect(limits.PER_MESSAGE_CAP_MIN_TOKENS).toBe(2_000);
    expect(limits.PER_MESSAGE_CAP_BUDGET_DIVISOR).toBe(8);
    expect(limits.SHRINK_HEAD_FRACTION).toBe(0.65);
    expect(limits.SHRINK_TAIL_FRACTION).toBe(0.25);
    expect(limits.STAGE3B_KEEP_FRACTION).toBe(0.4);
    expect(limits.STAGE3C_KEEP_FRACTION).toBe(0.3);
    expect(limits.TOOL_BLOCK_ERROR_CHARS).toBe(200);
    expect(limits.TOOL_BLOCK_RESEARCH_RESULT_CHARS).toBe(500);
    expect(limits.TOOL_BLOCK_TEMPLATE_COUNT).toBe(4);
    expect(limits.TASK_PROMPT_MARKERS).toEqual(['TASK EXECUTION', 'task_submit_review']);
    expect(limits.RESEARCH_TOOL_NAMES).toEqual(expect.arrayContaining(['web_search', 'file_read']));
  });

  test('summariser (D1 C10) and tokenizer fallback (D1 C2)', () => {
    expect(limits.SUMMARIZER_MESSAGE_CHARS).toBe(300);
    expect(limits.SUMMARIZER_INPUT_CHARS).toBe(8_000);
    expect(limits.SUMMARIZER_MAX_OUTPUT_TOKENS).toBe(1_024);
    expect(limits.SUMMARIZER_TEMPERATURE).toBe(0.2);
    expect(limits.SUMMARY_TARGET_CHARS).toBe(1_500);
    expect(limits.FALLBACK_CHARS_PER_TOKEN).toBe(3.5);
  });
});

describe('token budget arithmetic (D1 C1, C4; D2 §5)', () => {
  test('Claude Sonnet 4: 200K window, 64K output, 9K system, 3K tools', () => {
    expect(
      computeTokenBudget({ contextWindow: 200_000, modelMaxOutput: 64_000, systemTokens: 9_000, toolTokens: 3_000 }),
    ).toEqual({
      contextWindow: 200_000,
      maxOutputTokens: 64_000, // min(64K, 80K)
      safetyMargin: 30_000, // min(30K, 30K)
      messageBudget: 94_000,
    });
  });

  test('max output is capped at 40% of the window, the margin at 15%', () => {
    const budget = computeTokenBudget({
      contextWindow: 100_000,
      modelMaxOutput: 128_000,
      systemTokens: 1_000,
      toolTokens: 500,
    });
    expect(budget.maxOutputTokens).toBe(40_000);
    expect(budget.safetyMargin).toBe(15_000);
    expect(budget.messageBudget).toBe(100_000 - 1_000 - 500 - 40_000 - 15_000);
  });

  test('the safety margin never exceeds 30K on large windows', () => {
    expect(
      computeTokenBudget({ contextWindow: 1_000_000, modelMaxOutput: 32_000, systemTokens: 0, toolTokens: 0 })
        .safetyMargin,
    ).toBe(30_000);
  });

  test('unknown window and output fall back to 64K / 16,384', () => {
    const budget = computeTokenBudget({ contextWindow: 0, modelMaxOutput: -1, systemTokens: 0, toolTokens: 0 });
    expect(budget.contextWindow).toBe(64_000);
    expect(budget.maxOutputTokens).toBe(16_384);
    expect(budget.safetyMargin).toBe(9_600);
  });

  test('per-message cap is max(2000, budget / 8)', () => {
    expect(perMessageCap(94_000)).toBe(11_750);
    expect(perMessageCap(12_000)).toBe(2_000);
    expect(perMessageCap(-5)).toBe(2_000);
  });

  test('budget pre-flight reserves 1,500 tokens for the response', () => {
    expect(preflightTokenUpperBound(9_000, 500)).toBe(11_000);
  });
});
