import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  ANTHROPIC_CACHE_READ_MULTIPLIER,
  ANTHROPIC_CACHE_WRITE_1H_MULTIPLIER,
  ANTHROPIC_CACHE_WRITE_MULTIPLIER,
  lookupModel,
} from '../../activities/llm/catalog';
import { PROMPT_CACHE_POLICIES, type PromptCachePolicy } from '../../activities/llm/types';
import {
  CACHE_TTL_5M_MS,
  FAKE_CHARS_PER_TOKEN,
  FakePromptCache,
  type PromptCacheUsage,
  type RecordedRequest,
} from '../fake-llm';
import { submitTurn, toolTurn, useHarness } from '../support/harness';
import { ScriptedAgents } from './task-support';

/**
 * What the call after a long approval wait costs under each prompt-cache policy, through a real worker,
 * the real Anthropic SDK and a real approval wait, against the fake provider's cache with lifetimes.
 * Simulated time jumps across the wait, so "45 minutes" takes no real time. With
 * `APPROVAL_CACHE_TABLE=<file>` the test also writes the figures table that docs/approvals.md shows.
 */

/** Approval waits to measure: under the 5-minute lifetime, two between 5 minutes and 1 hour, past 1 hour. */
const WAITS = [
  { label: '2 min', ms: 2 * 60_000 },
  { label: '10 min', ms: 10 * 60_000 },
  { label: '45 min', ms: 45 * 60_000 },
  { label: '2 h', ms: 2 * 3_600_000 },
] as const;

/** Fixed length, so that every run's prompt has the same size whatever its policy. */
const RUN_PREFIX = randomUUID().slice(0, 8);

/** A keep-alive request refreshes a 5-minute entry this long before it would expire. */
const KEEP_ALIVE_EVERY_MS = CACHE_TTL_5M_MS - 30_000;

/** An identity a production agent might have: a few thousand tokens of stable instructions. */
const IDENTITY = {
  soul: 'You are careful, concise and honest about what you did and did not do.\n'.repeat(60),
  agents: 'Work in small steps; read before you write; run the tests that concern your change.\n'.repeat(60),
  heartbeat: '- check tasks',
  tools: 'Prefer file tools to shell commands for reading files.\n'.repeat(30),
};
/** The file the agent reads before it asks: it makes the conversation part of the prompt a realistic size. */
const NOTES = 'The billing service retries a failed charge three times, an hour apart.\n'.repeat(300);

/** Base-input-token equivalents at Anthropic's published multipliers. */
function inputEquivalents(usage: PromptCacheUsage): number {
  return (
    usage.inputTokens +
    usage.cacheWrite5mTokens * ANTHROPIC_CACHE_WRITE_MULTIPLIER +
    usage.cacheWrite1hTokens * ANTHROPIC_CACHE_WRITE_1H_MULTIPLIER +
    usage.cacheReadTokens * ANTHROPIC_CACHE_READ_MULTIPLIER
  );
}

type Block = Record<string, unknown> & { cache_control?: unknown };

interface Measurement {
  policy: PromptCachePolicy;
  waitMs: number;
  /** The stable prefix (tools + system) and the whole prompt of the call after the wait, in tokens. */
  prefixTokens: number;
  resumed: PromptCacheUsage;
  resumedCost: number;
  taskCost: number;
  requests: RecordedRequest[];
  taskId: string;
}

