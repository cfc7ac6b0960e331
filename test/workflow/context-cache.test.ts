import { createHash } from 'node:crypto';
import { saveObservation, upsertNotebookEntry } from '../../activities/memory/store';
import type { RecordedRequest, ScriptedResponse, ScriptedUsage } from '../fake-llm';
import { useHarness, submitTurn } from '../support/harness';
import { editKnowledge } from '../../activities/memory/knowledge-store';

/** The fake server's stand-in for a token: 4 characters of the request's JSON. */
const CHARS_PER_TOKEN = 4;

type Block = { json: string; breakpoint: boolean };

/**
 * A model of Anthropic's prompt cache for the fake server: the request is the sequence tools → system
 * blocks → message blocks; every `cache_control` block writes the prefix ending there, and a request
 * reads the longest prefix (at any block) an earlier request wrote. Cache-read tokens are that prefix's
 * size, cache-write tokens what the request's last breakpoint adds beyond it, input the rest.
 */
class PromptCacheModel {
  private readonly written = new Set<string>();

  usageFor(body: Record<string, unknown>): Required<Omit<ScriptedUsage, 'outputTokens' | 'cacheWrite1hTokens'>> {
    const blocks = this.blocks(body);
    const sizes: number[] = [];
    const hashes: string[] = [];
    let hash = '';
    let chars = 0;
    for (const b of blocks) {
      hash = createHash('sha256').update(hash).update(b.json).digest('hex');
      chars += b.json.length;
      hashes.push(hash);
      sizes.push(chars);
    }
    let read = 0;
    hashes.forEach((h, i) => {
      if (this.written.has(h)) read = sizes[i]!;
    });
    const lastBreakpoint = blocks.map((b) => b.breakpoint).lastIndexOf(true);
    const cachedUpTo = lastBreakpoint >= 0 ? sizes[lastBreakpoint]! : 0;
    blocks.forEach((b, i) => {
      if (b.breakpoint) this.written.add(hashes[i]!);
    });
    const tokens = (n: number) => Math.ceil(n / CHARS_PER_TOKEN);
    const write = Math.max(0, cachedUpTo - read);
    return {
      cacheReadTokens: tokens(read),
      cacheWriteTokens: tokens(write),
      inputTokens: tokens(chars - read - write),
    };
  }

  private blocks(body: Record<string, unknown>): Block[] {
    const out: Block[] = [];
    const add = (value: Record<string, unknown>) => {
      const { cache_control, ...rest } = value;
      out.push({ json: JSON.stringify(rest), breakpoint: cache_control !== undefined });
    };
    for (const tool of (body.tools as Array<Record<string, unknown>> | undefined) ?? []) add(tool);
    for (const block of (body.system as Array<Record<string, unknown>> | undefined) ?? []) add(block);
    for (const message of body.messages as Array<{ role: string; content: Array<Record<string, unknown>> }>) {
      message.content.forEach((block, i) => add({ role: i === 0 ? message.role : undefined, ...block }));
    }
    return out;
  }
}

type SystemBlock = { type: string; text: string; cache_control?: unknown };
type ToolDef = { name: string; cache_control?: unknown };
type Message = { role: string; content: Array<{ cache_control?: unknown }> };

const system = (r: RecordedRequest) => r.body.system as SystemBlock[];
const tools = (r: RecordedRequest) => r.body.tools as ToolDef[];
const messages = (r: RecordedRequest) => r.body.messages as Message[];

