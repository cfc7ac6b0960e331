import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ForkClient, ForkError } from '../../client/forks';
import { ForkOfSearchAttribute, taskWorkflowId } from '../../workflows/contract';
import { GIT_ENV, git, snapshot } from '../support/canaries';
import { createHarness, submitTurn, toolTurn, type Harness } from '../support/harness';
import { lastToolResults, ScriptedAgents } from './task-support';

/**
 * Forks of a recorded task (issue 25), all real: Temporal, PostgreSQL, git and the sandbox, with the
 * scripted fake model. The source task writes a file, commits it and reads a status file; forks take
 * it from a step with another tool result, replay it unchanged, or try to push.
 */
describe('fork a recorded task at a step', () => {
  let h: Harness;
  let agents: ScriptedAgents;
  let forks: ForkClient;
  let outside: string;
  let remote: string;
  let forkRoot: string;
  let agentId: string;
  let sourceTaskId: string;
  const previousRoot = process.env.AGENTS_FORK_WORKSPACE_ROOT;

  /** The source's script: one step each, so step n of the source is its n-th LLM turn. */
  const sourceScript = () => [
    toolTurn('file_write', { path: 'notes.md', content: 'draft\n' }),
    toolTurn('shell_execute', { command: 'git add notes.md && git commit -q -m notes' }),
    toolTurn('file_read', { path: 'status.txt' }),
    submitTurn('status is green: notes committed'),
  ];

  beforeAll(async () => {
    forkRoot = mkdtempSync(path.join(os.tmpdir(), 'da-forks-'));
    process.env.AGENTS_FORK_WORKSPACE_ROOT = forkRoot;
    h = await createHarness();
    agents = new ScriptedAgents(h.llm);
    forks = new ForkClient(h.temporal, h.db.db, { taskQueue: h.taskQueue });
    await h.startWorker();
    outside = mkdtempSync(path.join(os.tmpdir(), 'da-fork-remote-'));
    remote = path.join(outside, 'remote.git');
    execFileSync('git', ['init', '-q', '--bare', '-b', 'main', remote], { env: GIT_ENV });
    git(h.workspaceDir, 'init', '-q', '-b', 'main');
    writeFileSync(path.join(h.workspaceDir, 'status.txt'), 'status: green\n');
    git(h.workspaceDir, 'add', 'status.txt');
    git(h.workspaceDir, 'commit', '-q', '-m', 'first');
    git(h.workspaceDir, 'remote', 'add', 'origin', remote);
    git(h.workspaceDir, 'push', '-q', 'origin', 'main');

    agentId = await h.createAgent();
    sourceTaskId = agents.task(sourceScript());
    await h.client.startTask({
      agentId,
      taskId: sourceTaskId,
      title: 'Write the notes',
      description: 'write notes.md, commit it, check status.txt',
    });
    await h.waitForStatus(sourceTaskId, (s) => s.state === 'review');
    expect(readFileSync(path.join(h.workspaceDir, 'notes.md'), 'utf8')).toBe('draft\n');
  });
  afterAll(async () => {
    await h.close();
    rmSync(outside, { recursive: true, force: true });
    rmSync(forkRoot, { recursive: true, force: true });
    if (previousRoot === undefined) delete process.env.AGENTS_FORK_WORKSPACE_ROOT;
    else process.env.AGENTS_FORK_WORKSPACE_ROOT = previousRoot;
  });

  const world = () => ({ workspace: snapshot(h.workspaceDir), remote: snapshot(remote) });

  test('a fork at step 3 with an edited tool result takes another path; the source workspace and its remote stay byte-identical', async () => {
    const before = world();
    const forkId = agents.task(({ text }) =>
      text.includes('status: red') && !text.includes('fix.md')
        ? toolTurn('file_write', { path: 'fix.md', content: 'status was red\n' })
        : submitTurn('status is red: wrote fix.md'),
    );
    const started = await forks.forkTask(sourceTaskId, {
      at: 3,
      taskId: forkId,
      overrides: { toolResult: { content: 'status: red\n' } },
    });
    expect(started).toMatchObject({ steps: 4, copiedToolCalls: 3, incompleteCalls: [] });
    expect(started.workspaceNote).toMatch(/git clone of the source workspace at [0-9a-f]{12}/);
    const status = await h.waitForStatus(forkId, (s) => s.state === 'review');
    expect(status.submission).toBe('status is red: wrote fix.md');

    // The model saw the edited result, never the recorded one, and went another way.
    const first = agents.requests(forkId)[0]!;
    expect(lastToolResults(first)[0]!.text).toBe('status: red\n');
    expect(JSON.stringify(first.body)).not.toContain('status: green');
    expect(readFileSync(path.join(started.workspaceDir, 'fix.md'), 'utf8')).toBe('status was red\n');
    const report = await forks.forkReport(forkId);
    expect(report.calls.map((c) => [c.position, c.tool, c.outcome])).toEqual([[3, 'file_write', 'executed']]);

    expect(existsSync(path.join(h.workspaceDir, 'fix.md'))).toBe(false);
    expect(world()).toEqual(before);
    // The Temporal UI links the fork to its source.
    const described = await h.temporal.workflow.getHandle(taskWorkflowId(forkId)).describe();
    expect(described.typedSearchAttributes.get(ForkOfSearchAttribute)).toBe(sourceTaskId);
  });

  test("a fork with an unchanged configuration replays every call and reproduces the source's effects in its own workspace", async () => {
    const before = world();
    const forkId = agents.task(sourceScript());
    const started = await forks.forkTask(sourceTaskId, { at: 0, taskId: forkId });
    expect(started.copiedToolCalls).toBe(0);
    await h.waitForStatus(forkId, (s) => s.state === 'review');

    const report = await forks.forkReport(forkId);
    expect(report.calls.map((c) => [c.tool, c.outcome])).toEqual([
      ['file_write', 'replayed'],
      ['shell_execute', 'replayed'],
      ['file_read', 'replayed'],
    ]);
    expect(report.counts).toEqual({ replayed: 3, executed: 0, refused: 0 });
    expect(report.calls[0]!.note).toMatch(/workspace effect reproduced/);
    // The recorded results are what the model read.
    const requests = agents.requests(forkId);
    expect(lastToolResults(requests[3]!)[0]!.text).toBe('status: green\n');
    // The fork's own workspace has the file the source wrote, committed, as the source's has.
    expect(readFileSync(path.join(started.workspaceDir, 'notes.md'), 'utf8')).toBe('draft\n');
    expect(git(started.workspaceDir, 'log', '-1', '--format=%s')).toBe('notes');
    expect(git(started.workspaceDir, 'status', '--porcelain')).toBe('');
    // The fork's own submission ran for the fork's task; the source is untouched.
    expect(
      await h.db.db
        .selectFrom('tool_calls')
        .select('tool')
        .where('task_id', '=', forkId)
        .where('tool', '=', 'task_submit_review')
        .execute(),
    ).toHaveLength(1);
    expect(world()).toEqual(before);
  });

  test('a fork whose model pushes to origin is answered "not run in a fork", and origin is unchanged', async () => {
    const remoteMain = git(remote, 'rev-parse', 'main');
    const before = world();
    const forkId = agents.task([
      toolTurn('shell_execute', { command: 'git push origin main' }),
      submitTurn('tried to publish'),
    ]);
    const started = await forks.forkTask(sourceTaskId, { at: 2, taskId: forkId });
    await h.waitForStatus(forkId, (s) => s.state === 'review');

    const [pushed] = lastToolResults(agents.requests(forkId)[1]!);
    expect(pushed!.isError).toBe(true);
    expect(pushed!.text).toMatch(/^Not run in a fork: git push changes a remote repository/);
    expect(git(remote, 'rev-parse', 'main')).toBe(remoteMain);
    expect(world()).toEqual(before);
    const report = await forks.forkReport(forkId);
    expect(report.calls.map((c) => [c.tool, c.outcome])).toEqual([['shell_execute', 'refused']]);
    // The fork's clone knows origin by the source's URL, and its commit was never published.
    expect(git(started.workspaceDir, 'remote', 'get-url', 'origin')).toBe(remote);
  });

  test('a fork of a task whose records are incomplete says so, and the interrupted call is not replayed', async () => {
    const taskId = agents.task([toolTurn('file_write', { path: 'half.md', content: 'x' }), submitTurn('done')]);
    await h.client.startTask({ agentId, taskId, title: 'Half', description: 'write half.md' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    // As a worker that died mid-call leaves it: the ledger row says started, with no result.
    await h.db.db
      .updateTable('tool_calls')
      .set({ status: 'started', result: null })
      .where('task_id', '=', taskId)
      .where('tool', '=', 'file_write')
      .execute();

    const forkId = agents.task([toolTurn('file_write', { path: 'half.md', content: 'x' }), submitTurn('done again')]);
    const started = await forks.forkTask(taskId, { at: 0, taskId: forkId });
    expect(started.incompleteCalls).toEqual([{ position: 0, tool: 'file_write', toolCallId: expect.any(String) }]);
    await h.waitForStatus(forkId, (s) => s.state === 'review');
    const report = await forks.forkReport(forkId);
    expect(report.incompleteCalls).toHaveLength(1);
    expect(report.calls).toEqual([
      expect.objectContaining({
        tool: 'file_write',
        outcome: 'executed',
        note: expect.stringMatching(/was interrupted: its outcome is unknown/),
      }),
    ]);
  });

  test('bad input gets a clear error and nothing is written: an unknown task, a step past the end, a tool result at step 0', async () => {
    const count = async () =>
      Number(
        (
          await h.db.db
            .selectFrom('task_forks')
            .select((eb) => eb.fn.countAll<string>().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const forksBefore = await count();
    await expect(forks.forkTask('no-such-task', { at: 0 })).rejects.toThrow(
      new ForkError('unknown task "no-such-task": there is nothing recorded to fork'),
    );
    await expect(forks.forkTask(sourceTaskId, { at: 9 })).rejects.toThrow(
      /step 9 is past the end of round 1 of task .*: it has 4 step\(s\), so --at takes 0 to 4/,
    );
    await expect(forks.forkTask(sourceTaskId, { at: 0, overrides: { toolResult: { content: 'x' } } })).rejects.toThrow(
      /only at a step that called tools/,
    );
    await expect(
      forks.forkTask(sourceTaskId, { at: 1, overrides: { model: 'm', colour: 'red' } as never }),
    ).rejects.toThrow(/invalid fork: .*colour/s);
    await expect(forks.forkTask(sourceTaskId, { at: -1 })).rejects.toThrow(/invalid fork/);
    expect(await count()).toBe(forksBefore);
  });
});
