import { BUDGET_EXCEEDED_REASON, BUDGET_THRESHOLD_PERCENTS } from '../../activities/llm/budget';
import { lookupModel } from '../../activities/llm/catalog';
import { usageTotals } from '../../activities/llm/usage';
import type { ScriptedResponse } from '../fake-llm';
import { useHarness } from '../support/harness';

const MODEL = 'claude-sonnet-5-5';
/** Usage that costs exactly $0.40 on Sonnet 5.5 ($2 / $10 per million): 190K in, 2K out. */
const FORTY_CENTS = { inputTokens: 190_000, outputTokens: 2_000 };

const expensiveToolTurn = (n: number): ScriptedResponse => ({
  kind: 'message',
  content: [{ type: 'tool_use', name: 'file_write', input: { path: `n${n}.md`, content: `${n}` } }],
  stopReason: 'tool_use',
  usage: FORTY_CENTS,
});

describe('budget guard, thresholds and usage accounting (seed D2 §5, G23, G24)', () => {
  const h = useHarness({ worker: true });
  beforeEach(() => h.llm.reset());

  const events = async (taskId: string, type: string) =>
    (
      await h.db.db
        .selectFrom('task_events')
        .select(['data'])
        .where('task_id', '=', taskId)
        .where('type', '=', type)
        .orderBy('id')
        .execute()
    ).map((e) => e.data);

  test('a budget below one call\'s estimate stops the run with "Budget exceeded" before any provider request', async () => {
    const agentId = await h.createAgent({ budgetUsd: 0.000001 });
    const { taskId, handle } = await h.client.startTask({
      agentId,
      title: 'Too poor',
      description: 'cannot afford one call',
    });
    const result = await handle.result();
    expect(result.state).toBe('failed');
    expect(result.error).toMatch(
      /^Budget exceeded: this call may need up to \$0\.\d{4} but only \$0\.0000 of the \$0\.0000 per month budget remains/,
    );
    expect(h.llm.requests).toHaveLength(0);
    const exceeded = await events(taskId, 'budget-exceeded');
    expect(exceeded).toHaveLength(1);
    expect(String(exceeded[0]!.message)).toContain(BUDGET_EXCEEDED_REASON);
    const row = await h.client.getTaskRow(taskId);
    expect(row.state).toBe('failed');
    expect(row.last_error).toContain(BUDGET_EXCEEDED_REASON);
    expect(await h.db.db.selectFrom('llm_calls').select('id').where('task_id', '=', taskId).execute()).toHaveLength(0);
  });

  test('spending crosses 75, 90 and 100 % once each; the call after the budget is used up is refused; every call is accounted', async () => {
    expect(lookupModel(MODEL).prices).toMatchObject({ input: 2, output: 10 });
    expect(BUDGET_THRESHOLD_PERCENTS).toEqual([75, 90, 100]);
    h.llm.enqueue(expensiveToolTurn(1), expensiveToolTurn(2), expensiveToolTurn(3), expensiveToolTurn(4));
    const agentId = await h.createAgent({ budgetUsd: 1 });
    const { taskId, handle } = await h.client.startTask({ agentId, title: 'Spend', description: 'spend the budget' });
    const result = await handle.result();

    // $0.40 → 40 %; $0.80 → crosses 75 %; $1.20 → crosses 90 and 100 %; then $0.20 over: refused.
    expect(h.llm.requests).toHaveLength(3);
    expect(result.state).toBe('failed');
    expect(result.error).toMatch(/^Budget exceeded/);
    const crossed = await events(taskId, 'budget-threshold-crossed');
    expect(crossed.map((e) => e.percent)).toEqual([75, 90, 100]);
    expect(crossed.map((e) => Number(e.spentUsd))).toEqual([0.8, 1.2, 1.2]);
    expect(await events(taskId, 'budget-exceeded')).toHaveLength(1);

    // Usage and cost per call: agent, task, model, tokens, cost.
    const calls = await h.db.db
      .selectFrom('llm_calls')
      .select([
        'agent_id',
        'task_id',
        'provider',
        'model',
        'input_tokens',
        'output_tokens',
        'cache_read_tokens',
        'cache_write_tokens',
        'cost_usd',
      ])
      .where('task_id', '=', taskId)
      .orderBy('id')
      .execute();
    expect(calls).toEqual(
      Array.from({ length: 3 }, () => ({
        agent_id: agentId,
        task_id: taskId,
        provider: 'anthropic',
        model: MODEL,
        input_tokens: 190_000,
        output_tokens: 2_000,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        cost_usd: '0.400000',
      })),
    );

    // Totals per task. (The task workflow's own total drops a failed round's usage: see the overage
    // test below for `status` on a task that succeeds.)
    const expected = { inputTokens: 570_000, outputTokens: 6_000, cacheReadTokens: 0, cacheWriteTokens: 0 };
    const task = await usageTotals(h.db.db, { taskId });
    expect(task).toMatchObject({ ...expected, calls: 3 });
    expect(task.costUsd).toBeCloseTo(1.2, 6);
    // Totals per agent.
    const agent = await usageTotals(h.db.db, { agentId });
    expect(agent).toMatchObject({ ...expected, calls: 3 });
    expect(agent.costUsd).toBeCloseTo(1.2, 6);
    // Each call also left a timeline event with its usage and cost.
    const finished = await events(taskId, 'llm-call-finished');
    expect(finished.map((e) => [e.model, e.inputTokens, e.costUsd])).toEqual(
      Array.from({ length: 3 }, () => [MODEL, 190_000, 0.4]),
    );
  });

  test('with overage allowed the guard lets calls through past the cap, and 100 % is still reported once', async () => {
    h.llm.enqueue(expensiveToolTurn(1), expensiveToolTurn(2), expensiveToolTurn(3), {
      kind: 'message',
      content: [{ type: 'tool_use', name: 'task_submit_review', input: { summary: 'over budget, allowed' } }],
      stopReason: 'tool_use',
      usage: FORTY_CENTS,
    });
    const agentId = await h.createAgent({ budgetUsd: 1, allowBudgetOverage: true });
    const { taskId } = await h.client.startTask({ agentId, title: 'Overage', description: 'spend past the cap' });
    const status = await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(h.llm.requests).toHaveLength(4);
    expect(status.usage).toMatchObject({
      inputTokens: 760_000,
      outputTokens: 8_000,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
    });
    expect(status.usage.costUsd).toBeCloseTo(1.6, 6);
    const task = await usageTotals(h.db.db, { taskId });
    expect(task).toMatchObject({ inputTokens: 760_000, outputTokens: 8_000, calls: 4 });
    expect(task.costUsd).toBeCloseTo(status.usage.costUsd, 6);
    expect((await events(taskId, 'budget-threshold-crossed')).map((e) => e.percent)).toEqual([75, 90, 100]);
    expect(await events(taskId, 'budget-exceeded')).toHaveLength(0);
  });
});