describe('the prompt cache across a long approval wait', () => {
  const h = useHarness();
  let agents: ScriptedAgents;
  let runCounter = 0;
  beforeAll(async () => {
    agents = new ScriptedAgents(h.llm);
    await h.startWorker(
      PROMPT_CACHE_POLICIES.map((policy) => ({
        name: `anthropic-${policy}`,
        kind: 'anthropic' as const,
        apiKey: 'test-key',
        baseURL: h.llm.url,
        promptCache: policy,
      })),
    );
  });

  /** One task: read a file, ask to run a command that needs approval, wait `waitMs`, approved, submit. */
  async function measure(policy: PromptCachePolicy, waitMs: number): Promise<Measurement> {
    // A cold cache per run: what one task costs, not what the previous one left warm.
    const cache = h.llm.simulatePromptCache();
    // A new agent per run, so that no earlier run's activity shows in its prompt.
    const agentId = `agent-cache-${RUN_PREFIX}-${String((runCounter += 1)).padStart(3, '0')}`;
    await h.client.upsertAgent({
      id: agentId,
      name: 'Cache agent',
      files: IDENTITY,
      config: {
        provider: `anthropic-${policy}`,
        approvals: { policies: [{ toolClass: 'shell', approvers: ['alice'], expireAfterMs: 4 * 3_600_000 }] },
      },
      workspaceDir: h.workspaceDir,
    });
    writeFileSync(path.join(h.workspaceDir, 'notes.txt'), NOTES);
    const taskId = agents.task([
      toolTurn('file_read', { path: 'notes.txt' }),
      toolTurn('shell_execute', { command: `touch reviewed-${agentId}.txt` }),
      submitTurn('reviewed'),
    ]);
    await h.client.startTask({ agentId, taskId, title: 'Review the notes', description: 'then mark them reviewed' });
    const waiting = await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1);
    cache.advance(waitMs);
    await h.client.decideApproval(taskId, {
      requestId: waiting.pendingApprovals[0]!.requestId,
      decision: 'approved',
      decidedBy: 'alice',
    });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    const requests = agents.requests(taskId);
    expect(requests).toHaveLength(3);
    const usages = requests.map((r) => r.promptCache!);
    // The stable prefix: the tools and the system parts up to its last breakpoint, counted as the fake counts.
    const body = requests[2]!.body as { tools: Block[]; system: Block[] };
    const cachedSystem = body.system.slice(
      0,
      body.system.map((b) => b.cache_control !== undefined).lastIndexOf(true) + 1,
    );
    const prefixTokens = Math.ceil(
      [...body.tools, ...cachedSystem].reduce(
        (chars, { cache_control: _marker, ...block }) => chars + JSON.stringify(block).length,
        0,
      ) / FAKE_CHARS_PER_TOKEN,
    );
    return {
      policy,
      waitMs,
      prefixTokens,
      resumed: usages[2]!,
      resumedCost: inputEquivalents(usages[2]!),
      taskCost: usages.reduce((sum, u) => sum + inputEquivalents(u), 0),
      requests,
      taskId,
    };
  }

  /**
   * A policy the runtime does not implement, modelled rather than run: while a request waits, send a
   * request made of the stable prefix alone (and one word) before its 5-minute entry expires, so that
   * it is read (0.1×) instead of written again. The run's recorded requests are replayed through a
   * fresh cache, with those keep-alives in the wait; their single output token is left out.
   */
  function withKeepAlive(run: Measurement): { resumedCost: number; taskCost: number; keepAlives: number } {
    const cache = new FakePromptCache();
    const [first, asking, resumed] = run.requests;
    const system = asking!.body.system as Array<{ cache_control?: unknown }>;
    const keepAliveBody = {
      tools: asking!.body.tools,
      system: system.slice(0, system.map((b) => b.cache_control !== undefined).lastIndexOf(true) + 1),
      messages: [{ role: 'user', content: [{ type: 'text', text: '.' }] }],
    };
    let total = inputEquivalents(cache.usageFor(first!.body)) + inputEquivalents(cache.usageFor(asking!.body));
    let keepAlives = 0;
    for (let waited = KEEP_ALIVE_EVERY_MS; waited < run.waitMs; waited += KEEP_ALIVE_EVERY_MS) {
      cache.advance(KEEP_ALIVE_EVERY_MS);
      total += inputEquivalents(cache.usageFor(keepAliveBody));
      keepAlives += 1;
    }
    cache.advance(run.waitMs - keepAlives * KEEP_ALIVE_EVERY_MS);
    const resumedCost = inputEquivalents(cache.usageFor(resumed!.body));
    return { resumedCost, taskCost: total + resumedCost, keepAlives };
  }

  test('a 1-hour lifetime on the stable prefix keeps it across waits of 5 to 60 minutes; the figures pick the default', async () => {
    const runs: Measurement[] = [];
    for (const wait of WAITS) for (const policy of PROMPT_CACHE_POLICIES) runs.push(await measure(policy, wait.ms));
    const run = (policy: PromptCachePolicy, ms: number) => runs.find((r) => r.policy === policy && r.waitMs === ms)!;

    // The requests carry the lifetimes the policy names.
    const ttls = (r: RecordedRequest) =>
      [r.body.tools, r.body.system, r.body.messages]
        .flatMap((part) => JSON.stringify(part).match(/"cache_control":\{[^}]*\}/g) ?? [])
        .map((c) => (c.includes('"1h"') ? '1h' : '5m'));
    expect(ttls(run('all-5m', WAITS[0].ms).requests[2]!)).toEqual(['5m', '5m', '5m', '5m']);
    expect(ttls(run('prefix-1h', WAITS[0].ms).requests[2]!)).toEqual(['1h', '1h', '1h', '5m']);
    expect(ttls(run('all-1h', WAITS[0].ms).requests[2]!)).toEqual(['1h', '1h', '1h', '1h']);

    for (const wait of WAITS) {
      const short = wait.ms < CACHE_TTL_5M_MS;
      const withinHour = wait.ms < 3_600_000;
      const fiveMinutes = run('all-5m', wait.ms).resumed;
      const prefix = run('prefix-1h', wait.ms);
      const all = run('all-1h', wait.ms).resumed;
      // Under 5 minutes the prefix is still cached; past it, the default lifetime has lost everything.
      expect(fiveMinutes.cacheReadTokens > 0).toBe(short);
      // The 1-hour prefix is read back after any wait within the hour.
      expect(prefix.resumed.cacheReadTokens >= prefix.prefixTokens * 0.9).toBe(withinHour);
      // The conversation is written again under every policy: the system prompt's last part (the
      // activity feed, uncached, before the messages) now records the decision, so a 1-hour lifetime
      // on the conversation's breakpoint reads nothing more than the prefix.
      expect(all.cacheReadTokens).toBe(prefix.resumed.cacheReadTokens);
      expect(run('prefix-1h', wait.ms).taskCost).toBeLessThan(run('all-1h', wait.ms).taskCost);
    }

    // Between 5 minutes and an hour the 1-hour prefix beats the default on the resumed call and the
    // whole task; under 5 minutes or past the hour it pays the dearer first write for nothing.
    for (const ms of [WAITS[1].ms, WAITS[2].ms]) {
      expect(run('prefix-1h', ms).resumedCost).toBeLessThan(run('all-5m', ms).resumedCost);
      expect(run('prefix-1h', ms).taskCost).toBeLessThan(run('all-5m', ms).taskCost);
    }
    for (const ms of [WAITS[0].ms, WAITS[3].ms])
      expect(run('all-5m', ms).taskCost).toBeLessThan(run('prefix-1h', ms).taskCost);

    // The recorded cost prices the 1-hour writes at 2× input (the catalogue's write price is the 5-minute one).
    const priced = run('prefix-1h', WAITS[1].ms);
    const [firstCall] = await h.db.db
      .selectFrom('llm_calls')
      .select(['cost_usd', 'model', 'output_tokens'])
      .where('task_id', '=', priced.taskId)
      .orderBy('id')
      .execute();
    const { prices } = lookupModel(firstCall!.model);
    const usage = priced.requests[0]!.promptCache!;
    expect(usage.cacheWrite1hTokens).toBeGreaterThan(8_000);
    expect(Number(firstCall!.cost_usd)).toBeCloseTo(
      (inputEquivalents(usage) * prices.input + firstCall!.output_tokens * prices.output) / 1_000_000,
      5, // the column keeps 6 decimals; priced at the 5-minute rate the call would be cents cheaper
    );

    const table = figuresTable(runs, (r) => withKeepAlive(r));
    if (process.env.APPROVAL_CACHE_TABLE) writeFileSync(process.env.APPROVAL_CACHE_TABLE, table);
  }, 240_000);
});

