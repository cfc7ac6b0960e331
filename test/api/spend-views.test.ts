import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { sql } from 'kysely';
import { submitTurn, toolTurn, useHarness } from '../support/harness';
import { eventually } from '../support/eventually';
import { ScriptedAgents } from '../workflow/task-support';
import type { TaskStatus } from '../../workflows/contract';
import { startTestApi, type TestApi } from './api-support';

const run = promisify(execFile);
/** Output tokens that cost at least $1 on any catalogued model: one call takes a task past a $0.50 budget. */
const EXPENSIVE_USAGE = { inputTokens: 100, outputTokens: 200_000 };
const expensiveStep = () => ({ ...toolTurn('file_read', { path: 'missing.txt' }), usage: EXPENSIVE_USAGE });

/**
 * Every view of a task's spend (the status, the budget and the usage, through the client, the HTTP API
 * and so the MCP endpoint and the CLI) agrees with the usage rows (`llm_calls`) whenever it is sampled:
 * while held at the budget, after each raise, once finished, and after a cancel. The timeline carries
 * a person's comments and review decisions, and is read by `seq`. The CLI's failures are the API's.
 */
describe('views of spend, the timeline and the CLI', () => {
  const h = useHarness({ worker: true, beforeClose: async () => api.close() });
  let api: TestApi;
  let agents: ScriptedAgents;
  beforeAll(async () => {
    api = await startTestApi(h);
    agents = new ScriptedAgents(h.llm);
  });

  async function recorded(taskId: string) {
    const rows = await h.db.db
      .selectFrom('llm_calls')
      .select(['cost_usd', 'input_tokens', 'output_tokens'])
      .where('task_id', '=', taskId)
      .execute();
    return {
      calls: rows.length,
      costUsd: rows.reduce((s, r) => s + Number(r.cost_usd), 0),
      inputTokens: rows.reduce((s, r) => s + r.input_tokens, 0),
      outputTokens: rows.reduce((s, r) => s + r.output_tokens, 0),
    };
  }

  /** Samples every view and checks each against the rows; returns the status. */
  async function expectViewsAgree(taskId: string): Promise<TaskStatus> {
    const rows = await recorded(taskId);
    const status = await h.client.getStatus(taskId);
    const budget = await h.client.getBudget(taskId);
    const viaApi = {
      status: (await api.call('GET', `/v1/tasks/${taskId}`, { token: api.tokens.read })).body,
      budget: (await api.call('GET', `/v1/tasks/${taskId}/budget`, { token: api.tokens.read })).body,
      usage: (await api.call('GET', `/v1/tasks/${taskId}/usage`, { token: api.tokens.read })).body,
    };
    // Nothing ran between the samples (the task is held or has ended): every figure is the rows'.
    expect(await recorded(taskId)).toEqual(rows);
    for (const [view, cost] of [
      ['status', status.usage.costUsd],
      ['status budget', status.budget?.spentUsd ?? rows.costUsd],
      ['budget', budget.spentUsd],
      ['API status', viaApi.status.usage.costUsd],
      ['API budget', viaApi.budget.spentUsd],
      ['API usage', viaApi.usage.costUsd],
    ] as const)
      expect({ view, cost: cost.toFixed(6) }).toEqual({ view, cost: rows.costUsd.toFixed(6) });
    expect([status.usage.inputTokens, status.usage.outputTokens]).toEqual([rows.inputTokens, rows.outputTokens]);
    expect(viaApi.usage.calls).toBe(rows.calls);
    // The hold is one fact too: the budget view says held exactly when the status waits for a decision.
    expect(budget.held).toBe(status.phase === 'awaiting-budget');
    expect(viaApi.budget.held).toBe(budget.held);
    return status;
  }

  test('held, raised, held again, raised and finished: status, budget and usage agree with the rows at each step', async () => {
    const taskId = agents.task([expensiveStep(), expensiveStep(), submitTurn('done within the raised budget')]);
    const agentId = await h.createAgent();
    await h.client.startTask({ agentId, taskId, title: 'Spend', description: 'spend', costBudgetUsd: 0.5 });

    await h.waitForStatus(taskId, (s) => s.phase === 'awaiting-budget', 60_000);
    const first = await expectViewsAgree(taskId);
    expect(first.usage.costUsd).toBeGreaterThanOrEqual(1);

    await h.client.decideBudget(taskId, { decision: 'raise', newLimitUsd: first.usage.costUsd + 0.25 });
    await agents.waitForRequests(taskId, 2);
    await h.waitForStatus(taskId, (s) => s.phase === 'awaiting-budget' && s.usage.costUsd >= 2, 60_000);
    const second = await expectViewsAgree(taskId);
    expect(second.usage.costUsd).toBeGreaterThanOrEqual(2);

    await h.client.decideBudget(taskId, { decision: 'raise', newLimitUsd: 1_000 });
    await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);
    const done = await expectViewsAgree(taskId);
    expect((await recorded(taskId)).calls).toBeGreaterThanOrEqual(3);
    expect(done.budget?.held ?? false).toBe(false);
  });

  test('a task cancelled mid-round: its status counts the calls it made', async () => {
    // Two quick steps, then a third whose answer streams slowly: the cancel arrives while it streams.
    const taskId = agents.task([
      toolTurn('file_read', { path: 'a.txt' }),
      toolTurn('file_read', { path: 'b.txt' }),
      { ...submitTurn('never'), chunkDelayMs: 2_000 },
    ]);
    const agentId = await h.createAgent();
    await h.client.startTask({ agentId, taskId, title: 'Cancel me', description: 'spend' });
    await agents.waitForRequests(taskId, 3, 60_000);
    await h.client.cancel(taskId);
    await h.waitForStatus(taskId, (s) => s.state === 'cancelled', 30_000);
    const status = await expectViewsAgree(taskId);
    expect((await recorded(taskId)).calls).toBeGreaterThanOrEqual(2);
    expect(status.usage.inputTokens).toBeGreaterThan(0);
  });

  test("a person's comment and the review decision are on the timeline, which pages by seq", async () => {
    const taskId = agents.task([submitTurn('ready'), submitTurn('ready again')]);
    const agentId = await h.createAgent();
    await h.client.startTask({ agentId, taskId, title: 'Review me', description: 'review' });
    await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);
    const commented = await api.call('POST', `/v1/tasks/${taskId}/comments`, {
      token: api.tokens.service,
      body: { text: 'looks close' },
    });
    expect(commented.status).toBe(202);
    await h.client.review(taskId, { decision: 'revise', feedback: 'one more pass', decidedBy: 'rita' });
    const events = await h.client.events(taskId);
    expect(events.find((e) => e.type === 'comment-added')?.data).toMatchObject({
      text: 'looks close',
      from: api.tokenNames.service,
    });
    expect(events.find((e) => e.type === 'review-decided')?.data).toEqual({
      decision: 'revise',
      feedback: 'one more pass',
      decidedBy: 'rita',
    });
    const viaApi = (await api.call('GET', `/v1/tasks/${taskId}/events`, { token: api.tokens.read })).body.events;
    expect(viaApi.map((e: { type: string }) => e.type)).toEqual(events.map((e) => e.type));

    // Two events whose ids were drawn in one order and which commit in the other: a reader at the
    // later-drawn one must still get the earlier-drawn one, which commits after it.
    await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);
    const { rows } = await sql<{ a: string; b: string }>`
      select nextval(pg_get_serial_sequence('task_events', 'id'))::text as a,
             nextval(pg_get_serial_sequence('task_events', 'id'))::text as b`.execute(h.db.db);
    const [{ a, b }] = rows as [{ a: string; b: string }];
    const insert = (id: string, type: string) =>
      h.db.db
        .insertInto('task_events')
        .values({ id, task_id: taskId, type, data: JSON.stringify({}) } as never)
        .execute();
    await insert(b, 'late-drawn-first-committed');
    const seen = await h.client.events(taskId);
    const cursor = seen.at(-1)!;
    expect(cursor.type).toBe('late-drawn-first-committed');
    await insert(a, 'early-drawn-last-committed');
    const next = await h.client.events(taskId, (cursor as { seq?: string }).seq ?? cursor.id);
    expect(next.map((e) => e.type)).toEqual(['early-drawn-last-committed']);
  });

  describe('the CLI says what the API says, and exits non-zero', () => {
    async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
      try {
        const { stdout, stderr } = await run(process.execPath, [require.resolve('tsx/cli'), 'client/cli.ts', ...args], {
          env: { ...process.env, DATABASE_URL: h.db.url, TEMPORAL_TASK_QUEUE: h.taskQueue, USER: 'cli-person' },
        });
        return { code: 0, stdout, stderr };
      } catch (error) {
        const e = error as { code: number; stdout: string; stderr: string };
        return { code: e.code, stdout: e.stdout, stderr: e.stderr };
      }
    }
    const apiWords = (answer: { status: number; body: { error: { code: string; message: string } } }) =>
      `error: ${answer.body.error.message} (${answer.status} ${answer.body.error.code})`;

    test('cancel of a completed task, approve of an unknown request, status of an unknown task', async () => {
      const taskId = agents.task([submitTurn('done')]);
      const agentId = await h.createAgent();
      await h.client.startTask({ agentId, taskId, title: 'Finish', description: 'finish' });
      await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);

      // Approve with a request id nobody asked: the API's 404, not "Workflow Update failed".
      const approve = await cli('task', 'approve', taskId, 'no-such-request');
      const approveApi = await api.call('POST', '/v1/approvals/no-such-request', { body: { decision: 'approved' } });
      expect(approveApi.status).toBe(404);
      expect(approve.code).not.toBe(0);
      expect(approve.stderr.trim()).toBe(apiWords(approveApi));

      await h.client.review(taskId, { decision: 'accept', decidedBy: 'rita' });
      await eventually(async () => (await h.client.getTaskRow(taskId)).state === 'completed', 'the task to complete');
      const cancel = await cli('task', 'cancel', taskId);
      const cancelApi = await api.call('POST', `/v1/tasks/${taskId}/cancel`);
      expect(cancelApi.status).toBe(409);
      expect(cancel.code).not.toBe(0);
      expect(cancel.stdout).not.toContain('cancellation requested');
      expect(cancel.stderr.trim()).toBe(apiWords(cancelApi));

      const status = await cli('task', 'status', 'no-such-task');
      const statusApi = await api.call('GET', '/v1/tasks/no-such-task', { token: api.tokens.read });
      expect(statusApi.status).toBe(404);
      expect(status.code).not.toBe(0);
      expect(status.stderr.trim()).toBe(apiWords(statusApi));
      expect(status.stderr).not.toMatch(/workflow not found/i);
    }, 120_000);
  });
});
