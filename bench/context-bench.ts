/**
 * Context-engine benchmark (not a test): prompt assembly, prepareMessages on 100 / 1,000 / 5,000-message
 * sessions with multi-megabyte tool outputs, token-counting throughput, and cache-prefix stability over
 * a 50-call tool loop (with and without the summary cache).
 *
 *   npx tsx bench/index.ts        # every bench, writes bench/results/latest.md
 *
 * Deterministic inputs (seeded PRNG); timings depend on the machine. Budget: well under two minutes
 * on two cores.
 */
import { createHash } from 'node:crypto';
import type { ChatMessage } from '../activities/llm/types';
import { createMemorySummaryCache, type SummaryCache } from '../activities/context/summary-cache';
import { buildSystemPrompt } from '../activities/context/system-prompt';
import type { PromptInputs } from '../activities/context/prompt-types';
import { prepareMessages, type PrepareMessagesOptions } from '../activities/context/prepare-messages';
import { cacheBreakpoint } from '../activities/context/message-units';
import { countTokensRaw, freeEncoders } from '../activities/context/tokens';

// ─── Deterministic data ──────────────────────────────────────────────────────────────────────────────

function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

const VOCAB =
  'the agent reads file writes test build error retry queue task review deploy schema column index billing invoice export worker session token budget summary cache prefix tool result stream cancel approval human notebook memory skill'.split(
    ' ',
  );

function prose(rand: () => number, chars: number): string {
  const out: string[] = [];
  let length = 0;
  while (length < chars) {
    const word = VOCAB[Math.floor(rand() * VOCAB.length)] ?? 'x';
    out.push(word);
    length += word.length + 1;
    if (rand() < 0.08) {
      out.push('.\n');
      length += 2;
    }
  }
  return out.join(' ').slice(0, chars);
}

function logLines(rand: () => number, chars: number): string {
  const lines: string[] = [];
  let length = 0;
  let t = Date.parse('2026-05-25T00:00:00Z');
  while (length < chars) {
    t += Math.floor(rand() * 5_000);
    const level = rand() < 0.05 ? 'ERROR' : rand() < 0.2 ? 'WARN' : 'INFO';
    const line = `${new Date(t).toISOString()} ${level} [worker-${Math.floor(rand() * 8)}] ${prose(rand, 40 + Math.floor(rand() * 80))} id=${Math.floor(rand() * 1e9).toString(16)}`;
    lines.push(line);
    length += line.length + 1;
  }
  return lines.join('\n');
}

function jsonBlob(rand: () => number, chars: number): string {
  const rows: string[] = [];
  let length = 0;
  for (let i = 0; length < chars; i++) {
    const row = JSON.stringify({
      id: i,
      sku: `SKU-${Math.floor(rand() * 1e6)}`,
      amount: Math.round(rand() * 1e5) / 100,
      note: prose(rand, 30),
    });
    rows.push(row);
    length += row.length + 1;
  }
  return `[${rows.join(',')}]`;
}

function base64Blob(rand: () => number, chars: number): string {
  const bytes = Buffer.alloc(Math.ceil((chars * 3) / 4));
  for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(rand() * 256);
  return bytes.toString('base64').slice(0, chars);
}

const MB = 1_000_000;
/** Multi-MB outputs per session size; the 60-message session stays under stage 1, so stages 2–3 do the work. */
const HUGE_OUTPUTS: Record<number, number[]> = {
  60: [2 * MB, 2 * MB, 1 * MB],
  100: [1 * MB],
  1_000: [2 * MB, 1 * MB],
  5_000: [3 * MB, 2 * MB, 1 * MB],
};