function figuresTable(
  runs: Measurement[],
  keepAlive: (run: Measurement) => { resumedCost: number; taskCost: number; keepAlives: number },
): string {
  const n = (x: number) => Math.round(x).toLocaleString('en-US');
  const first = runs[0]!;
  const lines = [
    `Prompt of the call after the wait: ${n(first.resumed.inputTokens + first.resumed.cacheReadTokens + first.resumed.cacheWriteTokens)} tokens, of which ${n(first.prefixTokens)} are the stable prefix (tools and the cached system parts). Costs in base-input-token equivalents (write 5 min ${ANTHROPIC_CACHE_WRITE_MULTIPLIER}×, write 1 h ${ANTHROPIC_CACHE_WRITE_1H_MULTIPLIER}×, read ${ANTHROPIC_CACHE_READ_MULTIPLIER}×); the task is 3 calls.`,
    '',
    '| wait | policy | resumed call: read / written / input tokens | resumed call cost | whole task cost |',
    '| --- | --- | --- | ---: | ---: |',
  ];
  for (const wait of WAITS) {
    for (const r of runs.filter((x) => x.waitMs === wait.ms)) {
      const u = r.resumed;
      lines.push(
        `| ${wait.label} | \`${r.policy}\` | ${n(u.cacheReadTokens)} / ${n(u.cacheWriteTokens)} / ${n(u.inputTokens)} | ${n(r.resumedCost)} | ${n(r.taskCost)} |`,
      );
    }
    const base = runs.find((x) => x.waitMs === wait.ms && x.policy === 'all-5m')!;
    const modelled = keepAlive(base);
    lines.push(
      `| ${wait.label} | \`all-5m\` + ${modelled.keepAlives} keep-alive(s) (modelled) | | ${n(modelled.resumedCost)} | ${n(modelled.taskCost)} |`,
    );
  }
  return `${lines.join('\n')}\n`;
}
