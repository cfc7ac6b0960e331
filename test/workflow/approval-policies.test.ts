import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { submitTurn, toolTurn } from '../support/harness';
import { eventually } from '../support/eventually';
import { lastToolResults, useScriptedHarness, updateRejection } from './task-support';
import { decideApprovalUpdate } from '../../workflows/contract';

/**
 * Approvals under a policy (issue 23), through the real task workflow: quorum of distinct approvers,
 * reminders and escalation, delegation, expiry as its own outcome, and the audit trail in PostgreSQL.
 * Policies use short times (seconds) instead of sleeps; every wait below is for a condition.
 */
const run = promisify(execFile);

describe('approval policies', () => {
  const { h, agents } = useScriptedHarness();

  const trail = async (requestId: string) =>
    (
      await h.db.db
        .selectFrom('approval_events')
        .select(['kind', 'actor', 'targets', 'comment'])
        .where('request_id', '=', requestId)
        .orderBy('id')
        .execute()
    ).map((e) => ({
      kind: e.kind,
      actor: e.actor,
      targets: e.targets,
      ...(e.comment ? { comment: e.comment } : {}),
    }));
  /** The `agents` CLI against this test's database and task queue. */
  const cli = async (...args: string[]) =>
    (
      await run(process.execPath, [require.resolve('tsx/cli'), 'client/cli.ts', ...args], {
        env: { ...process.env, DATABASE_URL: h.db.url, TEMPORAL_TASK_QUEUE: h.taskQueue, USER: 'alice' },
        timeout: 60_000,
      })
    ).stdout;
  const shellRuns = async (taskId: string) =>
    h.db.db
      .selectFrom('tool_calls')
      .select(['status', 'executions'])
      .where('task_id', '=', taskId)
      .where('tool', '=', 'shell_execute')
      .execute();

  test('a two-person policy: one approval leaves the call waiting, a second by the same person is refused, a second person runs it exactly once', async () => {
    const file = `two-person-${Date.now()}.txt`;
    const agentId = await h.createAgent({
      approvals: {
        groups: { release: ['alice', 'bob', 'carol'] },
        policies: [
          { name: 'production push', toolClass: 'shell', approvers: ['@release'], quorum: 2, expireAfterMs: 120_000 },
        ],
      },
    });
    const taskId = agents.task([toolTurn('shell_execute', { command: `touch ${file}` }), submitTurn('pushed')]);
    await h.client.startTask({ agentId, taskId, title: 'Push', description: 'needs two people' });
    const waiting = await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1);
    const [pending] = waiting.pendingApprovals;
    expect(pending!.wait).toMatchObject({
      policy: { name: `agent ${agentId} production push`, quorum: 2, approvers: ['alice', 'bob', 'carol'] },
      approvals: [],
    });
    const requestId = pending!.requestId;

    const first = await h.client.decideApproval(taskId, {
      requestId,
      decision: 'approved',
      decidedBy: 'alice',
      comment: 'looks right',
    });
    expect(first.waitingFor).toMatch(/^1 of 2 approvals; expires in \d+ min$/);
    expect((await h.client.getStatus(taskId)).pendingApprovals).toHaveLength(1);
    expect(existsSync(path.join(h.workspaceDir, file))).toBe(false);

    expect(
      await updateRejection(h.client.decideApproval(taskId, { requestId, decision: 'approved', decidedBy: 'alice' })),
    ).toMatch(/duplicate approver: alice already approved/);
    expect(
      await updateRejection(h.client.decideApproval(taskId, { requestId, decision: 'approved', decidedBy: 'mallory' })),
    ).toMatch(/mallory is not an allowed approver .*allowed now: alice, bob, carol/);
    expect(await updateRejection(h.client.decideApproval(taskId, { requestId, decision: 'approved' }))).toMatch(
      /must name its approver/,
    );
    // The signal is judged the same way: a repeated vote by signal does not count either.
    await h.client.signalApproval(taskId, { requestId, decision: 'approved', decidedBy: 'alice' });
    expect((await h.client.getStatus(taskId)).pendingApprovals).toHaveLength(1);

    const second = await h.client.decideApproval(taskId, {
      requestId,
      decision: 'approved',
      decidedBy: 'bob',
      comment: 'ship it',
    });
    expect(second.waitingFor).toBe('approved');
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(existsSync(path.join(h.workspaceDir, file))).toBe(true);
    expect(await shellRuns(taskId)).toEqual([{ status: 'completed', executions: 1 }]);
    const [result] = lastToolResults(agents.requests(taskId)[1]!);
    expect(result!.text).toContain('[Approved by alice and bob with comment: alice: looks right; bob: ship it]');
    expect(await trail(requestId)).toEqual([
      { kind: 'asked', actor: null, targets: ['alice', 'bob', 'carol'] },
      { kind: 'approved', actor: 'alice', targets: [], comment: 'looks right' },
      { kind: 'approved', actor: 'bob', targets: [], comment: 'ship it' },
    ]);
    expect(
      await h.db.db
        .selectFrom('approvals')
        .select(['status', 'decided_by'])
        .where('id', '=', requestId)
        .executeTakeFirst(),
    ).toEqual({ status: 'approved', decided_by: 'alice and bob' });
  });

  test('a reminder, then an escalation, then a decision by the escalation target, each in the trail and the notifications', async () => {
    const file = `escalated-${Date.now()}.txt`;
    const agentId = await h.createAgent({
      approvals: {
        groups: { oncall: ['olga'] },
        policies: [
          {
            tools: ['shell_execute'],
            approvers: ['alice'],
            remind: { afterMs: 800 },
            escalate: { afterMs: 10_000, to: ['@oncall'] },
            expireAfterMs: 120_000,
          },
        ],
      },
    });
    const taskId = agents.task([toolTurn('shell_execute', { command: `touch ${file}` }), submitTurn('done')]);
    await h.client.startTask({ agentId, taskId, title: 'Escalate', description: 'nobody answers at first' });
    const requestId = (await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1)).pendingApprovals[0]!
      .requestId;
    // Before the escalation olga may not decide.
    expect(
      await updateRejection(h.client.decideApproval(taskId, { requestId, decision: 'approved', decidedBy: 'olga' })),
    ).toMatch(/olga is not an allowed approver/);

    const escalated = await h.waitForStatus(taskId, (s) => s.pendingApprovals[0]?.wait?.escalated === true);
    expect(escalated.pendingApprovals[0]!.wait!.remindersSent).toBe(1);
    const recorded = await h.client.decideApproval(taskId, { requestId, decision: 'approved', decidedBy: 'olga' });
    expect(recorded.waitingFor).toBe('approved');
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(existsSync(path.join(h.workspaceDir, file))).toBe(true);
    expect(await trail(requestId)).toEqual([
      { kind: 'asked', actor: null, targets: ['alice'] },
      { kind: 'reminded', actor: null, targets: ['alice'] },
      { kind: 'escalated', actor: null, targets: ['olga'] },
      { kind: 'approved', actor: 'olga', targets: [] },
    ]);
    const notes = await h.db.db
      .selectFrom('notifications')
      .select(['title', 'body'])
      .where('task_id', '=', taskId)
      .where('kind', '=', 'approval_request')
      .orderBy('created_at')
      .execute();
    expect(notes.map((n) => n.title.split(':')[0])).toEqual(['Approval needed', 'Reminder', 'Escalated']);
    expect(notes[2]!.body).toMatch(/^Escalated: approval needed from olga: shell_execute: touch/);
  });

  test('delegation: the delegate decides, the one who handed it on no longer can, and the trail names both (client and CLI)', async () => {
    const file = `delegated-${Date.now()}.txt`;
    const agentId = await h.createAgent({
      approvals: { policies: [{ toolClass: 'any', approvers: ['alice'], expireAfterMs: 120_000 }] },
    });
    const taskId = agents.task([toolTurn('shell_execute', { command: `touch ${file}` }), submitTurn('done')]);
    await h.client.startTask({ agentId, taskId, title: 'Delegate', description: 'alice is away' });
    const requestId = (await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1)).pendingApprovals[0]!
      .requestId;

    expect(await updateRejection(h.client.delegateApproval(taskId, { requestId, from: 'mallory', to: 'eve' }))).toMatch(
      /mallory is not an allowed approver .* cannot hand it on/,
    );
    // Through the CLI, as alice ($USER).
    expect(
      await cli('approvals', 'delegate', taskId, requestId, '--to', 'dan', '--comment', 'dan knows this repo'),
    ).toMatch(/^handed by alice to dan at \S+: 0 of 1 approval; handed by alice to dan; expires in 2 min$/m);
    expect(await updateRejection(h.client.delegateApproval(taskId, { requestId, from: 'alice', to: 'erin' }))).toMatch(
      /alice is not an allowed approver/,
    );
    const queue = await cli('approvals', 'list', '--for', 'dan', '--agent', agentId);
    expect(queue).toContain(
      `${requestId}  task ${taskId} · shell_execute: touch ${file}\n  0 of 1 approval; handed by alice to dan; expires in 2 min · waiting on dan`,
    );
    expect(await cli('approvals', 'list', '--for', 'alice', '--agent', agentId)).toBe('nothing waits for alice\n');
    expect(
      await updateRejection(h.client.decideApproval(taskId, { requestId, decision: 'approved', decidedBy: 'alice' })),
    ).toMatch(/alice handed approval request .* to dan, who decides instead/);

    await h.client.decideApproval(taskId, { requestId, decision: 'approved', decidedBy: 'dan' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(existsSync(path.join(h.workspaceDir, file))).toBe(true);
    expect(await trail(requestId)).toEqual([
      { kind: 'asked', actor: null, targets: ['alice'] },
      { kind: 'delegated', actor: 'alice', targets: ['dan'], comment: 'dan knows this repo' },
      { kind: 'approved', actor: 'dan', targets: [] },
    ]);
    const trailText = (await cli('approvals', 'trail', requestId)).replace(/\d\d:\d\d:\d\d /g, '');
    expect(trailText).toBe(
      `${requestId} · shell_execute: touch ${file} · approved\n  asked → alice\n  delegated by alice → dan: dan knows this repo\n  approved by dan\n`,
    );
  });

  test('expiry is its own outcome: the model is told nobody decided in time, and the policy says what the task does next', async () => {
    const askAgainFile = `expired-ask-${Date.now()}.txt`;
    const blockFile = `expired-block-${Date.now()}.txt`;
    const EXPIRE_MS = 1_500;
    const asking = await h.createAgent({
      approvals: { policies: [{ toolClass: 'shell', approvers: ['alice'], expireAfterMs: EXPIRE_MS }] },
    });
    const blocking = await h.createAgent({
      approvals: {
        policies: [{ toolClass: 'shell', approvers: ['alice'], expireAfterMs: EXPIRE_MS, onExpiry: 'block' }],
      },
    });
    const askAgain = agents.task([
      toolTurn('shell_execute', { command: `touch ${askAgainFile}` }),
      submitTurn('nobody answered'),
    ]);
    const block = agents.task([
      toolTurn('shell_execute', { command: `touch ${blockFile}` }),
      submitTurn('after the block'),
    ]);
    await h.client.startTask({ agentId: asking, taskId: askAgain, title: 'Expire', description: 'nobody answers' });
    await h.client.startTask({
      agentId: blocking,
      taskId: block,
      title: 'Expire and block',
      description: 'nobody answers',
    });

    // ask-again: the next LLM call gets the expired outcome, worded as no decision (not a refusal).
    await h.waitForStatus(askAgain, (s) => s.state === 'review');
    const [told] = lastToolResults(agents.requests(askAgain)[1]!);
    expect(told!.isError).toBe(true);
    expect(told!.text).toMatch(
      /^Not run: nobody decided on the approval request for "shell_execute: touch .*" in time \(it expired after 2 s\)\. This is not a refusal\. You may call it again to ask again/,
    );
    expect(told!.text).not.toMatch(/rejected|refused by/);
    const askRow = await h.db.db
      .selectFrom('approvals')
      .select(['id', 'status'])
      .where('task_id', '=', askAgain)
      .executeTakeFirstOrThrow();
    expect(askRow.status).toBe('expired');
    expect((await trail(askRow.id)).map((e) => e.kind)).toEqual(['asked', 'expired']);

    // block: the task moves to blocked with the reason; a decision after expiry is refused in words.
    const blocked = await h.waitForStatus(block, (s) => s.state === 'blocked');
    const blockRow = await h.db.db
      .selectFrom('approvals')
      .select(['id', 'status'])
      .where('task_id', '=', block)
      .executeTakeFirstOrThrow();
    expect(blocked.lastError).toMatch(
      new RegExp(
        `approval request ${blockRow.id.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} for "shell_execute: touch .*" expired: nobody decided in time`,
      ),
    );
    expect(blockRow.status).toBe('expired');
    // The client answers as the API does (the row is expired); the workflow's validator says when it expired.
    await expect(
      h.client.decideApproval(block, { requestId: blockRow.id, decision: 'approved', decidedBy: 'alice' }),
    ).rejects.toThrow(`approval request ${blockRow.id} is already expired`);
    expect(
      await updateRejection(
        h.client.handle(block).executeUpdate(decideApprovalUpdate, {
          args: [{ requestId: blockRow.id, decision: 'approved', decidedBy: 'alice' }],
        }),
      ),
    ).toMatch(/expired at .*: nobody decided in time/);
    const ledger = await h.db.db
      .selectFrom('tool_calls')
      .select(['result', 'executions'])
      .where('task_id', '=', block)
      .where('tool', '=', 'shell_execute')
      .executeTakeFirstOrThrow();
    expect(ledger).toMatchObject({
      executions: 0,
      result: expect.stringContaining('The task is now blocked until a human resumes it.'),
    });
    expect(agents.requests(block)).toHaveLength(1);
    // Resumed, the model reads the expired outcome and goes on.
    await h.client.resume(block);
    await h.waitForStatus(block, (s) => s.state === 'review');
    expect(lastToolResults(agents.requests(block)[1]!)[0]!.text).toMatch(/nobody decided .* in time/);
    for (const file of [askAgainFile, blockFile]) expect(existsSync(path.join(h.workspaceDir, file))).toBe(false);
  });

  test('bad input gets a clear error: an unknown approver group, a quorum larger than the approvers who exist', async () => {
    await expect(
      h.createAgent({
        approvals: {
          groups: { release: ['alice'] },
          policies: [{ toolClass: 'shell', approvers: ['@ops'], expireAfterMs: 60_000 }],
        },
      }),
    ).rejects.toThrow(/config\.approvals\.policies\.0\.approvers: unknown approver group @ops; known groups: @release/);
    await expect(
      h.createAgent({
        approvals: {
          policies: [{ toolClass: 'shell', approvers: ['alice', 'bob'], quorum: 3, expireAfterMs: 60_000 }],
        },
      }),
    ).rejects.toThrow(
      /config\.approvals\.policies\.0\.quorum: quorum 3 is larger than the 2 approvers who exist \(alice, bob\)/,
    );
    await expect(
      h.createAgent({ approvals: { policies: [{ approvers: ['alice'], expireAfterMs: 60_000 }] } }),
    ).rejects.toThrow(/either `tools` or a `toolClass`/);
  });

  test("an organisation's APPROVALS.json applies to its agents, and reminders are posted to the policy's webhook", async () => {
    const hooks: Array<Record<string, unknown>> = [];
    const receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        hooks.push({ path: req.url, ...(JSON.parse(body) as Record<string, unknown>) });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    try {
      const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/approvals`;
      const name = `acme-${Date.now()}`;
      const folder = path.join(mkdtempSync(path.join(os.tmpdir(), 'org-')), name);
      mkdirSync(folder);
      writeFileSync(path.join(folder, 'CONTEXT.md'), 'Acme ships websites.');
      writeFileSync(
        path.join(folder, 'APPROVALS.json'),
        JSON.stringify({
          groups: { sre: ['sam'] },
          policies: [
            {
              toolClass: 'shell',
              approvers: ['@sre'],
              remind: { afterMs: 500, webhookUrl: hook },
              expireAfterMs: 120_000,
            },
          ],
        }),
      );
      await h.client.upsertOrganisationFromFolder(folder);
      const file = `org-policy-${Date.now()}.txt`;
      const agentId = await h.createAgent({ org: name });
      const taskId = agents.task([toolTurn('shell_execute', { command: `touch ${file}` }), submitTurn('done')]);
      await h.client.startTask({ agentId, taskId, title: 'Org policy', description: 'the organisation decides' });
      const [pending] = (await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1)).pendingApprovals;
      expect(pending!.wait!.policy).toMatchObject({
        name: `organisation ${name} class shell`,
        approvers: ['sam'],
        webhook: true,
      });
      // The webhook's URL may carry a secret: it stays in the configuration, out of the status and the history.
      expect(JSON.stringify(pending)).not.toContain(hook);
      const posted = await eventually(() => hooks.find((x) => x.event === 'approval.reminded'), 'the reminder webhook');
      expect(posted).toMatchObject({
        path: '/approvals',
        requestId: pending!.requestId,
        taskId,
        to: ['sam'],
        summary: `shell_execute: touch ${file}`,
        waitingFor: expect.stringMatching(/^0 of 1 approval; expires in/),
      });
      await h.client.decideApproval(taskId, { requestId: pending!.requestId, decision: 'approved', decidedBy: 'sam' });
      await h.waitForStatus(taskId, (s) => s.state === 'review');
      expect(existsSync(path.join(h.workspaceDir, file))).toBe(true);
      expect(hooks.filter((x) => x.event === 'approval.reminded')).toHaveLength(1);
      const history = await h.temporal.workflow.getHandle(`task-${taskId}-r1`).fetchHistory();
      expect(
        JSON.stringify(history, (_key, value: unknown) =>
          value instanceof Uint8Array ? Buffer.from(value).toString('utf8') : value,
        ),
      ).not.toContain(hook);

      // A bad APPROVALS.json is refused with its problem, and the organisation keeps its policies.
      writeFileSync(
        path.join(folder, 'APPROVALS.json'),
        JSON.stringify({ policies: [{ toolClass: 'shell', approvers: ['@ops'], expireAfterMs: 1_000 }] }),
      );
      await expect(h.client.upsertOrganisationFromFolder(folder)).rejects.toThrow(
        /approvals\.policies\.0\.approvers: unknown approver group @ops/,
      );
      const kept = await h.db.db
        .selectFrom('organisations')
        .select('approvals')
        .where('name', '=', name)
        .executeTakeFirstOrThrow();
      expect(kept.approvals).toMatchObject({ groups: { sre: ['sam'] } });
    } finally {
      receiver.close();
    }
  });

  test('without a policy the request waits as before: the old signal decides it', async () => {
    const file = `no-policy-${Date.now()}.txt`;
    const agentId = await h.createAgent();
    const taskId = agents.task([toolTurn('shell_execute', { command: `touch ${file}` }), submitTurn('done')]);
    await h.client.startTask({ agentId, taskId, title: 'Plain', description: 'no policy' });
    const [pending] = (await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1)).pendingApprovals;
    expect(pending!.wait).toBeUndefined();
    await h.client.signalApproval(taskId, { requestId: pending!.requestId, decision: 'approved', decidedBy: 'anyone' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(existsSync(path.join(h.workspaceDir, file))).toBe(true);
    await eventually(
      async () =>
        (await h.db.db.selectFrom('approvals').select('status').where('id', '=', pending!.requestId).executeTakeFirst())
          ?.status === 'approved',
      'the approval row',
    );
  });
});
