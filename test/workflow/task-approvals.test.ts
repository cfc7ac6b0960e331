import { existsSync } from 'node:fs';
import path from 'node:path';
import { submitTurn, toolTurn } from '../support/harness';
import { lastToolResults, useScriptedHarness, updateRejection } from './task-support';
import { decideApprovalUpdate } from '../../workflows/contract';

/**
 * Human-in-the-loop approvals through the workflow: a risky tool call records an approval request,
 * shows it in the `status` query and waits for the `approvalDecision` signal or the validated
 * `decideApproval` update; the model gets the outcome (with the approver's words) as the tool result.
 */
describe('approvals', () => {
  const { h, agents } = useScriptedHarness();

  const approvalRow = (id: string) =>
    h.db.db.selectFrom('approvals').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

  test("granted by the approvalDecision signal: the command runs once and the approver's comment reaches the model", async () => {
    const file = `approved-by-signal-${Date.now()}.txt`;
    const agentId = await h.createAgent();
    const taskId = agents.task([
      toolTurn('shell_execute', { command: `touch ${file}` }),
      submitTurn('created the file'),
    ]);
    await h.client.startTask({ agentId, taskId, title: 'Touch', description: 'create a file' });

    const waiting = await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1);
    expect(waiting.phase).toBe('awaiting-approval');
    const [pending] = waiting.pendingApprovals;
    expect(pending).toMatchObject({ tool: 'shell_execute', summary: `shell_execute: touch ${file}` });
    expect(Date.parse(pending!.requestedAt)).not.toBeNaN();
    expect(existsSync(path.join(h.workspaceDir, file))).toBe(false);
    expect(await approvalRow(pending!.requestId)).toMatchObject({
      status: 'pending',
      tool: 'shell_execute',
      args: { command: `touch ${file}` },
      task_id: taskId,
    });

    // Not yet a decision: malformed or unknown ones are ignored.
    await h.client.signalApproval(taskId, { requestId: 'no-such-request', decision: 'approved' });
    await h.client.signalApproval(taskId, { requestId: pending!.requestId, decision: 'maybe' as 'approved' });
    await new Promise((r) => setTimeout(r, 300));
    expect((await h.client.getStatus(taskId)).pendingApprovals).toHaveLength(1);

    await h.client.signalApproval(taskId, {
      requestId: pending!.requestId,
      decision: 'approved',
      comment: 'Go ahead, keep it small',
      decidedBy: 'alice',
    });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(existsSync(path.join(h.workspaceDir, file))).toBe(true);

    const [result] = lastToolResults(agents.requests(taskId)[1]!);
    expect(result!.isError).toBe(false);
    expect(result!.text).toContain(`$ touch ${file}`);
    expect(result!.text).toContain('[Approved by alice with comment: Go ahead, keep it small]');
    const row = await approvalRow(pending!.requestId);
    expect(row).toMatchObject({ status: 'approved', decided_by: 'alice', comment: 'Go ahead, keep it small' });
    expect(row.decided_at!.getTime()).toBeGreaterThanOrEqual(row.requested_at.getTime());
    const ledger = await h.db.db
      .selectFrom('tool_calls')
      .select(['tool', 'status', 'executions'])
      .where('task_id', '=', taskId)
      .where('tool', '=', 'shell_execute')
      .execute();
    expect(ledger).toEqual([{ tool: 'shell_execute', status: 'completed', executions: 1 }]);
    const events = (await h.client.events(taskId)).map((e) => e.type);
    expect(events).toEqual(expect.arrayContaining(['approval-requested', 'approval-decided']));
  });

  test("an approver's comment and name with a NUL are stored escaped, and the task goes on", async () => {
    const file = `approved-with-nul-${Date.now()}.txt`;
    const agentId = await h.createAgent();
    const taskId = agents.task([
      toolTurn('shell_execute', { command: `touch ${file}` }),
      submitTurn('created the file'),
    ]);
    await h.client.startTask({ agentId, taskId, title: 'Touch', description: 'create a file' });
    const [pending] = (await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1)).pendingApprovals;
    await h.client.signalApproval(taskId, {
      requestId: pending!.requestId,
      decision: 'approved',
      comment: 'ok\u0000go',
      decidedBy: 'al\u0000ice',
    });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(existsSync(path.join(h.workspaceDir, file))).toBe(true);
    expect(await approvalRow(pending!.requestId)).toMatchObject({
      status: 'approved',
      decided_by: 'al\\0ice',
      comment: 'ok\\0go',
    });
    expect(lastToolResults(agents.requests(taskId)[1]!)[0]!.text).toContain('with comment: ok\\0go]');
    const decided = (await h.client.events(taskId)).find((e) => e.type === 'approval-decided');
    expect(decided!.data).toMatchObject({ comment: 'ok\\0go' });
  });

  test('granted by the decideApproval update, whose validator refuses unknown and already-decided requests (request_user_approval with options)', async () => {
    const agentId = await h.createAgent();
    const taskId = agents.task([
      toolTurn('request_user_approval', {
        question: 'Which database should I use?',
        options: ['PostgreSQL', 'SQLite'],
      }),
      toolTurn('notify_user', { message: 'Going with the database you chose', level: 'info' }),
      submitTurn('asked and chose'),
    ]);
    await h.client.startTask({ agentId, taskId, title: 'Ask', description: 'ask the human' });
    const waiting = await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1);
    const requestId = waiting.pendingApprovals[0]!.requestId;
    expect(waiting.pendingApprovals[0]!.summary).toBe(
      'request_user_approval: Which database should I use? [PostgreSQL / SQLite]',
    );

    // The client refuses an unknown request as the API does; the workflow's validator refuses it too.
    await expect(
      h.client.decideApproval(taskId, { requestId: 'no-such-request', decision: 'approved' }),
    ).rejects.toThrow('no approval request "no-such-request"');
    expect(
      await updateRejection(
        h.client
          .handle(taskId)
          .executeUpdate(decideApprovalUpdate, { args: [{ requestId: 'no-such-request', decision: 'approved' }] }),
      ),
    ).toMatch(
      new RegExp(
        `no pending approval request no-such-request; pending: ${requestId.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`,
      ),
    );
    expect(
      await updateRejection(h.client.decideApproval(taskId, { requestId, decision: 'perhaps' as 'approved' })),
    ).toMatch(/must be 'approved' or 'rejected'/);

    const recorded = await h.client.decideApproval(taskId, {
      requestId,
      decision: 'approved',
      comment: 'PostgreSQL, one schema per tenant',
      decidedBy: 'bob',
    });
    expect(recorded).toMatchObject({
      requestId,
      decision: 'approved',
      tool: 'request_user_approval',
      decidedBy: 'bob',
      comment: 'PostgreSQL, one schema per tenant',
    });
    expect(Date.parse(recorded.decidedAt)).not.toBeNaN();
    // Decided already: the API's words ("already approved") from the row, whatever check sees it first.
    expect(await updateRejection(h.client.decideApproval(taskId, { requestId, decision: 'rejected' }))).toMatch(
      /already decided|is already approved/,
    );

    await h.waitForStatus(taskId, (s) => s.state === 'review');
    const [answer] = lastToolResults(agents.requests(taskId)[1]!);
    expect(answer).toEqual({
      text: 'The human approved. Their answer: PostgreSQL, one schema per tenant',
      isError: false,
    });
    expect(await approvalRow(requestId)).toMatchObject({
      status: 'approved',
      decided_by: 'bob',
      comment: 'PostgreSQL, one schema per tenant',
    });
    const notified = (await h.client.events(taskId)).filter((e) => e.type === 'user-notified');
    expect(notified.map((e) => e.data)).toEqual([
      { message: 'Going with the database you chose', level: 'info', notificationId: expect.stringMatching(/^ntf_/) },
    ]);
  });

  test('a rejection and a timeout both reach the model as error results, and the command never runs', async () => {
    const rejectedFile = `rejected-${Date.now()}.txt`;
    const timedOutFile = `timed-out-${Date.now()}.txt`;
    const agentId = await h.createAgent();
    const rejecting = agents.task([
      toolTurn('shell_execute', { command: `touch ${rejectedFile}` }),
      submitTurn('could not'),
    ]);
    const APPROVAL_TIMEOUT_MS = 1_500;
    const timingOut = agents.task([
      toolTurn('shell_execute', { command: `touch ${timedOutFile}` }),
      submitTurn('nobody answered'),
    ]);
    await h.client.startTask({ agentId, taskId: rejecting, title: 'Rejected', description: 'will be rejected' });
    const started = Date.now();
    await h.client.startTask({
      agentId,
      taskId: timingOut,
      title: 'Timeout',
      description: 'nobody answers',
      approvalTimeoutMs: APPROVAL_TIMEOUT_MS,
    });

    const waiting = await h.waitForStatus(rejecting, (s) => s.pendingApprovals.length === 1);
    await h.client.decideApproval(rejecting, {
      requestId: waiting.pendingApprovals[0]!.requestId,
      decision: 'rejected',
      comment: 'Not in this repository',
      decidedBy: 'carol',
    });
    await h.waitForStatus(rejecting, (s) => s.state === 'review');
    const [rejected] = lastToolResults(agents.requests(rejecting)[1]!);
    expect(rejected).toEqual({
      isError: true,
      text: `Not run: the approval request for "shell_execute: touch ${rejectedFile}" was rejected by carol. Reason: Not in this repository`,
    });
    expect(await approvalRow(waiting.pendingApprovals[0]!.requestId)).toMatchObject({
      status: 'rejected',
      decided_by: 'carol',
      comment: 'Not in this repository',
    });

    await h.waitForStatus(timingOut, (s) => s.state === 'review');
    expect(Date.now() - started).toBeGreaterThanOrEqual(APPROVAL_TIMEOUT_MS);
    const [timedOut] = lastToolResults(agents.requests(timingOut)[1]!);
    expect(timedOut!.isError).toBe(true);
    expect(timedOut!.text).toMatch(/timed out without a decision/);
    const timedOutRow = await h.db.db
      .selectFrom('approvals')
      .selectAll()
      .where('task_id', '=', timingOut)
      .executeTakeFirstOrThrow();
    expect(timedOutRow).toMatchObject({ status: 'timed_out', decided_by: null });

    for (const file of [rejectedFile, timedOutFile]) expect(existsSync(path.join(h.workspaceDir, file))).toBe(false);
    const ran = await h.db.db
      .selectFrom('tool_calls')
      .select(['executions', 'status'])
      .where('task_id', 'in', [rejecting, timingOut])
      .where('tool', '=', 'shell_execute')
      .execute();
    expect(ran).toEqual([
      { executions: 0, status: 'failed' },
      { executions: 0, status: 'failed' },
    ]);
  });

  test('a declined question (request_user_approval) is an answer for the model, not an error', async () => {
    const agentId = await h.createAgent();
    const taskId = agents.task([
      toolTurn('request_user_approval', { question: 'May I drop the legacy table?', allow_freeform: true }),
      submitTurn('kept the table'),
    ]);
    await h.client.startTask({ agentId, taskId, title: 'Ask to drop', description: 'ask first' });
    const waiting = await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1);
    expect(waiting.pendingApprovals[0]!.summary).toBe(
      'request_user_approval: May I drop the legacy table? (free-form answer welcome)',
    );
    await h.client.decideApproval(taskId, {
      requestId: waiting.pendingApprovals[0]!.requestId,
      decision: 'rejected',
      comment: 'No, archive it instead',
      decidedBy: 'erin',
    });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(lastToolResults(agents.requests(taskId)[1]!)).toEqual([
      { text: 'erin declined. Their answer: No, archive it instead', isError: false },
    ]);
    expect(await approvalRow(waiting.pendingApprovals[0]!.requestId)).toMatchObject({
      status: 'rejected',
      decided_by: 'erin',
    });
  });
});
