import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { RecordedRequest, ScriptedResponse } from '../fake-llm';
import { pauseSignal, resumeSignal, roundWorkflowId, taskWorkflowId } from '../../workflows/contract';
import { subagentWorkflowId } from '../../workflows/subagent-contract';
import { SUBAGENT_MAX_PARALLEL } from '../../workflows/rules/subagents';
import { createHarness, useHarness, submitTurn, textTurn, toolTurn } from '../support/harness';
import { eventually } from '../support/eventually';
import { BudgetDecisionRejectedError } from '../../client';
import { lastToolResults, offersTools } from './task-support';

const TASK_ID_PATTERN = /\[TASK EXECUTION — Task ID: ([^\]\s]+)\]/;
/** Each sub-agent's task names its script: `SUBTASK<key>`. */
const CHILD_KEY_PATTERN = /SUBTASK(k[a-z0-9]+_\d+)/;
/** A delayed child answer: ~6 stream events 400 ms apart, about 2 s per child. */
const CHILD_CHUNK_DELAY_MS = 400;
/** Output tokens that cost at least $1 on any catalogued model: one call takes a child past a $0.50 tree budget. */
const EXPENSIVE_USAGE = { inputTokens: 100, outputTokens: 200_000 };

type Script = (index: number, request: RecordedRequest) => ScriptedResponse;

/**
 * Sub-agents (issue 12): spawn_subagents runs child workflows `task-{id}-r{round}-sub-{n}` in parallel,
 * their answers (or errors) come back as the parent's tool result, more than 10 is refused before
 * anything starts, cancel and pause reach the children, and the cost governor holds the whole tree at
 * the task's budget until a human raises it or stops it.
 */