describe('prompt caching in a task loop against the fake Anthropic server', () => {
  const h = useHarness({ worker: true });
  beforeEach(() => h.llm.reset());

  test('curated knowledge (≤ 8,000 chars) reaches Tier 2 and the notebook Tier 3; observations never reach the prompt', async () => {
    const agentId = await h.createAgent();
    await editKnowledge(h.db.db, agentId, {
      mode: 'replace',
      section: 'Conventions',
      content: 'Migrations are reviewed by the DBA before they run.',
    });
    await editKnowledge(h.db.db, agentId, { mode: 'replace', section: 'Big section', content: 'k'.repeat(2_900) });
    for (const n of [1, 2, 3])
      await editKnowledge(h.db.db, agentId, {
        mode: 'replace',
        section: `Filler ${n}`,
        content: `f${n}`.repeat(1_400),
      });
    await upsertNotebookEntry(h.db.db, agentId, { key: 'priorities', content: 'Finish the invoices migration first.' });
    await saveObservation(h.db.db, agentId, {
      type: 'fact',
      content: 'OBSERVATION-MARKER: the staging database is slow on Mondays.',
    });
    h.llm.enqueue(submitTurn('done'));
    const { taskId } = await h.client.startTask({ agentId, title: 'Check', description: 'Look at the prompt.' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');

    const [tier1, tier2, tier3] = system(h.llm.requests[0]!).map((b) => b.text);
    expect(tier2).toContain('Migrations are reviewed by the DBA before they run.');
    expect(tier1).not.toContain('Migrations are reviewed');
    expect(tier3).toMatch(/### priorities \[agent, just now\]\nFinish the invoices migration first\./);
    expect(tier2).not.toContain('Finish the invoices migration');
    expect(JSON.stringify(h.llm.requests[0]!.body)).not.toContain('OBSERVATION-MARKER');
    // 2,900 + 3 × 2,800 characters of knowledge: the prompt carries at most 8,000 of them.
    const knowledgeChars = (tier2!.match(/[kf123]{20,}/g) ?? []).join('').length;
    expect(knowledgeChars).toBeGreaterThan(7_000);
    expect(knowledgeChars).toBeLessThanOrEqual(8_000);
  });

  test('Tier 1 + 2 are byte-identical on every call, breakpoints sit where seed D1 puts them, and cache reads reach llm_calls and status', async () => {
    const cache = new PromptCacheModel();
    const reported: Array<Required<Omit<ScriptedUsage, 'outputTokens' | 'cacheWrite1hTokens'>>> = [];
    const TOOL_TURNS = 5;
    h.llm.setResponder((request): ScriptedResponse => {
      const usage = cache.usageFor(request.body);
      reported.push(usage);
      const n = h.llm.requests.length;
      const call =
        n <= TOOL_TURNS
          ? { type: 'tool_use' as const, name: 'file_write', input: { path: `notes/${n}.md`, content: `note ${n}` } }
          : { type: 'tool_use' as const, name: 'task_submit_review', input: { summary: 'wrote five notes' } };
      return {
        kind: 'message',
        content: [{ type: 'text', text: `step ${n}` }, call],
        stopReason: 'tool_use',
        usage: { ...usage, outputTokens: 30 },
      };
    });
    const agentId = await h.createAgent();
    const { taskId } = await h.client.startTask({
      agentId,
      title: 'Write notes',
      description: 'Write five notes into notes/.',
    });
    const status = await h.waitForStatus(taskId, (s) => s.state === 'review');
    h.llm.setResponder(undefined);

    const requests = h.llm.requests;
    expect(requests).toHaveLength(TOOL_TURNS + 1);
    expect(requests.every((r) => r.protocol === 'anthropic')).toBe(true);

    // Tier 1 and Tier 2 byte-identical on every request; Tier 3 follows without a breakpoint.
    for (const r of requests) {
      expect(system(r)).toHaveLength(3);
      expect(system(r)[0]!.text).toBe(system(requests[0]!)[0]!.text);
      expect(system(r)[1]!.text).toBe(system(requests[0]!)[1]!.text);
      expect(system(r)[0]!.cache_control).toEqual({ type: 'ephemeral', ttl: '1h' });
      expect(system(r)[1]!.cache_control).toEqual({ type: 'ephemeral', ttl: '1h' });
      expect(system(r)[2]!.cache_control).toBeUndefined();
      // The last tool definition, and only it.
      const defs = tools(r);
      expect(defs.at(-1)!.cache_control).toEqual({ type: 'ephemeral', ttl: '1h' });
      expect(defs.slice(0, -1).every((d) => d.cache_control === undefined)).toBe(true);
    }

    // The message breakpoint: on the last block of the last stored message, which the current time
    // (never stored, different every minute) follows as a message of its own; nowhere else.
    for (const r of requests) {
      const ms = messages(r);
      const at = ms.length - 2;
      expect(at).toBeGreaterThanOrEqual(0);
      expect(JSON.stringify(ms.at(-1))).toMatch(
        /^\{"role":"user","content":\[\{"type":"text","text":"\[Current time: [^\]]+\]"\}\]\}$/,
      );
      expect(ms[at]!.content.at(-1)!.cache_control).toEqual({ type: 'ephemeral' });
      const marked = ms
        .flatMap((m, i) => m.content.map((b, j) => (b.cache_control !== undefined ? `${i}:${j}` : undefined)))
        .filter(Boolean);
      expect(marked).toEqual([`${at}:${ms[at]!.content.length - 1}`]);
      // 4 breakpoints in all, the API's maximum: last tool, Tier 1, Tier 2, one message.
    }

    // Every call after the first reads the cached tools + Tier 1 + Tier 2 prefix at least.
    const prefixTokens = Math.ceil(
      [
        ...tools(requests[1]!).map(({ cache_control: _c, ...t }) => JSON.stringify(t)),
        ...system(requests[1]!)
          .slice(0, 2)
          .map(({ cache_control: _c, ...s }) => JSON.stringify(s)),
      ].join('').length / CHARS_PER_TOKEN,
    );
    expect(reported[0]!.cacheReadTokens).toBe(0);
    for (const usage of reported.slice(1)) expect(usage.cacheReadTokens).toBeGreaterThanOrEqual(prefixTokens);

    // What the server reported is what llm_calls recorded, call by call, and what `status` totals.
    const calls = await h.db.db
      .selectFrom('llm_calls')
      .selectAll()
      .where('task_id', '=', taskId)
      .orderBy('id')
      .execute();
    expect(calls.map((c) => c.cache_read_tokens)).toEqual(reported.map((u) => u.cacheReadTokens));
    expect(calls.map((c) => c.cache_write_tokens)).toEqual(reported.map((u) => u.cacheWriteTokens));
    expect(calls.map((c) => c.input_tokens)).toEqual(reported.map((u) => u.inputTokens));
    const sum = (pick: (c: (typeof calls)[number]) => number) => calls.reduce((acc, c) => acc + pick(c), 0);
    expect(status.usage.cacheReadTokens).toBe(sum((c) => c.cache_read_tokens));
    expect(status.usage.cacheWriteTokens).toBe(sum((c) => c.cache_write_tokens));
    expect(status.usage.inputTokens).toBe(sum((c) => c.input_tokens));
    expect(status.usage.outputTokens).toBe(30 * requests.length);
    expect(status.usage.costUsd).toBeCloseTo(
      sum((c) => Number(c.cost_usd)),
      6,
    );
    expect(status.usage.cacheReadTokens).toBeGreaterThan(0);
    console.log(
      `cache model: ${requests.length} calls, cache read ${status.usage.cacheReadTokens} / write ${status.usage.cacheWriteTokens} / uncached input ${status.usage.inputTokens} tokens; ` +
        `reads per call ${reported.map((u) => u.cacheReadTokens).join(', ')}`,
    );
  });
});
