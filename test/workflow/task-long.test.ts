import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { roundWorkflowId, taskWorkflowId } from '../../workflows/contract';
import { ROUND_MAX_HISTORY_EVENTS_PER_RUN } from '../../workflows/rules/harness';
import { submitTurn, toolTurn } from '../support/harness';
import { historiesOfAllRuns, offersTools, useScriptedHarness } from './task-support';

/** The history bound the issue sets for every run of a long task. */
const MAX_EVENTS_PER_RUN = 10_000;
/**
 * Enough iterations that the round passes its own event bound (ROUND_MAX_HISTORY_EVENTS_PER_RUN) and
 * continues as new whatever the machine's speed: quick steps run as local activities, at least one
 * event each (their marker), and the bound counts the markers of a workflow task still open.
 */
const ITERATIONS = Math.ceil(ROUND_MAX_HISTORY_EVENTS_PER_RUN * 1.1);

/**
 * A long task: 2,200 tool iterations in one round. The conversation lives in PostgreSQL and the round
 * continues as new, so no run's history comes near Temporal's limits.
 */
describe(`a ${ITERATIONS.toLocaleString('en')}-iteration task`, () => {
  const { h, agents } = useScriptedHarness();
  beforeAll(() => {
    writeFileSync(path.join(h.workspaceDir, 'readme.txt'), 'a small file');
  });

  test(`completes with every run's history under ${MAX_EVENTS_PER_RUN} events, continuing as new`, async () => {
    const agentId = await h.createAgent();
    const taskId = agents.task(({ index }) =>
      index < ITERATIONS ? toolTurn('file_read', { path: 'readme.txt' }) : submitTurn(`${ITERATIONS} reads`),
    );
    const started = Date.now();
    const { handle } = await h.client.startTask({
      agentId,
      taskId,
      title: 'Long',
      description: `read the readme ${ITERATIONS} times`,
    });
    const status = await h.waitForStatus(taskId, (s) => s.state === 'review', 300_000);
    const elapsedMs = Date.now() - started;
    expect(status).toMatchObject({ round: 1, submission: `${ITERATIONS} reads` });
    await h.client.review(taskId, { decision: 'accept' });
    expect((await handle.result()).state).toBe('completed');

    expect(agents.requests(taskId)).toHaveLength(ITERATIONS + 1);
    const ledger = await h.db.db
      .selectFrom('tool_calls')
      .select(['status', 'executions'])
      .where('task_id', '=', taskId)
      .execute();
    expect(ledger).toHaveLength(ITERATIONS + 1);
    expect(ledger.every((l) => l.status === 'completed' && l.executions === 1)).toBe(true);

    // The conversation was compressed for the provider, and the task prompt stayed first.
    const stored = await h.db.db
      .selectFrom('messages')
      .select('id')
      .where('session_id', '=', `task_${taskId}_r1`)
      .execute();
    const last = agents.requests(taskId).at(-1)!.body.messages as Array<{ role: string; content: unknown }>;
    expect(last.length).toBeLessThan(stored.length / 2);
    expect(JSON.stringify(last[0])).toContain(`[TASK EXECUTION — Task ID: ${taskId}]`);

    const roundRuns = await historiesOfAllRuns(h.temporal.workflow.getHandle(roundWorkflowId(taskId, 1)));
    const taskRuns = await historiesOfAllRuns(h.temporal.workflow.getHandle(taskWorkflowId(taskId)));
    const roundSizes = roundRuns.map((events) => events.length);
    const taskSizes = taskRuns.map((events) => events.length);
    // The round really continued as new (its own bound, or Temporal's suggestion, whichever came first).
    expect(roundRuns.length).toBeGreaterThan(1);
    for (const size of [...roundSizes, ...taskSizes]) expect(size).toBeLessThan(MAX_EVENTS_PER_RUN);
    for (const size of roundSizes) expect(size).toBeLessThan(ROUND_MAX_HISTORY_EVENTS_PER_RUN + 100);
    const summariserCalls = h.llm.requests.filter((r) => !offersTools(r)).length;
    console.log(
      `${ITERATIONS} iterations in ${(elapsedMs / 1000).toFixed(1)} s; round runs: ${roundSizes.join(', ')} events; ` +
        `task runs: ${taskSizes.join(', ')} events; summariser calls: ${summariserCalls}; ${stored.length} stored messages, ${last.length} in the last request`,
    );
  }, 360_000);
});
