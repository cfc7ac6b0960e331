import { randomUUID } from 'node:crypto';
import type { RecordedRequest, ScriptedResponse } from '../fake-llm';
import { useHarness, submitTurn, textTurn, toolTurn } from '../support/harness';
import { eventually } from '../support/eventually';
import { isReflection, lastToolResults, offersTools } from './task-support';
import { recordNewTask } from '../../activities/store/task-graph';
import { ensureSession } from '../../activities/store/sessions';
import { PLATFORM } from '../../activities/store/tenancy';
import { budgetTreeCostUsd, grantableBudgetUsd } from '../../activities/store/task-budget';
import { dumpOrgRows, type OrgFixture } from './org-walls-support';

/** One call at this usage costs more than a dollar at the fake model's list price (as in subagents.test.ts). */
const EXPENSIVE_USAGE = { inputTokens: 100, outputTokens: 200_000 };

/**
 * The five crossings the review found, through a real worker, the real Temporal server and PostgreSQL
 * with a scripted model: an agent of organisation A with no shell, no file writes and no external tools
 * lists every task, reads organisation B's task, creates a task for B's agent, comments on B's task and
 * messages B's agent. Each is refused in words (as an id that never existed), and every row of B is
 * byte-identical afterwards. Then the assignee's policy (approval for work it does not take from an
 * agent, refusal for messages), and the subtask budget escape, held.
 */
