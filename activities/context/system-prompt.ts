/**
 * `buildSystemPrompt`: the three-tier system prompt, carrying the segments and their
 * token budgets.
 *
 * | Tier | cache breakpoint | content (in order) |
 * | --- | --- | --- |
 * | 1 stable | yes | SOUL.md · AGENTS.md · capabilities · TOOLS.md + granted permissions (≤ 1,500) · policies · deliverable format · task workflow · tool usage rules · communication rules |
 * | 2 semi-stable | yes | identity (colleagues ≤ 10, humans ≤ 8) · organisation · workspace · user profiles · trust · environment · knowledge (≤ 8,000 chars, no `_observations`) · active skills (≤ 4,000) · scope context (≤ 800) · scenario + operating loop (last) |
 * | 3 dynamic | no | announcements · notebook · skills catalogue (≤ 30) · task board (15 / 10; not in heartbeat, a2a, comment_response) · team status · recent activity (20 events, ≤ 1,200) · recent runs (5, ≤ 800) · attention state · sender · tools in this call |
 *
 * The minute-level time is not in Tier 3: it changes every minute, and anything before the
 * conversation that changes breaks the provider's prefix cache for the whole conversation. It is the
 * last block of the current turn instead (`current-turn.ts`).
 *
 * Budgets: each segment is first cut to its own budget (one warning each). If the whole message is
 * then over 12,000 tokens, Tier 3 sections shrink in a fixed order (recent activity first, attention
 * state last). Tiers 1 and 2 are never cut for the total: they depend only on their own inputs, so
 * equal stable inputs give byte-identical cached prefixes; if they alone overflow, a `total` warning
 * reports it.
 *
 * Budget arithmetic uses raw tiktoken counts (never the calibration ratio, which changes with worker
 * history); `tokenEstimate` is the calibrated estimate for the message budget.
 */
import { createHash } from 'node:crypto';
import { SYSTEM_PROMPT_TARGET_TOKENS } from './limits';
import type { PromptInputs, PromptWarning, SystemPrompt } from './prompt-types';
import { tier3Drafts } from './sections-dynamic';
import { tier1Drafts, tier2Drafts } from './sections-stable';
import { applyBudget, fitDraft, renderDraft, type SegmentDraft, type TokenCounter } from './segment-fit';
import { calibrationRatio, countTokensRaw } from './tokens';

const SECTION_SEPARATOR = '\n\n';

/**
 * Raw counts of recently rendered texts. Tiers 1 and 2 and most sections repeat from call to call, and
 * hashing a string is far cheaper than tokenising it.
 */
const countMemo = new Map<string, number>();
const COUNT_MEMO_ENTRIES = 256;

function memoisedCount(model: string | undefined): TokenCounter {
  return (text) => {
    if (text.length < 64) return countTokensRaw(text, model);
    const key = `${model ?? ''}\u0000${text}`;
    const hit = countMemo.get(key);
    if (hit !== undefined) return hit;
    const value = countTokensRaw(text, model);
    if (countMemo.size >= COUNT_MEMO_ENTRIES) countMemo.delete(countMemo.keys().next().value as string);
    countMemo.set(key, value);
    return value;
  };
}

