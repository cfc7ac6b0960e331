import { randomUUID } from 'node:crypto';
import type { RecordedRequest } from '../fake-llm';
import type { HeartbeatWorkflowInput, HeartbeatWorkflowResult } from '../../workflows/contract';
import { HEARTBEAT_MAX_TOOL_ITERATIONS } from '../../workflows/rules/harness';
import { HEARTBEAT_TOOL_WHITELIST } from '../../workflows/rules/heartbeat-rules';
import { useHarness, textTurn, toolTurn } from '../support/harness';

/** heartbeatWorkflow started directly (the schedule test covers starting it from a Schedule). */
describe('heartbeat workflow', () => {
  const h = useHarness({ worker: true });
  beforeEach(() => h.llm.reset());

  async function heartbeat(
    agentId: string,
    input: Partial<HeartbeatWorkflowInput> = {},
  ): Promise<HeartbeatWorkflowResult> {
    return h.temporal.workflow.execute('heartbeatWorkflow', {
      workflowId: `heartbeat-${agentId}-test-${randomUUID().slice(0, 8)}`,
      taskQueue: h.taskQueue,
      args: [{ agentId, ...input }],
    });
  }

  const bodyText = (r: RecordedRequest) => JSON.stringify(r.body);
  const toolNames = (r: RecordedRequest) =>
    ((r.body.tools as Array<{ name: string }> | undefined) ?? []).map((t) => t.name);

  async function sideEffects(agentId: string) {
    const db = h.db.db;
    const count = async (
      table:
        | 'memory_notebook'
        | 'memory_observations'
        | 'memory_knowledge'
        | 'memory_daily_logs'
        | 'agent_file_edits'
        | 'tool_calls'
        | 'tasks',
    ) =>
      Number(
        (
          await db
            .selectFrom(table)
            .select((eb) => eb.fn.countAll<string>().as('n'))
            .where('agent_id', '=', agentId)
            .executeTakeFirstOrThrow()
        ).n,
      );
    return {
      notebook: await count('memory_notebook'),
      observations: await count('memory_observations'),
      knowledge: await count('memory_knowledge'),
      dailyLogs: await count('memory_daily_logs'),
      fileEdits: await count('agent_file_edits'),
      toolCalls: await count('tool_calls'),
      tasks: await count('tasks'),
    };
  }

  test('HEARTBEAT_OK ends the run quietly: nothing written, nothing called', async () => {
    const agentId = await h.createAgent();
    const agentBefore = await h.db.db
      .selectFrom('agents')
      .selectAll()
      .where('id', '=', agentId)
      .executeTakeFirstOrThrow();
    h.llm.enqueue(textTurn('HEARTBEAT_OK'));
    const result = await heartbeat(agentId);
    expect(result).toMatchObject({ agentId, outcome: 'ok', toolIterations: 0, skippedInRow: 0 });

    expect(h.llm.requests).toHaveLength(1);
    const request = h.llm.requests[0]!;
    expect(bodyText(request)).toContain('[HEARTBEAT CHECK-IN]');
    expect(bodyText(request)).toContain('- check tasks'); // the agent's HEARTBEAT.md checklist
    expect(bodyText(request)).toContain("Patrol, don't build");
    expect(toolNames(request).length).toBeGreaterThan(0);
    expect(toolNames(request).every((n) => HEARTBEAT_TOOL_WHITELIST.includes(n))).toBe(true);

    expect(await sideEffects(agentId)).toEqual({
      notebook: 0,
      observations: 0,
      knowledge: 0,
      dailyLogs: 0,
      fileEdits: 0,
      toolCalls: 0,
      tasks: 0,
    });
    const agentAfter = await h.db.db
      .selectFrom('agents')
      .selectAll()
      .where('id', '=', agentId)
      .executeTakeFirstOrThrow();
    expect(agentAfter.content_hash).toBe(agentBefore.content_hash);
    const runs = await h.db.db.selectFrom('heartbeat_runs').selectAll().where('agent_id', '=', agentId).execute();
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ outcome: 'ok', summary: null, tool_iterations: 0 });
  });

  test('a heartbeat that acts uses whitelisted tools, and its summary opens the next check-in', async () => {
    const agentId = await h.createAgent();
    h.llm.enqueue(
      toolTurn('update_notebook', { key: 'priorities', content: 'Follow up on the flaky deploy' }),
      textTurn('Recorded the deploy follow-up as my top priority.'),
    );
    const first = await heartbeat(agentId);
    expect(first).toMatchObject({ outcome: 'acted', toolIterations: 1 });
    const entry = await h.db.db
      .selectFrom('memory_notebook')
      .selectAll()
      .where('agent_id', '=', agentId)
      .executeTakeFirstOrThrow();
    expect(entry).toMatchObject({ key: 'priorities', tag: 'agent', content: 'Follow up on the flaky deploy' });

    // Something changed (a task failed), so the next heartbeat runs and sees the summary and the failure.
    await h.db.db
      .insertInto('tasks')
      .values({
        id: `t-${randomUUID()}`,
        agent_id: agentId,
        title: 'Nightly build',
        description: 'd',
        state: 'failed',
        last_error: 'exit code 2',
      })
      .execute();
    h.llm.enqueue(textTurn('HEARTBEAT_OK'));
    expect((await heartbeat(agentId)).outcome).toBe('ok');
    const second = bodyText(h.llm.requests.at(-1)!);
    expect(second).toContain('Recorded the deploy follow-up as my top priority.');
    expect(second).toContain('## Failed tasks — recovery');
    expect(second).toContain('Nightly build');
    expect(second).toContain('exit code 2');
  });

  test('an idle heartbeat is skipped without an LLM call at most 3 times in a row; the 4th runs', async () => {
    const agentId = await h.createAgent();
    h.llm.setResponder(() => textTurn('HEARTBEAT_OK'));
    const outcomes: string[] = [];
    for (let i = 0; i < 5; i++) outcomes.push((await heartbeat(agentId)).outcome);
    expect(outcomes).toEqual(['ok', 'skipped', 'skipped', 'skipped', 'ok']);
    expect(h.llm.requests).toHaveLength(2);
    const runs = await h.db.db
      .selectFrom('heartbeat_runs')
      .select(['outcome', 'skipped_in_row'])
      .where('agent_id', '=', agentId)
      .orderBy('id')
      .execute();
    expect(runs.map((r) => r.skipped_in_row)).toEqual([0, 1, 2, 3, 0]);

    // A change to the agent's tasks wakes the next heartbeat at once.
    expect((await heartbeat(agentId)).outcome).toBe('skipped');
    await h.db.db
      .insertInto('tasks')
      .values({ id: `t-${randomUUID()}`, agent_id: agentId, title: 'New work', description: 'd', state: 'pending' })
      .execute();
    expect((await heartbeat(agentId)).outcome).toBe('ok');
    // `force` (a human asked for a check-in) skips the idle check.
    expect((await heartbeat(agentId, { force: true })).outcome).toBe('ok');
    expect(h.llm.requests).toHaveLength(4);
  });

  test('a failing LLM call is retried 3 times with exponential backoff from 3 s', async () => {
    const agentId = await h.createAgent();
    h.llm.enqueue(
      { kind: 'error', status: 503 },
      { kind: 'error', status: 503 },
      { kind: 'error', status: 503 },
      textTurn('HEARTBEAT_OK'),
    );
    const result = await heartbeat(agentId);
    expect(result.outcome).toBe('ok');
    expect(h.llm.requests).toHaveLength(4);
    const gaps = h.llm.requests.slice(1).map((r, i) => r.receivedAt - h.llm.requests[i]!.receivedAt);
    expect(gaps[0]).toBeGreaterThanOrEqual(2_900);
    expect(gaps[1]).toBeGreaterThanOrEqual(5_900);
    expect(gaps[2]).toBeGreaterThanOrEqual(11_900);
  }, 60_000);

  test('a run that fails (non-retryable provider error) is recorded, and the next heartbeat is not skipped as idle', async () => {
    const agentId = await h.createAgent();
    h.llm.setResponder(() => ({ kind: 'error', status: 400, message: 'bad request' }));
    await expect(heartbeat(agentId)).rejects.toThrow();
    const failed = await h.db.db
      .selectFrom('heartbeat_runs')
      .select(['outcome', 'fingerprint'])
      .where('agent_id', '=', agentId)
      .executeTakeFirstOrThrow();
    expect(failed).toEqual({ outcome: 'failed', fingerprint: '' });
    h.llm.setResponder(() => textTurn('HEARTBEAT_OK'));
    expect((await heartbeat(agentId)).outcome).toBe('ok');
  });

  test('stops after 30 tool iterations', async () => {
    const agentId = await h.createAgent();
    h.llm.setResponder(() => toolTurn('memory_search', { query: 'anything' }));
    const result = await heartbeat(agentId);
    expect(result).toMatchObject({ outcome: 'iteration-cap', toolIterations: HEARTBEAT_MAX_TOOL_ITERATIONS });
    expect(h.llm.requests).toHaveLength(HEARTBEAT_MAX_TOOL_ITERATIONS);
  }, 120_000);
});