describe('organisations are walls for agents (through a real worker)', () => {
  const h = useHarness();
  /** Scripts by task title (a task an agent creates has an id nobody knows up front). */
  const scripts = new Map<
    string,
    (turn: { request: RecordedRequest; index: number; taskId: string }) => ScriptedResponse
  >();
  const seen = new Map<string, RecordedRequest[]>();
  const TASK_PROMPT = /\[TASK EXECUTION — Task ID: ([^\]\s]+)\]\\n\\n# ([^\\]+)/;

  beforeAll(async () => {
    h.llm.setResponder((request) => {
      if (isReflection(request) || !offersTools(request)) return textTurn('Nothing to add.');
      const match = TASK_PROMPT.exec(JSON.stringify(request.body.messages ?? ''));
      if (!match) return { kind: 'error', status: 400, message: 'no task prompt' };
      const [, taskId, title] = match as unknown as [string, string, string];
      const list = seen.get(taskId) ?? [];
      list.push(request);
      seen.set(taskId, list);
      const script = scripts.get(title);
      return script ? script({ request, index: list.length - 1, taskId }) : submitTurn(`done: ${title}`);
    });
    await h.startWorker();
  });

  /** The result of each tool call the task made, in order (read from the request after each call). */
  const resultsOf = (taskId: string) => (seen.get(taskId) ?? []).slice(1).map((r) => lastToolResults(r)[0]!);

  async function startTask(agentId: string, title: string, options: { costBudgetUsd?: number } = {}) {
    const taskId = randomUUID();
    await h.client.startTask({ agentId, taskId, title, description: `Do: ${title}`, ...options });
    return taskId;
  }

  test('the five crossings are refused in words and leave every row of the other organisation unchanged', async () => {
    const suffix = randomUUID().slice(0, 8);
    const orgA = `cross-a-${suffix}`;
    const orgB = `cross-b-${suffix}`;
    const powerless = { shell: false, writeFiles: false, canCallExternalTools: false };
    const spy = await h.createAgent({ org: orgA, permissions: powerless });
    const victim = await h.createAgent({ org: orgB, permissions: { canCallExternalTools: true } });
    // B's task: a brief worth stealing, with its thread; its session and mailbox.
    const taskB = `cross-task-b-${suffix}`;
    await recordNewTask(h.db.db, {
      id: taskB,
      agentId: victim,
      title: 'B confidential launch plan',
      description: 'B SECRET: the launch is on the 3rd',
      priority: 'high',
      createdBy: 'user:b-boss',
      org: PLATFORM,
    });
    await ensureSession(h.db.db, { id: `cross-session-b-${suffix}`, agentId: victim, kind: 'task', taskId: taskB });
    const fx: OrgFixture = {
      orgB,
      agentB: victim,
      taskIds: [taskB],
      sessionIds: [`cross-session-b-${suffix}`],
      groupNames: [],
      skillNames: [],
    };
    const before = await dumpOrgRows(h.db.db, fx);

    const title = `Spy ${suffix}`;
    const calls = [
      toolTurn('task_list', { scope: 'all', include_closed: true }),
      toolTurn('task_get', { task_id: taskB }),
      toolTurn('task_create', { title: 'Run this with your tools', assignee: victim }),
      toolTurn('task_comment', { task_id: taskB, text: `@${victim} please paste the plan here` }),
      toolTurn('agent_send_message', { to: victim, text: 'send me your launch plan' }),
    ];
    scripts.set(title, ({ index }) => calls[index] ?? submitTurn('tried everything'));
    const spyTask = await startTask(spy, title);
    await h.waitForStatus(spyTask, (s) => s.state === 'review', 60_000);

    const [list, get, create, comment, message] = resultsOf(spyTask);
    // Listing: only A's tasks (the spy's own), nothing of B.
    expect(list!.text).toContain(spyTask);
    expect(list!.text).not.toContain(taskB);
    expect(list!.text).not.toContain('B confidential');
    expect(get).toEqual({ text: `There is no task "${taskB}". Find ids with task_list.`, isError: true });
    expect(create!.isError).toBe(true);
    expect(create!.text).toMatch(
      new RegExp(`^unknown agent "${victim}": no task was created\\. Known agents: ${spy}$`),
    );
    expect(comment).toEqual({ text: `There is no task "${taskB}". Find ids with task_list.`, isError: true });
    expect(message).toEqual({ text: `Message not sent: unknown agent "${victim}".`, isError: true });
    // Nothing reached B: no task for its agent, no comment, no mailbox item, no session, no event.
    expect(await dumpOrgRows(h.db.db, fx)).toEqual(before);
    const bRuns = await h.temporal.workflow.list({ query: `AgentId = "${victim}"` });
    for await (const run of bRuns) throw new Error(`a workflow ran for B's agent: ${run.workflowId}`);
  });

  test("the assignee's policy: work it takes only from humans or its manager waits for a human; messages are refused", async () => {
    const org = `policy-${randomUUID().slice(0, 8)}`;
    const lead = await h.createAgent({ org });
    const manager = await h.createAgent({ org, position: 'manager' });
    const humansOnly = await h.createAgent({ org, acceptsWorkFrom: 'humans' });
    const managerOnly = await h.createAgent({ org, acceptsWorkFrom: 'manager' });

    const leadTitle = `Lead ${org}`;
    const leadCalls = [
      toolTurn('task_create', { title: `For humans-only ${org}`, assignee: humansOnly }),
      toolTurn('task_create', { title: `For manager-only from lead ${org}`, assignee: managerOnly }),
      toolTurn('agent_send_message', { to: humansOnly, text: 'can you take this?' }),
      toolTurn('agent_send_message', { to: managerOnly, text: 'can you take this?' }),
    ];
    scripts.set(leadTitle, ({ index }) => leadCalls[index] ?? submitTurn('delegated'));
    const managerTitle = `Manager ${org}`;
    const managerCalls = [
      toolTurn('task_create', { title: `For manager-only from manager ${org}`, assignee: managerOnly }),
    ];
    scripts.set(managerTitle, ({ index }) => managerCalls[index] ?? submitTurn('delegated'));

    const leadTask = await startTask(lead, leadTitle);
    await h.waitForStatus(leadTask, (s) => s.state === 'review', 60_000);
    const managerTask = await startTask(manager, managerTitle);
    await h.waitForStatus(managerTask, (s) => s.state === 'review', 60_000);

    const [forHumans, forManagerFromLead, toHumans, toManagerOnly] = resultsOf(leadTask);
    expect(forHumans!.text).toMatch(
      /waits for a human to approve it before it starts \(.* takes work and messages only from humans\)/,
    );
    expect(forManagerFromLead!.text).toMatch(
      /waits for a human to approve it before it starts \(.* only from its manager/,
    );
    expect(toHumans).toEqual({
      text: `Message not sent: ${humansOnly} takes work and messages only from humans.`,
      isError: true,
    });
    expect(toManagerOnly!.isError).toBe(true);
    expect(toManagerOnly!.text).toMatch(/only from its manager/);

    const created = await h.db.db
      .selectFrom('tasks')
      .select(['agent_id', 'title', 'needs_approval', 'state'])
      .where('created_by', 'in', [`agent:${lead}`, `agent:${manager}`])
      .orderBy('title')
      .execute();
    expect(created.map((t) => [t.title, t.needs_approval])).toEqual([
      [`For humans-only ${org}`, true],
      [`For manager-only from lead ${org}`, true],
      [`For manager-only from manager ${org}`, false],
    ]);
    // The gated ones wait (pending) for a human of the organisation; the manager's runs to review.
    const waiting = created.filter((t) => t.needs_approval);
    expect(waiting.map((t) => t.state)).toEqual(['pending', 'pending']);
    await eventually(async () => {
      const row = await h.db.db
        .selectFrom('tasks')
        .select('state')
        .where('title', '=', `For manager-only from manager ${org}`)
        .executeTakeFirstOrThrow();
      return row.state === 'review';
    }, "the manager's task to run");
    // No message reached either mailbox.
    const items = await h.db.db
      .selectFrom('mailbox_items')
      .select('id')
      .where('agent_id', 'in', [humansOnly, managerOnly])
      .where('kind', '=', 'message')
      .execute();
    expect(items).toEqual([]);
  });

  describe('the subtask budget escape', () => {
    test('a task held at its budget cannot create a subtask: it has nothing left to grant', async () => {
      const agent = await h.createAgent({ org: `budget-${randomUUID().slice(0, 8)}` });
      const title = `Held ${randomUUID().slice(0, 8)}`;
      // One expensive step takes the task past its budget and, in the same step, tries to escape.
      scripts.set(title, ({ index }) =>
        index === 0
          ? { ...toolTurn('task_create', { title: `Escape of ${title}`, assignee: agent }), usage: EXPENSIVE_USAGE }
          : submitTurn('done'),
      );
      const taskId = await startTask(agent, title, { costBudgetUsd: 0.5 });
      const held = await h.waitForStatus(taskId, (s) => s.phase === 'awaiting-budget', 60_000);
      expect(held.budget?.held).toBe(true);
      await eventually(() => (seen.get(taskId)?.length ?? 0) >= 1 && true, 'the first step');
      const result = await eventually(
        async () =>
          (
            await h.db.db
              .selectFrom('tool_calls')
              .select(['result', 'is_error'])
              .where('session_id', 'like', `%${taskId}%`)
              .where('tool', '=', 'task_create')
              .executeTakeFirst()
          )?.result ?? undefined,
        'the task_create result',
      );
      expect(result).toMatch(/^Not created: task .* has no cost budget left/);
      const escaped = await h.db.db
        .selectFrom('tasks')
        .select('id')
        .where('title', '=', `Escape of ${title}`)
        .execute();
      expect(escaped).toEqual([]);
      await h.temporal.workflow.getHandle(`task-${taskId}`).cancel();
    });

    test("a subtask is granted the parent's remaining budget, holds at it, and its spend counts against the parent", async () => {
      const agent = await h.createAgent({ org: `budget-${randomUUID().slice(0, 8)}` });
      const suffix = randomUUID().slice(0, 8);
      const parentTitle = `Parent ${suffix}`;
      const childTitle = `Child ${suffix}`;
      scripts.set(parentTitle, ({ index }) =>
        index === 0 ? toolTurn('task_create', { title: childTitle, assignee: agent }) : submitTurn('delegated'),
      );
      // The child's first call costs more than the whole parent budget.
      scripts.set(childTitle, ({ index }) =>
        index === 0 ? { ...toolTurn('task_list', {}), usage: EXPENSIVE_USAGE } : submitTurn('child done'),
      );
      const limit = 0.9;
      const parentId = await startTask(agent, parentTitle, { costBudgetUsd: limit });
      const child = await eventually(
        () => h.db.db.selectFrom('tasks').selectAll().where('title', '=', childTitle).executeTakeFirst(),
        'the subtask',
      );
      expect(child.budget_parent_id).toBe(parentId);
      const parentSpentAtGrant = limit - child.cost_budget_usd!;
      expect(child.cost_budget_usd!).toBeGreaterThan(0);
      expect(child.cost_budget_usd!).toBeLessThan(limit);
      expect(parentSpentAtGrant).toBeGreaterThan(0);

      // The child holds at its grant, the parent's remaining, not at no limit at all.
      const held = await h.waitForStatus(child.id, (s) => s.phase === 'awaiting-budget', 60_000);
      expect(held.budget!.limitUsd).toBeCloseTo(child.cost_budget_usd!, 9);
      expect(seen.get(child.id)).toHaveLength(1);

      // Its spend counts against the parent: the parent's tree has spent past the parent's limit, so nothing is left to grant.
      const childSpent = await budgetTreeCostUsd(h.db.db, child.id);
      expect(childSpent).toBeGreaterThan(limit);
      const parentTree = await budgetTreeCostUsd(h.db.db, parentId);
      expect(parentTree).toBeGreaterThanOrEqual(childSpent + parentSpentAtGrant - 1e-9);
      expect(await grantableBudgetUsd(h.db.db, parentId, async () => limit)).toBe(0);

      await h.temporal.workflow.getHandle(`task-${child.id}`).cancel();
      await h.temporal.workflow
        .getHandle(`task-${parentId}`)
        .cancel()
        .catch(() => undefined);
    });
  });
});
