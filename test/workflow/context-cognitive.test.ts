import { listNotebook, saveObservation } from '../../activities/memory';
import { usageTotals } from '../../activities/llm/usage';
import type { RecordedRequest, ScriptedResponse } from '../fake-llm';
import { useHarness, submitTurn, toolTurn } from '../support/harness';

const CHEAP_MODEL = 'claude-haiku-5-5';
const MAIN_MODEL = 'claude-sonnet-5-5';
const text = (t: string): ScriptedResponse => ({
  kind: 'message',
  content: [{ type: 'text', text: t }],
  stopReason: 'end_turn',
  usage: { inputTokens: 300, outputTokens: 60 },
});
const isPreparation = (r: RecordedRequest) => r.body.tools === undefined;
const systemText = (r: RecordedRequest) => (r.body.system as Array<{ text: string }>).map((s) => s.text).join('\n');
const APPRAISAL =
  'SITUATION: add a currency column to invoices\nAPPROACH: read the schema first\nRISKS: long locks on a big table\nSEARCH: invoices backfill | currency';

describe('cognitive preparation before the first main call (seed D1 tier 1)', () => {
  const h = useHarness({ worker: true });
  beforeEach(() => h.llm.reset());

  const events = async (taskId: string, type: string) =>
    (
      await h.db.db
        .selectFrom('task_events')
        .select('data')
        .where('task_id', '=', taskId)
        .where('type', '=', type)
        .execute()
    ).map((e) => e.data);

  test('D2 (task): appraisal and reflection on the cheap model without tools, then the main call sees them in its notebook', async () => {
    h.llm.enqueue(
      text(APPRAISAL),
      text('- Backfill in batches of 10k rows.\n- Ask before locking invoices.'),
      toolTurn('file_write', { path: 'plan.md', content: 'plan' }),
      submitTurn('planned'),
    );
    const agentId = await h.createAgent({ cognitive: { enabled: true } });
    await saveObservation(h.db.db, agentId, {
      type: 'insight',
      content: 'Invoices backfill last time needed batches; one big UPDATE locked the table for 20 minutes.',
    });
    const { taskId } = await h.client.startTask({
      agentId,
      title: 'Migrate invoices',
      description: 'Add a currency column to invoices and backfill it.',
    });
    const status = await h.waitForStatus(taskId, (s) => s.state === 'review');

    const [appraisal, reflection, main, second] = h.llm.requests;
    expect(h.llm.requests).toHaveLength(4);
    for (const [request, maxTokens] of [
      [appraisal!, 512],
      [reflection!, 512],
    ] as const) {
      expect(isPreparation(request)).toBe(true);
      expect(request.body.model).toBe(CHEAP_MODEL);
      expect(request.body.max_tokens).toBe(maxTokens);
      expect(request.body.temperature).toBe(0.3);
      expect(systemText(request)).toContain('You are careful and concise.'); // persona-aware
    }
    expect(JSON.stringify(appraisal!.body.messages)).toContain('Add a currency column to invoices');
    // Directed retrieval found the observation and handed it to the reflection.
    expect(JSON.stringify(reflection!.body.messages)).toContain('one big UPDATE locked the table');
    // The main call: full model, tools, and the preparation in Tier 3's notebook (Tiers 1–2 untouched).
    expect(main!.body.model).toBe(MAIN_MODEL);
    expect((main!.body.tools as unknown[]).length).toBeGreaterThan(0);
    const tier3 = (main!.body.system as Array<{ text: string }>)[2]!.text;
    expect(tier3).toMatch(/### cognitive-context \[cpp, just now\]/);
    expect(tier3).toContain('read the schema first');
    expect(tier3).toMatch(/### reflection \[cpp, just now\]/);
    expect(tier3).toMatch(/### relevant-context \[cpp, just now\]/);
    expect(tier3).not.toContain('SEARCH:');
    // Only the first turn of the attempt is prepared.
    expect(second!.body.model).toBe(MAIN_MODEL);

    const notebook = await listNotebook(h.db.db, agentId);
    expect(
      notebook
        .filter((n) => n.tag === 'cpp')
        .map((n) => n.key)
        .sort(),
    ).toEqual(['cognitive-context', 'reflection', 'relevant-context']);
    const finished = await events(taskId, 'cognitive-preparation-finished');
    expect(finished).toEqual([
      expect.objectContaining({ depth: 'D2', completed: ['appraisal', 'retrieval', 'reflection'] }),
    ]);
    // The preparation's calls are accounted to the task and show in `status`.
    const calls = await h.db.db
      .selectFrom('llm_calls')
      .select(['model', 'idem_key'])
      .where('task_id', '=', taskId)
      .orderBy('id')
      .execute();
    expect(calls.map((c) => c.model)).toEqual([CHEAP_MODEL, CHEAP_MODEL, MAIN_MODEL, MAIN_MODEL]);
    expect(calls[0]!.idem_key).toBe('assistant-a1-t0:cpp-appraisal');
    const totals = await usageTotals(h.db.db, { taskId });
    expect(status.usage.inputTokens).toBe(totals.inputTokens);
    expect(status.usage.costUsd).toBeCloseTo(totals.costUsd, 6);
  });

  test('a failing appraisal falls back to no preparation and the run goes on', async () => {
    h.llm.enqueue({ kind: 'error', status: 500, message: 'cheap model down' }, submitTurn('done without preparation'));
    const agentId = await h.createAgent({ cognitive: { enabled: true } });
    const { taskId } = await h.client.startTask({ agentId, title: 'Small fix', description: 'Fix the typo.' });
    const status = await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(status.submission).toBe('done without preparation');
    expect(h.llm.requests.map((r) => r.body.model)).toEqual([CHEAP_MODEL, MAIN_MODEL]);
    expect(systemText(h.llm.requests[1]!)).not.toContain('cognitive-context');
    const skipped = await events(taskId, 'cognitive-preparation-skipped');
    expect(skipped).toEqual([expect.objectContaining({ depth: 'D2', completed: [] })]);
    expect(String(skipped[0]!.reason)).toMatch(/cheap model down/);
  });

  test('a hanging appraisal is abandoned at the timeout and the run goes on', async () => {
    h.llm.enqueue({ kind: 'hang' }, submitTurn('done after the timeout'));
    const agentId = await h.createAgent({ cognitive: { enabled: true, timeoutMs: 1_000 } });
    const { taskId } = await h.client.startTask({ agentId, title: 'Hang', description: 'The cheap model hangs.' });
    const status = await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(status.submission).toBe('done after the timeout');
    await h.llm.waitForAbortedRequests(1);
    expect(h.llm.requests[1]!.receivedAt - h.llm.requests[0]!.receivedAt).toBeGreaterThanOrEqual(1_000);
    const skipped = await events(taskId, 'cognitive-preparation-skipped');
    expect(String(skipped[0]!.reason)).toMatch(/timed out after 1000 ms/);
  });

  test('D3 (blockers): a post-response evaluation of 256 tokens follows the first main call; maxDepth 1 keeps only the appraisal', async () => {
    h.llm.enqueue(
      text(APPRAISAL),
      text('- Batches.'),
      toolTurn('file_write', { path: 'a.md', content: 'a' }),
      text('ADEQUATE: partly\nMISSING: row count\nNEXT: count rows'),
      submitTurn('evaluated'),
    );
    const agentId = await h.createAgent({ cognitive: { enabled: true } });
    await h.db.db
      .insertInto('tasks')
      .values({
        id: `blocked-${agentId}`,
        agent_id: agentId,
        title: 'Waiting on DBA',
        description: 'blocked',
        state: 'blocked',
      })
      .execute();
    const { taskId } = await h.client.startTask({ agentId, title: 'Migrate', description: 'Add the column.' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    const models = h.llm.requests.map((r) => `${r.body.model}:${String(r.body.max_tokens)}`);
    expect(models.slice(0, 2)).toEqual([`${CHEAP_MODEL}:512`, `${CHEAP_MODEL}:512`]);
    expect(models[3]).toBe(`${CHEAP_MODEL}:256`);
    expect(JSON.stringify(h.llm.requests[3]!.body.messages)).toContain('file_write'); // it saw the response
    expect((await events(taskId, 'cognitive-preparation-finished'))[0]).toMatchObject({ depth: 'D3' });
    expect(systemText(h.llm.requests[4]!)).toMatch(/### context-evaluation \[cpp, just now\][\s\S]*MISSING: row count/);

    h.llm.reset();
    h.llm.enqueue(text(APPRAISAL), submitTurn('shallow'));
    const shallow = await h.createAgent({ cognitive: { enabled: true, maxDepth: 1 } });
    const second = await h.client.startTask({ agentId: shallow, title: 'Migrate', description: 'Add the column.' });
    await h.waitForStatus(second.taskId, (s) => s.state === 'review');
    expect(h.llm.requests.map((r) => r.body.model)).toEqual([CHEAP_MODEL, MAIN_MODEL]);
    expect((await events(second.taskId, 'cognitive-preparation-finished'))[0]).toMatchObject({
      depth: 'D1',
      completed: ['appraisal'],
    });
  });

  test('off by default: no preparation calls', async () => {
    h.llm.enqueue(submitTurn('plain'));
    const agentId = await h.createAgent();
    const { taskId } = await h.client.startTask({ agentId, title: 'Plain', description: 'No preparation.' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(h.llm.requests.map((r) => r.body.model)).toEqual([MAIN_MODEL]);
  });
});
