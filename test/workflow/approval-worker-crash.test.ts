import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { RecordedRequest, ScriptedResponse } from '../fake-llm';
import { createHarness, type Harness } from '../support/harness';
import { eventually } from '../support/eventually';
import { activitySummaries } from './task-support';

/** Asks once to run a risky command, then submits once it has a tool result. */
function scriptedAgent(request: RecordedRequest): ScriptedResponse {
  const body = JSON.stringify(request.body);
  if (!Array.isArray(request.body.tools) || (request.body.tools as unknown[]).length === 0)
    return { kind: 'message', content: [{ type: 'text', text: 'Summary.' }], stopReason: 'end_turn' };
  const taskId = /Task ID: ([0-9a-f-]{36})/.exec(body)?.[1] ?? 'unknown';
  const input = body.includes('"tool_result"')
    ? { name: 'task_submit_review', input: { summary: 'pushed after two approvals' } }
    : { name: 'shell_execute', input: { command: `touch crash-${taskId}.txt` } };
  return {
    kind: 'message',
    content: [{ type: 'tool_use', ...input }],
    stopReason: 'tool_use',
    usage: { inputTokens: 100, outputTokens: 20 },
  };
}

/**
 * A worker SIGKILLed while a request waits under a policy: the vote already cast, the reminder timer
 * (which fires while no worker runs) and the trail survive in the workflow and PostgreSQL, and a new
 * worker asks nobody twice.
 */
describe('an approval wait survives a worker killed with SIGKILL', () => {
  let h: Harness;
  const workers: ChildProcess[] = [];
  beforeAll(async () => {
    h = await createHarness();
    h.llm.setResponder(scriptedAgent);
  });
  afterAll(async () => {
    for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
    await h.close();
  });

  async function startWorkerProcess(): Promise<ChildProcess> {
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/worker-process.ts'], {
      env: { ...process.env, TEST_TASK_QUEUE: h.taskQueue, FAKE_LLM_URL: h.llm.url },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    workers.push(child);
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on('data', (chunk: Buffer) => chunk.toString().includes('worker-ready') && resolve());
      child.once('exit', (code) => reject(new Error(`worker exited early with ${code}`)));
    });
    return child;
  }

  test('decisions so far, timers and the trail survive; nothing is asked twice', async () => {
    // Long enough that the vote and the kill come before it on a loaded machine: the timer must fire with no worker.
    const REMIND_AFTER_MS = 10_000;
    let worker = await startWorkerProcess();
    const agentId = await h.createAgent({
      approvals: {
        policies: [
          {
            toolClass: 'shell',
            approvers: ['alice', 'bob'],
            quorum: 2,
            remind: { afterMs: REMIND_AFTER_MS },
            expireAfterMs: 300_000,
          },
        ],
      },
    });
    const { taskId } = await h.client.startTask({ agentId, title: 'Two approvals', description: 'push' });
    const requestId = (await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1)).pendingApprovals[0]!
      .requestId;
    expect(
      (await h.client.decideApproval(taskId, { requestId, decision: 'approved', decidedBy: 'alice' })).waitingFor,
    ).toMatch(/^1 of 2 approvals/);

    // Kill once the round, having counted the vote, is waiting on its reminder timer again.
    const round = h.temporal.workflow.getHandle(`task-${taskId}-r1`);
    const timerEvents = async () =>
      ((await round.fetchHistory()).events ?? []).filter(
        (e) => e.timerStartedEventAttributes || e.timerCanceledEventAttributes || e.timerFiredEventAttributes,
      );
    await eventually(async () => {
      const events = await timerEvents();
      return (
        events.length >= 3 &&
        events.at(-1)!.timerStartedEventAttributes !== undefined &&
        events.at(-1)!.timerStartedEventAttributes !== null
      );
    }, 'the round to wait on its timer after the first vote');
    expect((await h.client.getStatus(taskId)).pendingApprovals[0]!.wait!.remindersSent).toBe(0);
    const exited = new Promise((r) => worker.once('exit', r));
    worker.kill('SIGKILL');
    await exited;
    // The reminder's timer fires on the server while no worker runs.
    await eventually(
      async () => (await timerEvents()).some((e) => e.timerFiredEventAttributes),
      'the reminder timer to fire without a worker',
      30_000,
    );

    worker = await startWorkerProcess();
    const reminded = await h.waitForStatus(
      taskId,
      (s) => (s.pendingApprovals[0]?.wait?.remindersSent ?? 0) === 1,
      60_000,
    );
    // Only bob is reminded: alice's vote survived the crash.
    expect(reminded.pendingApprovals[0]!.wait!.approvals.map((v) => v.by)).toEqual(['alice']);
    expect(
      await h.db.db
        .selectFrom('approval_events')
        .select(['kind', 'targets'])
        .where('request_id', '=', requestId)
        .where('kind', '=', 'reminded')
        .execute(),
    ).toEqual([{ kind: 'reminded', targets: ['bob'] }]);

    await h.client.decideApproval(taskId, { requestId, decision: 'approved', decidedBy: 'bob' });
    await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);
    expect(existsSync(path.join(h.workspaceDir, `crash-${taskId}.txt`))).toBe(true);
    const events = await h.db.db
      .selectFrom('approval_events')
      .select(['kind', 'actor', 'targets'])
      .where('request_id', '=', requestId)
      .orderBy('id')
      .execute();
    expect(events).toEqual([
      { kind: 'asked', actor: null, targets: ['alice', 'bob'] },
      { kind: 'approved', actor: 'alice', targets: [] },
      { kind: 'reminded', actor: null, targets: ['bob'] },
      { kind: 'approved', actor: 'bob', targets: [] },
    ]);
    // One request, one notification per event, one run of the command, one LLM call before the decision.
    const roundSummaries = activitySummaries((await round.fetchHistory()).events ?? []);
    expect(roundSummaries.filter((s) => s.startsWith('approval requested:'))).toHaveLength(1);
    expect(roundSummaries.filter((s) => s.startsWith('approval reminder'))).toEqual(['approval reminder 1 to bob']);
    const notes = await h.db.db
      .selectFrom('notifications')
      .select('title')
      .where('task_id', '=', taskId)
      .where('kind', '=', 'approval_request')
      .execute();
    expect(notes.map((n) => n.title.split(':')[0]).sort()).toEqual(['Approval needed', 'Reminder']);
    const ran = await h.db.db
      .selectFrom('tool_calls')
      .select(['status', 'executions'])
      .where('task_id', '=', taskId)
      .where('tool', '=', 'shell_execute')
      .execute();
    expect(ran).toEqual([{ status: 'completed', executions: 1 }]);
  }, 180_000);
});