export function buildSystemPrompt(inputs: PromptInputs): SystemPrompt {
  const warnings: PromptWarning[] = [];
  const count = memoisedCount(inputs.model);
  const budgeted = (drafts: SegmentDraft[]) =>
    drafts.map((d) => applyBudget(d, count, warnings)).filter((d): d is SegmentDraft => d !== undefined);

  const { tier1, tier2, stableTokens } = stableTiers(inputs, count, warnings);
  let dynamic = budgeted(tier3Drafts(inputs));

  const totalOf = (drafts: SegmentDraft[]) => stableTokens + count(joinDrafts(drafts));
  const before = totalOf(dynamic);
  let total = before;
  if (total > SYSTEM_PROMPT_TARGET_TOKENS) {
    const order = dynamic
      .filter((d) => d.shrinkOrder !== undefined)
      .sort((a, b) => (a.shrinkOrder ?? 0) - (b.shrinkOrder ?? 0))
      .map((d) => d.name);
    for (const name of order) {
      if (total <= SYSTEM_PROMPT_TARGET_TOKENS) break;
      const index = dynamic.findIndex((d) => d.name === name);
      const draft = dynamic[index];
      if (!draft) continue;
      const current = count(renderDraft(draft));
      const allowed = Math.max(0, current - (total - SYSTEM_PROMPT_TARGET_TOKENS));
      const fitted = fitDraft(draft, allowed, count);
      warnings.push({
        segment: draft.name,
        originalTokens: current,
        keptTokens: fitted ? count(renderDraft(fitted)) : 0,
      });
      dynamic = fitted ? dynamic.map((d, i) => (i === index ? fitted : d)) : dynamic.filter((_, i) => i !== index);
      total = totalOf(dynamic);
    }
    if (total > SYSTEM_PROMPT_TARGET_TOKENS)
      warnings.push({ segment: 'total', originalTokens: before, keptTokens: total });
  }

  const tier3 = joinDrafts(dynamic);
  const segments = [
    { text: tier1, cacheBreakpoint: true },
    { text: tier2, cacheBreakpoint: true },
    { text: tier3, cacheBreakpoint: false },
  ];
  const raw = stableTokens + count(tier3) + 2 * count(SECTION_SEPARATOR);
  return { segments, warnings, tokenEstimate: Math.ceil(raw * calibrationRatio(inputs.model)) };
}

/** Assembled Tiers 1–2 kept in the worker (distinct agents × scenarios × models in use). */
export const STABLE_TIER_CACHE_ENTRIES = 256;

interface StableTiers {
  tier1: string;
  tier2: string;
  stableTokens: number;
  warnings: PromptWarning[];
}

const stableTierCache = new Map<string, StableTiers>();

/**
 * Tiers 1 and 2, budgeted and rendered, cached by a hash of their drafts and the model: the drafts are
 * cheap string building, the budgets (token counting, fitting) are not. The drafts are everything the
 * tiers depend on (agent files, scenario, knowledge, workspace …), so an edited agent file or a new
 * knowledge section gives a new key: the cache can never serve a stale prompt.
 */
function stableTiers(inputs: PromptInputs, count: TokenCounter, warnings: PromptWarning[]): StableTiers {
  const drafts1 = tier1Drafts(inputs);
  const drafts2 = tier2Drafts(inputs);
  const key = createHash('sha256')
    .update(JSON.stringify([inputs.model ?? '', drafts1, drafts2]))
    .digest('hex');
  let hit = stableTierCache.get(key);
  if (!hit) {
    const own: PromptWarning[] = [];
    const budgeted = (drafts: SegmentDraft[]) =>
      drafts.map((d) => applyBudget(d, count, own)).filter((d): d is SegmentDraft => d !== undefined);
    const tier1 = joinDrafts(budgeted(drafts1));
    const tier2 = joinDrafts(budgeted(drafts2));
    hit = { tier1, tier2, stableTokens: count(tier1) + count(tier2), warnings: own };
    if (stableTierCache.size >= STABLE_TIER_CACHE_ENTRIES)
      stableTierCache.delete(stableTierCache.keys().next().value as string);
    stableTierCache.set(key, hit);
  } else {
    // Most recently used last, so that eviction drops the oldest.
    stableTierCache.delete(key);
    stableTierCache.set(key, hit);
  }
  warnings.push(...hit.warnings.map((w) => ({ ...w })));
  return hit;
}

function joinDrafts(drafts: readonly SegmentDraft[]): string {
  return drafts
    .map(renderDraft)
    .filter((text) => text.length > 0)
    .join(SECTION_SEPARATOR);
}

/** The whole system message as one string, for providers without system blocks. */
export function systemPromptText(prompt: SystemPrompt): string {
  return prompt.segments
    .map((s) => s.text)
    .filter((t) => t.length > 0)
    .join(SECTION_SEPARATOR);
}