describe('sub-agents', () => {
  const h = useHarness();
  const parents = new Map<string, Script>();
  const children = new Map<string, Script>();
  const seen = new Map<string, RecordedRequest[]>();

  /** Parent requests go to the parent's script (by task id), children's to theirs (by the key in their task). */
  const route = (request: RecordedRequest): ScriptedResponse => {
    if (!offersTools(request)) return textTurn('Summary: work in progress.');
    const messages = JSON.stringify(request.body.messages ?? '');
    // The parent's conversation names its children's tasks too: the task marker decides first.
    const key = TASK_ID_PATTERN.exec(messages)?.[1] ?? CHILD_KEY_PATTERN.exec(messages)?.[1];
    const script = key ? (parents.get(key) ?? children.get(key)) : undefined;
    if (!key || !script)
      return { kind: 'error', status: 400, message: `no script for this request (${key ?? 'unknown'})` };
    const list = seen.get(key) ?? [];
    list.push(request);
    seen.set(key, list);
    return script(list.length - 1, request);
  };

  beforeAll(async () => {
    h.llm.setResponder(route);
    await h.startWorker();
  });

  const requestsOf = (key: string): RecordedRequest[] => seen.get(key) ?? [];

  /** `count` children with one script each; returns their task briefs in order and their keys. */
  function childBriefs(
    count: number,
    script: (i: number) => Script,
  ): { briefs: Array<{ task: string }>; keys: string[] } {
    const prefix = `k${randomUUID().replace(/-/g, '').slice(0, 10)}`;
    const keys = Array.from({ length: count }, (_, i) => `${prefix}_${i}`);
    keys.forEach((key, i) => children.set(key, script(i)));
    return { briefs: keys.map((key) => ({ task: `SUBTASK${key}: look into part ${key}` })), keys };
  }

  /** A parent task: spawns the given sub-agents on its first turn, then submits. */
  async function startParent(
    spawn: { tool: string; input: unknown },
    options: { costBudgetUsd?: number } = {},
    on = h,
  ) {
    const taskId = randomUUID();
    parents.set(taskId, (index) =>
      index === 0 ? toolTurn(spawn.tool, spawn.input) : submitTurn('delegated and done'),
    );
    const agentId = await on.createAgent();
    const { handle } = await on.client.startTask({
      agentId,
      taskId,
      title: 'Delegate',
      description: 'Delegate the work to sub-agents.',
      ...options,
    });
    return { taskId, handle, round: roundWorkflowId(taskId, 1) };
  }

  const describeChild = (round: string, n: number) =>
    h.temporal.workflow.getHandle(subagentWorkflowId(round, n)).describe();

  test('spawn_subagents with 10 children runs them in parallel: wall time well under 10× one child', async () => {
    const answer =
      (i: number): Script =>
      () => ({ ...textTurn(`Finding ${i}: all good.`), chunkDelayMs: CHILD_CHUNK_DELAY_MS });

    const one = childBriefs(1, answer);
    const single = await startParent({ tool: 'spawn_subagent', input: one.briefs[0] });
    await h.waitForStatus(single.taskId, (s) => s.state === 'review', 60_000);
    const singleMs = requestsOf(single.taskId)[1]!.receivedAt - requestsOf(single.taskId)[0]!.receivedAt;

    const ten = childBriefs(SUBAGENT_MAX_PARALLEL, answer);
    const parallel = await startParent({ tool: 'spawn_subagents', input: { subagents: ten.briefs } });
    await h.waitForStatus(parallel.taskId, (s) => s.state === 'review', 90_000);
    const [first, second] = requestsOf(parallel.taskId);
    const tenMs = second!.receivedAt - first!.receivedAt;

    // Every child asked the model before the first child's (2 s) answer was done: they overlapped.
    const childStarts = ten.keys.map((k) => requestsOf(k)[0]!.receivedAt);
    expect(Math.max(...childStarts) - Math.min(...childStarts)).toBeLessThan(CHILD_CHUNK_DELAY_MS * 5);
    expect(tenMs).toBeLessThan(singleMs * 4);
    // The parent's tool result carries every answer, in order, and the status accounts each node.
    const results = lastToolResults(second!);
    expect(results).toHaveLength(1);
    expect(results[0]!.isError).toBe(false);
    expect(results[0]!.text).toContain('10 sub-agents finished: 10 completed, 0 failed.');
    for (let i = 0; i < 10; i++) expect(results[0]!.text).toContain(`Finding ${i}: all good.`);
    expect(results[0]!.text.indexOf('Finding 0:')).toBeLessThan(results[0]!.text.indexOf('Finding 9:'));
    for (let n = 1; n <= 10; n++) expect((await describeChild(parallel.round, n)).status.name).toBe('COMPLETED');
    const budget = await h.client.getBudget(parallel.taskId);
    expect(budget.limitUsd).toBeNull();
    expect(budget.nodes.map((n) => n.workflowId)).toEqual([
      parallel.round,
      ...Array.from({ length: 10 }, (_, i) => subagentWorkflowId(parallel.round, i + 1)),
    ]);
    expect(budget.nodes.slice(1).every((n) => n.state === 'completed' && n.spentUsd > 0)).toBe(true);
    // The round itself has finished too: the report no longer lists it as running.
    expect(budget.nodes[0]).toMatchObject({ workflowId: parallel.round, state: 'completed' });
    // For the notes' figures: `SUBAGENT_FIGURES_FILE=/tmp/f.json npx jest …` records the two wall times.
    if (process.env.SUBAGENT_FIGURES_FILE)
      writeFileSync(process.env.SUBAGENT_FIGURES_FILE, JSON.stringify({ singleMs, tenMs }));
  });

  test('a child that fails: its error reaches the parent tool result, the others still answer', async () => {
    const { briefs } = childBriefs(
      3,
      (i) => () =>
        i === 1 ? { kind: 'error', status: 400, message: 'child two broke its parser' } : textTurn(`Answer ${i}.`),
    );
    const parent = await startParent({ tool: 'spawn_subagents', input: { subagents: briefs } });
    await h.waitForStatus(parent.taskId, (s) => s.state === 'review', 60_000);
    const results = lastToolResults(requestsOf(parent.taskId)[1]!);
    expect(results[0]!.text).toContain('3 sub-agents finished: 2 completed, 1 failed.');
    expect(results[0]!.text).toMatch(
      /Sub-agent 2 \([^)]+-sub-2\): failed\nTask: SUBTASK\w+: look into part \w+\nError: .*child two broke its parser/,
    );
    expect(results[0]!.text).toContain('Answer 0.');
    expect(results[0]!.text).toContain('Answer 2.');
    expect((await describeChild(parent.round, 2)).status.name).toBe('FAILED');
    expect((await describeChild(parent.round, 3)).status.name).toBe('COMPLETED');
  });

  test('11 sub-agents: a clear tool error, and nothing is started', async () => {
    const { briefs, keys } = childBriefs(SUBAGENT_MAX_PARALLEL + 1, () => () => textTurn('never asked'));
    const parent = await startParent({ tool: 'spawn_subagents', input: { subagents: briefs } });
    await h.waitForStatus(parent.taskId, (s) => s.state === 'review', 60_000);
    const results = lastToolResults(requestsOf(parent.taskId)[1]!);
    expect(results[0]!.isError).toBe(true);
    expect(results[0]!.text).toContain('at most 10 sub-agents run in parallel; none was started');
    expect(keys.flatMap(requestsOf)).toEqual([]);
    await expect(describeChild(parent.round, 1)).rejects.toBeInstanceOf(WorkflowNotFoundError);
  });

  test('cancelling the task cancels its running sub-agents within seconds; pausing it reaches them too', async () => {
    for (const how of ['cancel', 'pause'] as const) {
      const { briefs, keys } = childBriefs(3, () => () => ({ kind: 'hang' }));
      const parent = await startParent({ tool: 'spawn_subagents', input: { subagents: briefs } });
      await eventually(() => keys.every((k) => requestsOf(k).length === 1), 'every child to ask the model');
      const at = Date.now();
      if (how === 'cancel') await parent.handle.cancel();
      else await parent.handle.signal(pauseSignal, { reason: 'test' });
      await eventually(() => keys.every((k) => requestsOf(k)[0]!.aborted), 'every child stream to be aborted', 5_000);
      for (let n = 1; n <= 3; n++)
        await eventually(
          async () => (await describeChild(parent.round, n)).status.name === 'CANCELLED',
          `sub-agent ${n} to be cancelled`,
          5_000,
        );
      expect(Date.now() - at).toBeLessThan(5_000);
      const state = how === 'cancel' ? 'cancelled' : 'blocked';
      await eventually(
        async () => (await h.client.getTaskRow(parent.taskId)).state === state,
        `the task to be ${state}`,
        5_000,
      );
      if (how === 'pause') await parent.handle.cancel();
    }
  });

  test('a worker that stops while the sub-agents run: the next worker replays the round and spawns nobody twice', async () => {
    const own = await createHarness();
    own.llm.setResponder(route);
    try {
      const { briefs, keys } = childBriefs(3, (i) => () => ({
        ...textTurn(`Survivor ${i}.`),
        chunkDelayMs: CHILD_CHUNK_DELAY_MS,
      }));
      const first = await own.startWorker();
      const parent = await startParent({ tool: 'spawn_subagents', input: { subagents: briefs } }, {}, own);
      await eventually(() => keys.every((k) => requestsOf(k).length >= 1), 'every child to ask the model');
      first.shutdown(); // in-flight LLM calls are cancelled; the next worker has no cached workflow state
      await own.startWorker();
      const done = await own.waitForStatus(parent.taskId, (s) => s.state === 'review', 90_000);
      expect(done.state).toBe('review');
      expect(lastToolResults(requestsOf(parent.taskId)[1]!)[0]!.text).toContain(
        '3 sub-agents finished: 3 completed, 0 failed.',
      );
      await expect(
        own.temporal.workflow.getHandle(subagentWorkflowId(parent.round, 4)).describe(),
      ).rejects.toBeInstanceOf(WorkflowNotFoundError);
      const ledger = await own.db.db
        .selectFrom('tool_calls')
        .select(['status', 'executions'])
        .where('task_id', '=', parent.taskId)
        .where('tool', '=', 'spawn_subagents')
        .execute();
      expect(ledger).toEqual([{ status: 'completed', executions: 1 }]);
    } finally {
      await own.close();
    }
  });

  describe('the cost governor down the tree', () => {
    /** Two children; each spends past its share on its first call, then would answer. */
    async function overBudgetTree() {
      const { briefs, keys } = childBriefs(
        2,
        (i) => (index) =>
          index === 0
            ? { ...toolTurn('file_read', { path: 'missing.txt' }), usage: EXPENSIVE_USAGE }
            : textTurn(`Child ${i} done.`),
      );
      const parent = await startParent(
        { tool: 'spawn_subagents', input: { subagents: briefs } },
        { costBudgetUsd: 0.5 },
      );
      const held = await h.waitForStatus(
        parent.taskId,
        (s) => s.phase === 'awaiting-budget' && s.budget?.held === true,
        60_000,
      );
      return { parent, keys, held };
    }

    test('reaching the budget holds every node until a raise, which lets the tree finish; spend is accounted per node and in total', async () => {
      const { parent, keys, held } = await overBudgetTree();
      expect(held.budget!.limitUsd).toBe(0.5);
      // While the tree is held the status's cost already includes what the sub-agents spent: the budget's figure.
      expect(held.usage.costUsd).toBeGreaterThanOrEqual(2);
      expect(held.usage.costUsd).toBeCloseTo(held.budget!.spentUsd, 6);
      // Every child made exactly its first (expensive) call and holds before the next one.
      await new Promise((r) => setTimeout(r, 1_500));
      expect(keys.map((k) => requestsOf(k).length)).toEqual([1, 1]);
      const budget = await h.temporal.workflow.getHandle(parent.round).query<{
        held: boolean;
        spentUsd: number;
        nodes: Array<{ workflowId: string; spentUsd: number; state: string }>;
      }>('budget');
      expect(budget.held).toBe(true);
      expect(budget.nodes.map((n) => [n.workflowId, n.state])).toEqual([
        [parent.round, 'held'],
        [subagentWorkflowId(parent.round, 1), 'held'],
        [subagentWorkflowId(parent.round, 2), 'held'],
      ]);
      expect(budget.nodes.slice(1).every((n) => n.spentUsd >= 1)).toBe(true);
      expect(budget.spentUsd).toBeCloseTo(
        budget.nodes.reduce((s, n) => s + n.spentUsd, 0),
        6,
      );

      // A raise not above the spend would be ignored by the tree: the update's validator refuses it, and the tree still holds.
      const refused = await h.client
        .decideBudget(parent.taskId, { decision: 'raise', newLimitUsd: 0.75 })
        .catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(BudgetDecisionRejectedError);
      expect((refused as Error).message).toMatch(
        /^newLimitUsd 0\.75 must be above what the task has spent \(\$\d+\.\d{4}\)$/,
      );
      expect((await h.client.getBudget(parent.taskId)).held).toBe(true);
      const recordedDecision = await h.client.decideBudget(parent.taskId, {
        decision: 'raise',
        newLimitUsd: 1_000,
        decidedBy: 'alice',
      });
      expect(recordedDecision).toMatchObject({ decision: 'raise', newLimitUsd: 1_000, decidedBy: 'alice' });
      expect(recordedDecision.spentUsd).toBeGreaterThanOrEqual(2);
      const done = await h.waitForStatus(parent.taskId, (s) => s.state === 'review', 60_000);
      // In review no round runs: a decision now would go nowhere, and says so.
      await expect(h.client.decideBudget(parent.taskId, { decision: 'stop' })).rejects.toThrow(
        /no round of this task is running/,
      );
      expect(keys.map((k) => requestsOf(k).length)).toEqual([2, 2]);
      expect(lastToolResults(requestsOf(parent.taskId)[1]!)[0]!.text).toContain(
        '2 sub-agents finished: 2 completed, 0 failed.',
      );
      // The tree's total equals what PostgreSQL recorded for the task, and the task's usage includes the children.
      const rows = await h.db.db
        .selectFrom('llm_calls')
        .select('cost_usd')
        .where('task_id', '=', parent.taskId)
        .execute();
      const recorded = rows.reduce((s, r) => s + Number(r.cost_usd), 0);
      expect(done.budget!.spentUsd).toBeCloseTo(recorded, 4);
      expect(done.usage.costUsd).toBeCloseTo(recorded, 4);
      expect(done.budget!.held).toBe(false);
      expect(done.budget!.limitUsd).toBe(1_000);
    });

    test("the round's own calls count too, and an attempt after a pause starts with what earlier attempts spent", async () => {
      const taskId = randomUUID();
      parents.set(taskId, (index) =>
        index === 0
          ? { ...toolTurn('file_read', { path: 'missing.txt' }), usage: EXPENSIVE_USAGE }
          : submitTurn('done within the raised budget'),
      );
      const agentId = await h.createAgent();
      const { handle } = await h.client.startTask({
        agentId,
        taskId,
        title: 'Expensive',
        description: 'one expensive step',
        costBudgetUsd: 0.5,
      });
      const round = roundWorkflowId(taskId, 1);
      const held = await h.waitForStatus(taskId, (s) => s.phase === 'awaiting-budget', 60_000);
      expect(held.budget!.nodes.map((n) => [n.workflowId, n.state])).toEqual([[round, 'held']]);
      expect(requestsOf(taskId)).toHaveLength(1);

      await handle.signal(pauseSignal, {});
      await h.waitForStatus(taskId, (s) => s.state === 'blocked');
      await handle.signal(resumeSignal);
      // The new attempt holds before its first call: the first attempt's spend counts against the budget.
      const again = await h.waitForStatus(
        taskId,
        (s) =>
          s.state === 'in_progress' &&
          s.phase === 'awaiting-budget' &&
          s.budget!.nodes[0]!.workflowId === taskWorkflowId(taskId),
        30_000,
      );
      expect(again.budget!.nodes.map((n) => [n.workflowId, n.state])).toEqual([
        [taskWorkflowId(taskId), 'completed'],
        [round, 'held'],
      ]);
      expect(again.budget!.nodes[0]!.spentUsd).toBeGreaterThanOrEqual(1);
      expect(requestsOf(taskId)).toHaveLength(1);

      await h.client.decideBudget(taskId, { decision: 'raise', newLimitUsd: 1_000 });
      await h.waitForStatus(taskId, (s) => s.state === 'review', 30_000);
      expect(requestsOf(taskId)).toHaveLength(2);
    });

    test('a stop decision cancels the children and fails the task with BudgetStopped', async () => {
      const { parent, keys } = await overBudgetTree();
      await h.client.decideBudget(parent.taskId, { decision: 'stop', decidedBy: 'bob' });
      const row = await eventually(
        async () => {
          const r = await h.client.getTaskRow(parent.taskId);
          return r.state === 'failed' ? r : undefined;
        },
        'the task to fail',
        20_000,
      );
      expect(row.last_error).toMatch(
        /^stopped by a budget decision: the task's tree spent \$\d+\.\d{4} of its \$0\.5000 budget/,
      );
      for (let n = 1; n <= 2; n++) expect((await describeChild(parent.round, n)).status.name).toBe('CANCELLED');
      expect(keys.map((k) => requestsOf(k).length)).toEqual([1, 1]);
      // The spawn call still got its result recorded in the ledger (nothing is left "started").
      const ledger = await h.db.db
        .selectFrom('tool_calls')
        .select(['tool', 'status', 'result'])
        .where('task_id', '=', parent.taskId)
        .where('tool', '=', 'spawn_subagents')
        .execute();
      expect(ledger).toHaveLength(1);
      expect(ledger[0]!.result).toContain('stopped by a budget decision before it finished');
    });
  });
});