/** A task session: task prompt, then tool blocks (with a few multi-MB outputs), reminders, comments. */
function taskSession(size: number, seed: number): ChatMessage[] {
  const rand = prng(seed);
  const messages: ChatMessage[] = [
    {
      role: 'user',
      kind: 'task_prompt',
      content: [
        {
          type: 'text',
          text: `[TASK EXECUTION — Task ID: t${seed}]\n${prose(rand, 1_500)}\n## Completion Requirements — MANDATORY\nYou MUST call task_submit_review.`,
        },
      ],
    },
  ];
  const huge = [...(HUGE_OUTPUTS[size] ?? [])];
  const hugeAt = new Set(huge.map((_, i) => Math.floor(((i + 1) * size) / (huge.length + 2))));
  let call = 0;
  while (messages.length < size - 1) {
    const id = `toolu_${seed}_${call++}`;
    const tool =
      ['file_read', 'shell_execute', 'web_search', 'file_write', 'grep'][Math.floor(rand() * 5)] ?? 'file_read';
    messages.push({
      role: 'assistant',
      content: [
        { type: 'text', text: prose(rand, 80 + Math.floor(rand() * 200)) },
        {
          type: 'tool_use',
          id,
          name: tool,
          input: { path: `/repo/src/${prose(rand, 12).replace(/\W+/g, '_')}.ts`, query: prose(rand, 30) },
        },
      ],
    });
    let output: string;
    if ([...hugeAt].some((at) => messages.length >= at && messages.length < at + 2)) {
      const bytes = huge.shift() ?? MB;
      hugeAt.delete([...hugeAt][0] ?? -1);
      output = [logLines, jsonBlob, base64Blob][huge.length % 3]!(rand, bytes);
    } else {
      output =
        rand() < 0.3 ? logLines(rand, 500 + Math.floor(rand() * 6_000)) : prose(rand, 200 + Math.floor(rand() * 3_000));
    }
    messages.push({
      role: 'user',
      content: [{ type: 'tool_result', toolUseId: id, content: output, ...(rand() < 0.05 ? { isError: true } : {}) }],
    });
    if (rand() < 0.02)
      messages.push({
        role: 'user',
        kind: 'injection',
        content: [{ type: 'text', text: '[SYSTEM REMINDER — Task] Call task_submit_review when the work is done.' }],
      });
  }
  return messages.slice(0, size);
}

const NOW = Date.parse('2026-05-25T12:00:00Z');

function promptInputs(i: number): PromptInputs {
  const rand = prng(1_000 + i);
  return {
    scenario: 'task',
    model: 'claude-sonnet-4-5',
    now: NOW + i * 60_000 + Math.floor(rand() * 59_000),
    timezone: 'Europe/Berlin',
    agent: {
      id: 'agent_ada',
      name: 'Ada',
      role: 'Backend engineer',
      position: 'worker',
      files: {
        soul: prose(prng(1), 2_000),
        agents: prose(prng(2), 6_000),
        heartbeat: prose(prng(3), 800),
        tools: prose(prng(4), 4_000),
      },
      permissions: { canCommitToRepo: true, canCallExternalTools: false, canEditAgentFiles: true },
      manager: { id: 'agent_max', name: 'Max', role: 'Engineering manager' },
    },
    colleagues: Array.from({ length: 14 }, (_, k) => ({
      id: `c${k}`,
      name: `Colleague ${k}`,
      kind: k < 10 ? ('agent' as const) : ('human' as const),
      role: 'engineer',
    })),
    organisation: { name: 'Acme', context: prose(prng(5), 1_500), announcements: prose(prng(6), 400) },
    workspace: { root: '/data/agents/agent_ada', paths: { shared: '/data/shared', repo: '/repos/billing' } },
    trust: { level: 'standard' },
    environment: { os: 'linux', shell: 'bash', node: '24' },
    knowledge: Array.from({ length: 6 }, (_, k) => ({ heading: `Topic ${k}`, body: prose(prng(10 + k), 1_800) })),
    activeSkills: [
      { name: 'billing-export', description: 'Exports invoices', body: prose(prng(20), 3_000), expanded: true },
    ],
    scope: { kind: 'project', name: 'Billing v2', description: prose(prng(21), 3_000) },
    notebook: Array.from({ length: 4 }, (_, k) => ({
      key: `note-${k}`,
      content: prose(rand, 300),
      tag: 'agent' as const,
      updatedAt: NOW + i * 60_000 - k * 1_200_000,
    })),
    skills: Array.from({ length: 60 }, (_, k) => ({
      name: `skill-${k}`,
      category: 'ops',
      description: prose(prng(30 + k), 120),
    })),
    skillQuery: prose(rand, 80),
    tasks: {
      mine: Array.from({ length: 18 }, (_, k) => ({
        id: `t${k}`,
        title: `Task ${k}`,
        priority: (['low', 'medium', 'high', 'critical'] as const)[k % 4]!,
        status: k === 0 ? 'completed' : 'in_progress',
        description: prose(rand, 300),
      })),
    },
    recentActivity: Array.from({ length: 25 }, (_, k) => ({
      at: NOW + i * 60_000 - (25 - k) * 300_000,
      type: 'task_commented',
      detail: prose(rand, 250),
    })),
    recentRuns: Array.from({ length: 6 }, (_, k) => ({
      at: NOW - k * 3_600_000,
      kind: 'task',
      status: 'completed',
      summary: prose(rand, 300),
    })),
    attention: {
      focus: { type: 'task_execution', summary: 'Billing export', startedAt: NOW - i * 45_000 },
      queue: { total: i % 4, items: [] },
      decisions: [{ decision: 'continue', reasoning: 'on track' }],
    },
    sender: { id: 'human_hana', name: 'Hana', kind: 'human' },
  };
}

