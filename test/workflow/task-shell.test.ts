import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { roundWorkflowId } from '../../workflows/contract';
import { submitTurn, toolTurn, useHarness } from '../support/harness';
import { historiesOfAllRuns, toolCallSummaries, lastToolResults, ScriptedAgents } from './task-support';
import { eventually } from '../support/eventually';

const GIT_ENV = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  HOME: os.tmpdir(),
};
const git = (cwd: string, ...args: string[]): string =>
  execFileSync('git', ['-c', 'user.name=Test', '-c', 'user.email=test@example.com', ...args], {
    cwd,
    env: GIT_ENV,
    encoding: 'utf8',
  }).trim();

/**
 * `shell_execute` driven by the model through the workflow, against a real git repository in the
 * agent's workspace: destructive commands are denied and never run, hostile strings never run without
 * an approval, repository config cannot make "read-only" git run code, and cancelling the task stops a
 * running command.
 */
describe('shell_execute through the task workflow', () => {
  const h = useHarness({ worker: true });
  let agents: ScriptedAgents;
  let remote: string;
  let outside: string;

  beforeAll(async () => {
    agents = new ScriptedAgents(h.llm);
    outside = mkdtempSync(path.join(os.tmpdir(), 'da-shell-outside-'));
    remote = path.join(outside, 'remote.git');
    execFileSync('git', ['init', '-q', '--bare', '-b', 'main', remote], { env: GIT_ENV });
    git(h.workspaceDir, 'init', '-q', '-b', 'main');
    git(h.workspaceDir, 'commit', '-q', '--allow-empty', '-m', 'first');
    git(h.workspaceDir, 'remote', 'add', 'origin', remote);
    git(h.workspaceDir, 'push', '-q', 'origin', 'main');
  });
  afterAll(() => rmSync(outside, { recursive: true, force: true }));

  const remoteMain = () => git(remote, 'rev-parse', 'main');

  test('force pushes are denied without asking anyone and never reach the remote; git status runs, summarised for the UI', async () => {
    // History rewritten locally: only a force push could move the remote now.
    const published = remoteMain();
    git(h.workspaceDir, 'commit', '-q', '--amend', '--allow-empty', '-m', 'rewritten');
    const rewritten = git(h.workspaceDir, 'rev-parse', 'main');
    expect(rewritten).not.toBe(published);

    const attempts = [
      'git push --force origin main',
      'git push -f origin main',
      'git push origin +main',
      ['git', 'push', '--force-with-lease', 'origin', 'main'],
      'git push --mirror origin',
    ];
    const agentId = await h.createAgent();
    const taskId = agents.task([
      toolTurn('shell_execute', { command: 'git status' }),
      ...attempts.map((command) => toolTurn('shell_execute', { command })),
      submitTurn('could not push'),
    ]);
    await h.client.startTask({ agentId, taskId, title: 'Publish', description: 'push the rewritten history' });
    const status = await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(status.pendingApprovals).toEqual([]);

    const requests = agents.requests(taskId);
    const [gitStatus] = lastToolResults(requests[1]!);
    expect(gitStatus!.isError).toBe(false);
    expect(gitStatus!.text).toMatch(/\$ git status[\s\S]*On branch main/);
    for (let i = 0; i < attempts.length; i++) {
      const [result] = lastToolResults(requests[i + 2]!);
      expect(result!.isError).toBe(true);
      expect(result!.text).toMatch(/^Denied by policy: .*force|^Denied by policy: .*mirror/i);
    }
    expect(remoteMain()).toBe(published);
    expect(git(h.workspaceDir, 'rev-parse', 'main')).toBe(rewritten);
    const ledger = await h.db.db
      .selectFrom('tool_calls')
      .select(['executions', 'status'])
      .where('task_id', '=', taskId)
      .where('tool', '=', 'shell_execute')
      .execute();
    expect(ledger.filter((l) => l.executions === 0)).toHaveLength(attempts.length);
    const approvals = await h.db.db.selectFrom('approvals').select('id').where('task_id', '=', taskId).execute();
    expect(approvals).toEqual([]);

    const [round] = await historiesOfAllRuns(h.temporal.workflow.getHandle(roundWorkflowId(taskId, 1)));
    const summaries = toolCallSummaries(round!);
    expect(summaries).toContain('shell_execute: git status');
    expect(summaries).toContain('shell_execute: git push --force origin main');
  });

  test('hostile strings (metacharacters, newlines, substitutions, git config payloads) never execute unapproved', async () => {
    const M = (name: string) => path.join(outside, `pwned-${name}`);
    const hostile: Array<string | string[]> = [
      `ls; touch ${M('semicolon')}`,
      `ls && echo $(touch ${M('substitution')})`,
      `ls\ntouch ${M('newline')}`,
      `ls \`touch ${M('backtick')}\``,
      `ls > ${M('redirect')}`,
      `ls | tee ${M('pipe')}`,
      `false || touch ${M('or')}`,
      `cat <(touch ${M('procsub')})`,
      `bash -c 'touch ${M('bash-c')}'`,
      ['sh', '-c', `touch ${M('argv-sh')}`],
      `git -c core.fsmonitor='touch ${M('fsmonitor-c')}; false' status`,
      `git -c alias.x='!touch ${M('alias-c')}' x`,
      `git --upload-pack='touch ${M('upload-pack')}; false' ls-remote .`,
      `git config core.fsmonitor 'touch ${M('git-config-write')}; false'`,
      `touch ${M('plain-touch')}`,
    ];
    // The repository arrives with command-running config (the model's own file_write into .git is refused)…
    const config = [
      '[core]',
      '\trepositoryformatversion = 0',
      '\tbare = false',
      `\tfsmonitor = "touch ${M('fsmonitor-config')}; false"`,
      `\tpager = "touch ${M('pager')}; cat"`,
      '[diff]',
      `\texternal = "touch ${M('diff-external')}; true"`,
      '[alias]',
      `\tst = "!touch ${M('alias-config')}"`,
      '[remote "origin"]',
      `\turl = ${remote}`,
    ].join('\n');
    // …then runs "read-only" git that the repository's config would otherwise hijack.
    const readOnlyGit = ['git status', 'git diff', 'git log -1', 'git st'];
    writeFileSync(path.join(h.workspaceDir, 'tracked.txt'), 'original');
    git(h.workspaceDir, 'add', 'tracked.txt');
    git(h.workspaceDir, 'commit', '-q', '-m', 'add tracked.txt');
    const originalConfig = readFileSync(path.join(h.workspaceDir, '.git', 'config'), 'utf8');
    writeFileSync(path.join(h.workspaceDir, '.git', 'config'), config);
    const agentId = await h.createAgent();
    const taskId = agents.task([
      ...hostile.map((command) => toolTurn('shell_execute', { command })),
      toolTurn('file_write', { path: '.git/config', content: config }),
      toolTurn('file_write', { path: 'tracked.txt', content: 'changed' }),
      ...readOnlyGit.map((command) => toolTurn('shell_execute', { command })),
      submitTurn('tried everything'),
    ]);
    const APPROVAL_TIMEOUT_MS = 500;
    await h.client.startTask({
      agentId,
      taskId,
      title: 'Hostile',
      description: 'try to escape',
      approvalTimeoutMs: APPROVAL_TIMEOUT_MS,
    });
    await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);

    const requests = agents.requests(taskId);
    const results = requests.slice(1).map((r) => lastToolResults(r)[0]!);
    for (const [i, command] of hostile.entries()) {
      const result = results[i]!;
      expect(result.isError).toBe(true);
      // Either refused outright or never approved: nothing ran.
      expect([command, result.text]).toEqual([
        command,
        expect.stringMatching(/^Denied by policy|^Not run: the approval request .* timed out/),
      ]);
    }
    expect(results[hostile.length]!.text).toMatch(/^Refused: .*inside a git directory/);
    // Git never runs under configuration that can name a program: every read-only command is refused.
    const gitResults = results.slice(hostile.length + 2);
    expect(gitResults).toHaveLength(readOnlyGit.length);
    for (const result of gitResults) expect(result.text).toMatch(/^Denied by policy/);
    expect(gitResults[0]!.text).toMatch(/core\.fsmonitor/);

    // Every marker path lives in `outside`; none may exist.
    const planted = execFileSync('ls', ['-A', outside], { encoding: 'utf8' })
      .split('\n')
      .filter((f) => f.startsWith('pwned-'));
    expect(planted).toEqual([]);
    // Nothing ran without a human: every approval-tier call timed out unapproved.
    const approvals = await h.db.db
      .selectFrom('approvals')
      .select(['status', 'summary'])
      .where('task_id', '=', taskId)
      .execute();
    expect(approvals.every((a) => a.status === 'timed_out')).toBe(true);
    expect(approvals.map((a) => a.summary)).toEqual(
      expect.arrayContaining([`shell_execute: touch ${M('plain-touch')}`]),
    );
    // Control: the planted config is live. Plain, unhardened git runs it on a "read-only" status.
    git(h.workspaceDir, 'status');
    expect(existsSync(M('fsmonitor-config'))).toBe(true);
    writeFileSync(path.join(h.workspaceDir, '.git', 'config'), originalConfig);
  });

  test('cancelling the task stops a running command within 5 s and leaves the task cancelled', async () => {
    const SLEEP_SECONDS = '37.123';
    const agentId = await h.createAgent();
    const taskId = agents.task([toolTurn('shell_execute', { command: `sleep ${SLEEP_SECONDS}` }), submitTurn('slept')]);
    const { handle } = await h.client.startTask({ agentId, taskId, title: 'Sleep', description: 'sleep a long time' });
    const waiting = await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1);
    await h.client.decideApproval(taskId, {
      requestId: waiting.pendingApprovals[0]!.requestId,
      decision: 'approved',
      decidedBy: 'dan',
    });
    const sleeping = () => execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).includes(`sleep ${SLEEP_SECONDS}`);
    await eventually(() => sleeping() || undefined, 'the command to start');

    const cancelledAt = Date.now();
    await handle.cancel();
    await eventually(() => !sleeping() || undefined, 'the command to stop', 5_000);
    const stoppedMs = Date.now() - cancelledAt;
    await eventually(
      async () => (await h.client.getTaskRow(taskId)).state === 'cancelled' || undefined,
      'the task to be cancelled',
      5_000,
    );
    const cancelledMs = Date.now() - cancelledAt;
    expect(stoppedMs).toBeLessThan(5_000);
    expect(cancelledMs).toBeLessThan(5_000);
    // The row says cancelled one workflow task before the workflow closes: wait for the close.
    await expect(handle.result()).rejects.toThrow(/cancel/i);
    expect((await handle.describe()).status.name).toBe('CANCELLED');
    console.log(`cancel latency: command stopped after ${stoppedMs} ms, task cancelled after ${cancelledMs} ms`);
  });
});