// ─── Measurements ────────────────────────────────────────────────────────────────────────────────────

const ms = (start: number) => performance.now() - start;
const fmt = (n: number, digits = 1) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const int = (n: number) => Math.round(n).toLocaleString('en-US');
const sha = (text: string) => createHash('sha256').update(text).digest('hex');
const sizeOf = (messages: ChatMessage[]) =>
  messages.reduce(
    (acc, m) =>
      acc +
      m.content.reduce(
        (a, b) =>
          a +
          (b.type === 'text'
            ? b.text.length
            : b.type === 'tool_result'
              ? b.content.length
              : JSON.stringify(b.input).length),
        0,
      ),
    0,
  );

const MODEL_OPTS: Record<string, Omit<PrepareMessagesOptions, 'systemTokens' | 'toolTokens'>> = {
  'claude-sonnet-4-5': { model: 'claude-sonnet-4-5', contextWindow: 200_000, modelMaxOutput: 64_000 },
  'gpt-4o': { model: 'gpt-4o', contextWindow: 128_000, modelMaxOutput: 16_384 },
};

/** Runs the context-engine benches; returns Markdown sections (## headings, tables, notes). */
export async function runContextBench(): Promise<string[]> {
  const report: string[] = [];

  // 1. Token-counting throughput.
  const rand = prng(42);
  const mixed = [
    prose(rand, 1.5 * MB),
    logLines(rand, 1.5 * MB),
    jsonBlob(rand, 0.5 * MB),
    base64Blob(rand, 0.5 * MB),
  ].join('\n');
  const pathological = 'a'.repeat(MB);
  report.push(
    '## Token counting throughput',
    '',
    '| encoding (model) | input | size | tokens | time (ms) | MB/s |',
    '| --- | --- | ---: | ---: | ---: | ---: |',
  );
  for (const model of ['claude-sonnet-4-5', 'gpt-4o']) {
    countTokensRaw('warm up', model);
    for (const [label, text] of [
      ['mixed prose/logs/JSON/base64', mixed],
      ['1 MB of one letter (no word breaks)', pathological],
    ] as const) {
      const start = performance.now();
      const tokens = countTokensRaw(text, model);
      const elapsed = ms(start);
      const encoding = model.startsWith('gpt') ? 'o200k_base' : 'cl100k_base';
      report.push(
        `| ${encoding} (${model}) | ${label} | ${fmt(text.length / MB)} MB | ${int(tokens)} | ${int(elapsed)} | ${fmt(text.length / MB / (elapsed / 1_000))} |`,
      );
    }
  }
  report.push('');

  // 2. System prompt assembly.
  const ITERATIONS = 200;
  buildSystemPrompt(promptInputs(0));
  const promptStart = performance.now();
  let last = buildSystemPrompt(promptInputs(0));
  for (let i = 0; i < ITERATIONS; i++) last = buildSystemPrompt(promptInputs(i));
  const promptMs = ms(promptStart) / ITERATIONS;
  const tierTokens = last.segments.map((s) => countTokensRaw(s.text, 'claude-sonnet-4-5'));
  report.push(
    '## System prompt assembly',
    '',
    '| calls | mean time per call (ms) | Tier 1 tokens | Tier 2 tokens | Tier 3 tokens | estimate | warnings per call |',
    '| ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    `| ${ITERATIONS} | ${fmt(promptMs, 2)} | ${int(tierTokens[0] ?? 0)} | ${int(tierTokens[1] ?? 0)} | ${int(tierTokens[2] ?? 0)} | ${int(last.tokenEstimate)} | ${last.warnings.length} (${[...new Set(last.warnings.map((w) => w.segment))].join(', ')}) |`,
    '',
  );

  // 3. prepareMessages on large sessions.
  report.push(
    '## prepareMessages',
    '',
    'Task sessions (task prompt, tool blocks, reminders) with multi-megabyte tool outputs; heuristic summariser (no LLM). "cold" counts every block for the first time; "warm" repeats the call on the same objects (memoised block counts). Messages folded by stage 1 are never tokenised, so their share of "input tokens" is a chars / 3.5 estimate.',
    '',
    '| model | messages | input size | input tokens | cold (ms) | warm (ms) | output messages | output tokens | budget | stages |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
  );
  const systemTokens = last.tokenEstimate;
  for (const size of [60, 100, 1_000, 5_000]) {
    const session = taskSession(size, size);
    for (const [name, base] of Object.entries(MODEL_OPTS)) {
      const opts = { ...base, systemTokens, toolTokens: 4_000 };
      const coldStart = performance.now();
      const cold = await prepareMessages(session, opts);
      const coldMs = ms(coldStart);
      const warmStart = performance.now();
      await prepareMessages(session, opts);
      const warmMs = ms(warmStart);
      report.push(
        `| ${name} | ${int(size)} | ${fmt(sizeOf(session) / MB)} MB | ${int(cold.stats.tokensBefore)} | ${int(coldMs)} | ${int(warmMs)} | ${cold.messages.length} | ${int(cold.stats.tokensAfter)} | ${int(cold.stats.budget.messageBudget)} | ${cold.stats.stagesApplied.join(' → ') || '—'} |`,
      );
      if (cold.stats.overBudget) throw new Error(`over budget after compression: ${name} ${size}`);
    }
    freeEncoders(); // drop the memoised counts of this session
  }
  report.push('');

  // 4. Cache-prefix stability.
  const tier12 = new Set<string>();
  const tier3 = new Set<string>();
  for (let i = 0; i < 50; i++) {
    const prompt = buildSystemPrompt(promptInputs(i));
    tier12.add(sha(`${prompt.segments[0]?.text}\u0000${prompt.segments[1]?.text}`));
    tier3.add(sha(prompt.segments[2]?.text ?? ''));
  }
  // Message prefix: a 50-step tool loop; does each request start with the previous request's cached
  // prefix? Run with a summariser stub (an LLM summariser makes a new text each time), with and without
  // the summary cache.
  const loopOpts = {
    ...MODEL_OPTS['claude-sonnet-4-5']!,
    contextWindow: 64_000,
    modelMaxOutput: 8_000,
    systemTokens,
    toolTokens: 4_000,
  };
  const withoutCache = await prefixLoop(loopOpts, undefined);
  const withCache = await prefixLoop(loopOpts, createMemorySummaryCache());
  report.push(
    '## Cache-prefix stability',
    '',
    '| check | calls | distinct | expected |',
    '| --- | ---: | ---: | --- |',
    `| Tier 1 + 2 hash (now, notebook, tasks, attention, activity vary) | 50 | ${tier12.size} | 1 |`,
    `| Tier 3 hash | 50 | ${tier3.size} | varies |`,
    '',
    "Message prefix over a 50-call tool loop (task prompt + 2 messages per call, 6,000-character results, 64K window): how many calls start with the previous call's prefix up to its cache breakpoint, how many summariser calls were paid, and what share of message tokens a provider cache could serve. The summariser is a stub that writes a new text each call, as an LLM would.",
    '',
    '| summaries | calls with a previous breakpoint | prefix reused | misses at (messages) | summariser calls | message tokens in reused prefixes | stages seen |',
    '| --- | ---: | ---: | --- | ---: | ---: | --- |',
    loopRow('seed D1 (no cache)', withoutCache),
    loopRow('cached per prefix, 20-message fold step (ours)', withCache),
    '',
  );
  if (tier12.size !== 1) throw new Error(`Tier 1 + 2 changed across calls: ${tier12.size} distinct hashes`);
  if (withCache.summarizerCalls >= withoutCache.summarizerCalls)
    throw new Error('the summary cache did not save summariser calls');
  freeEncoders();
  return report;
}

interface PrefixLoopResult {
  withBreakpoint: number;
  reused: number;
  /** Session sizes (messages) at which the previous prefix was not reused. */
  misses: number[];
  summarizerCalls: number;
  reusedTokens: number;
  totalTokens: number;
  stages: string[];
}

/** A 50-call tool loop through prepareMessages, measuring message-prefix reuse between consecutive calls. */
async function prefixLoop(opts: PrepareMessagesOptions, cache: SummaryCache | undefined): Promise<PrefixLoopResult> {
  const loopRand = prng(7);
  const loop: ChatMessage[] = [
    {
      role: 'user',
      kind: 'task_prompt',
      content: [{ type: 'text', text: `[TASK EXECUTION — Task ID: loop]\n${prose(loopRand, 800)}` }],
    },
  ];
  let previous: { messages: ChatMessage[]; breakpoint?: number } | undefined;
  const result: PrefixLoopResult = {
    withBreakpoint: 0,
    reused: 0,
    misses: [],
    summarizerCalls: 0,
    reusedTokens: 0,
    totalTokens: 0,
    stages: [],
  };
  const stages = new Set<string>();
  let summaries = 0;
  const summarize = async () => `Summary ${++summaries}: the agent read files f0… and is reading on.`;
  for (let step = 0; step < LOOP_CALLS; step++) {
    const id = `loop_${step}`;
    loop.push({
      role: 'assistant',
      content: [{ type: 'tool_use', id, name: 'file_read', input: { path: `/repo/f${step}.ts` } }],
    });
    loop.push({ role: 'user', content: [{ type: 'tool_result', toolUseId: id, content: prose(loopRand, 6_000) }] });
    const out = await prepareMessages(loop, { ...opts, summarize, ...(cache ? { summaryCache: cache } : {}) });
    out.stats.stagesApplied.forEach((s) => stages.add(s));
    result.summarizerCalls += out.stats.summarizerCalls;
    result.totalTokens += out.stats.tokensAfter;
    if (previous?.breakpoint !== undefined) {
      result.withBreakpoint += 1;
      const prefix = previous.messages.slice(0, previous.breakpoint + 1);
      if (JSON.stringify(out.messages.slice(0, previous.breakpoint + 1)) === JSON.stringify(prefix)) {
        result.reused += 1;
        result.reusedTokens += prefix.reduce(
          (acc, m) => acc + countTokensRaw(JSON.stringify(m.content), opts.model),
          0,
        );
      } else {
        result.misses.push(loop.length);
      }
    }
    previous = {
      messages: out.messages,
      ...(out.messageCacheBreakpoint !== undefined ? { breakpoint: out.messageCacheBreakpoint } : {}),
    };
    if (cacheBreakpoint(out.messages) !== out.messageCacheBreakpoint) throw new Error('breakpoint mismatch');
  }
  result.stages = [...stages];
  return result;
}

function loopRow(label: string, r: PrefixLoopResult): string {
  const misses =
    r.misses.length > MISSES_SHOWN
      ? `${r.misses.slice(0, MISSES_SHOWN).join(', ')} … (${r.misses.length})`
      : r.misses.join(', ') || '—';
  const share = fmt((100 * r.reusedTokens) / Math.max(1, r.totalTokens));
  return `| ${label} | ${r.withBreakpoint} | ${r.reused} | ${misses} | ${r.summarizerCalls} | ${share} % | ${r.stages.join(', ') || 'none'} |`;
}

/** Misses listed in the table before the rest are only counted. */
const MISSES_SHOWN = 4;

/** Calls in the cache-prefix loop. */
const LOOP_CALLS = 50;
