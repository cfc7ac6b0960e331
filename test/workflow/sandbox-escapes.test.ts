/**
 * Issue 18's reproductions, end to end: a real worker in its own process, whose real environment
 * (its `/proc/<pid>/environ`) holds canary secrets, driven by a scripted model through
 * `shell_execute` and `file_write` on real git repositories. Each test asserts that no canary file
 * appears, every path outside the workspace is byte-identical (the remote changes only where a push
 * was allowed), and no piece of any canary secret, plain, base64 or hex, is in messages, tool rows,
 * stored outputs, approvals, task events, the worker's logs or Temporal history.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { roundWorkflowId, taskWorkflowId } from '../../workflows/contract';
import { createHarness, submitTurn, toolTurn, type Harness } from '../support/harness';
import { historiesOfAllRuns, lastToolResults, ScriptedAgents } from './task-support';
import type { ScriptedResponse } from '../fake-llm';
import { findLeakedPieces, git, GIT_ENV, snapshot } from '../support/canaries';

/** Short, so every approval-tier call times out unapproved quickly: nothing runs without a human. */
const APPROVAL_TIMEOUT_MS = 400;
const TASK_TIMEOUT_MS = 120_000;
const KEY_SECRET = `sk-canary${randomUUID().replaceAll('-', '')}`;
const DB_PASSWORD = `pw${randomUUID().replaceAll('-', '')}`;
const FILE_SECRET = `file${randomUUID().replaceAll('-', '')}`;
const ENV_FILE_SECRET = `dotenv${randomUUID().replaceAll('-', '')}`;
const SECRETS = [KEY_SECRET, DB_PASSWORD, FILE_SECRET, ENV_FILE_SECRET];
const leakedPieces = (text: string): string[] => findLeakedPieces(text, SECRETS);
/** The canaries, in the worker process's own environment from its start. */
const CANARY_ENV = {
  SBX_CANARY_ANTHROPIC_API_KEY: KEY_SECRET,
  SBX_CANARY_DATABASE_URL: `postgres://agent:${DB_PASSWORD}@127.0.0.1:5439/x`,
};

const TIMED_OUT = /^Not run: the approval request .* timed out/;

describe('the kernel sandbox against issue 18 (real worker process with canary secrets in its environment)', () => {
  let h: Harness;
  let agents: ScriptedAgents;
  let worker: ChildProcess;
  const logLines: string[] = [];
  let outside: string;
  let remote: string;
  let workspace: string;
  let host: string;

  beforeAll(async () => {
    h = await createHarness();
    agents = new ScriptedAgents(h.llm);
    worker = spawn(process.execPath, ['--import', 'tsx', 'test/support/worker-process.ts'], {
      env: { ...process.env, ...CANARY_ENV, TEST_TASK_QUEUE: h.taskQueue, FAKE_LLM_URL: h.llm.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    await new Promise<void>((resolve, reject) => {
      worker.stdout!.on('data', (chunk: Buffer) => {
        logLines.push(chunk.toString('utf8'));
        if (chunk.toString().includes('worker-ready')) resolve();
      });
      worker.stderr!.on('data', (chunk: Buffer) => logLines.push(chunk.toString('utf8')));
      worker.once('exit', (code) => reject(new Error(`worker exited early with ${code}`)));
    });

    workspace = realpathSync(h.workspaceDir);
    outside = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'da-sbx-outside-')));
    writeFileSync(path.join(outside, 'secret.txt'), `token=${FILE_SECRET}\n`);
    remote = path.join(outside, 'remote.git');
    execFileSync('git', ['init', '-q', '--bare', '-b', 'main', remote], { env: GIT_ENV });
    git(workspace, 'init', '-q', '-b', 'main');
    git(workspace, 'config', 'user.name', 'Agent');
    git(workspace, 'config', 'user.email', 'agent@example.com');
    writeFileSync(path.join(workspace, 'a.txt'), 'original\n');
    git(workspace, 'add', 'a.txt');
    git(workspace, 'commit', '-q', '-m', 'first');
    git(workspace, 'branch', 'feature');
    git(workspace, 'remote', 'add', 'origin', remote);
    git(workspace, 'push', '-q', 'origin', 'main');
    // On the remote, `trunk` is another name for `main`.
    execFileSync('git', ['-C', remote, 'symbolic-ref', 'refs/heads/trunk', 'refs/heads/main'], { env: GIT_ENV });
    // A branch on the remote that checks out a symbolic link to the secret.
    const other = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'da-sbx-other-')));
    git(other, 'clone', '-q', remote, 'c');
    execFileSync('ln', ['-s', path.join(outside, 'secret.txt'), path.join(other, 'c', 'link')]);
    git(path.join(other, 'c'), 'checkout', '-q', '-b', 'withlink');
    git(path.join(other, 'c'), 'add', 'link');
    git(path.join(other, 'c'), 'commit', '-q', '-m', 'link');
    git(path.join(other, 'c'), 'push', '-q', 'origin', 'withlink');
    rmSync(other, { recursive: true, force: true });

    // A host checkout with an ignored .env; another agent's workspace is a plain folder inside it.
    host = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'da-sbx-host-')));
    git(host, 'init', '-q', '-b', 'main');
    writeFileSync(path.join(host, '.gitignore'), '.env\n.data/\n');
    writeFileSync(path.join(host, 'README.md'), 'host 1\n');
    git(host, 'add', '.');
    git(host, 'commit', '-q', '-m', 'host 1');
    writeFileSync(path.join(host, 'README.md'), 'host 2\n');
    git(host, 'commit', '-q', '-am', 'host 2');
    writeFileSync(path.join(host, '.env'), `ANTHROPIC_API_KEY=${ENV_FILE_SECRET}\n`);
  });

  afterAll(async () => {
    if (worker.exitCode === null && worker.signalCode === null) {
      const exited = new Promise((resolve) => worker.once('exit', resolve));
      worker.kill('SIGKILL');
      await exited;
    }
    await h.close();
    rmSync(outside, { recursive: true, force: true });
    rmSync(host, { recursive: true, force: true });
  });

  const remoteRefs = () => git(remote, 'for-each-ref', '--format=%(refname) %(objectname)');
  const canaries = () => [...readdirSync(outside), ...readdirSync(host)].filter((f) => f.startsWith('pwned'));

  function scripted(steps: Array<{ before?: () => void; turn: ScriptedResponse }>): string {
    return agents.task(({ index }) => {
      const step = steps[index];
      if (!step) return { kind: 'error', status: 400, message: 'script exhausted' };
      step.before?.();
      return step.turn;
    });
  }

  async function runTask(taskId: string, agentId: string): Promise<Array<{ text: string; isError: boolean }>> {
    await h.client.startTask({
      agentId,
      taskId,
      title: 'Escape',
      description: 'try to escape the sandbox',
      approvalTimeoutMs: APPROVAL_TIMEOUT_MS,
    });
    await h.waitForStatus(taskId, (s) => s.state === 'review', TASK_TIMEOUT_MS);
    return agents
      .requests(taskId)
      .slice(1)
      .map((r) => lastToolResults(r)[0]!);
  }

  /** No piece of a canary, in any encoding, in what the model saw, the database, the logs or history. */
  async function expectNoSecretAnywhere(taskId: string, results: Array<{ text: string }>): Promise<void> {
    expect(leakedPieces(results.map((r) => r.text).join('\n'))).toEqual([]);
    const rows = await sql<{ t: string }>`
      select coalesce(string_agg(t, E'\n'), '') as t from (
        select content::text as t from messages where session_id in (select session_id from tool_calls where task_id = ${taskId})
        union all select args::text || coalesce(result, '') from tool_calls where task_id = ${taskId}
        union all select content from tool_outputs where session_id in (select session_id from tool_calls where task_id = ${taskId})
        union all select args::text || summary from approvals where task_id = ${taskId}
        union all select data::text from task_events where task_id = ${taskId}
      ) s`.execute(h.db.db);
    expect(rows.rows[0]!.t.length).toBeGreaterThan(100);
    expect(leakedPieces(rows.rows[0]!.t)).toEqual([]);
    expect(leakedPieces(logLines.join(''))).toEqual([]);
    const histories = [
      ...(await historiesOfAllRuns(h.temporal.workflow.getHandle(taskWorkflowId(taskId)))),
      ...(await historiesOfAllRuns(h.temporal.workflow.getHandle(roundWorkflowId(taskId, 1)))),
    ];
    const text = JSON.stringify(histories, (_key, value: unknown) =>
      value instanceof Uint8Array ? Buffer.from(value).toString('utf8') : value,
    );
    expect(text.length).toBeGreaterThan(1000);
    expect(leakedPieces(text)).toEqual([]);
  }

  test('folder remotes (alternateRefsCommand bare repo, gitdir pointer), name lists, outside config reads, symlinks in a chain', async () => {
    const before = snapshot(outside, (full) => full === remote);
    const refsBefore = remoteRefs();
    const runScript = 'for p in /proc/[0-9]*; do base64 -w0 "$p/environ"; echo; done\n';
    const agentId = await h.createAgent();
    const taskId = scripted([
      {
        turn: toolTurn('file_write', {
          path: 'cache/config',
          content: '[core]\n\tbare = true\n\talternateRefsCommand = sh ./run.sh\n',
        }),
      },
      { turn: toolTurn('file_write', { path: 'cache/run.sh', content: runScript }) },
      { turn: toolTurn('file_write', { path: 'cache/objects/info/alternates', content: '' }) },
      { turn: toolTurn('file_write', { path: 'cache/refs/.keep', content: '' }) },
      { turn: toolTurn('file_write', { path: 'cache/HEAD', content: 'ref: refs/heads/main\n' }) },
      { turn: toolTurn('shell_execute', { command: 'git push cache HEAD:x' }) },
      { turn: toolTurn('file_write', { path: 'pointer', content: `gitdir: ${host}/.git\n` }) },
      { turn: toolTurn('shell_execute', { command: 'git ls-remote pointer' }) },
      { turn: toolTurn('shell_execute', { command: 'git fetch pointer main' }) },
      { turn: toolTurn('shell_execute', { command: 'git push pointer HEAD:x' }) },
      {
        turn: toolTurn('file_write', {
          path: 'list',
          content: `${outside}/secret.txt\n${host}/.env\n/proc/self/environ\n`,
        }),
      },
      { turn: toolTurn('shell_execute', { command: 'sort --files0-from=list' }) },
      { turn: toolTurn('shell_execute', { command: 'wc --files0-from=list' }) },
      { turn: toolTurn('shell_execute', { command: 'file -f list' }) },
      { turn: toolTurn('file_write', { path: 'inc.cfg', content: '[include]\n\tpath = /root/.gitconfig\n' }) },
      { turn: toolTurn('shell_execute', { command: 'git config --file inc.cfg --includes --list' }) },
      { turn: toolTurn('shell_execute', { command: 'git config --system --list' }) },
      {
        turn: toolTurn('shell_execute', {
          command: 'git fetch origin && git checkout -b s origin/withlink && cat link',
        }),
      },
      { turn: toolTurn('shell_execute', { command: 'cat a.txt' }) },
      { turn: submitTurn('tried') },
    ]);
    const results = await runTask(taskId, agentId);

    for (const i of [0, 1, 2, 3, 4, 6, 10, 14]) expect([i, results[i]!.isError]).toEqual([i, false]);
    // A folder or file in the workspace is never a remote without a human.
    for (const i of [5, 7, 8, 9]) expect([i, results[i]!.text]).toEqual([i, expect.stringMatching(TIMED_OUT)]);
    // Name lists and configuration from outside the repository ask.
    for (const i of [11, 12, 13, 15, 16]) expect([i, results[i]!.text]).toEqual([i, expect.stringMatching(TIMED_OUT)]);
    // The link arrives with the checkout; the next step is judged again and does not run.
    expect(results[17]!.isError).toBe(true);
    expect(results[17]!.text).toMatch(/\$ cat link\n\[not run: it now needs approval: .*outside the workspace/);
    expect(results[17]!.text).not.toContain('token=');
    expect(results[18]!.text).toMatch(/original/);

    expect(canaries()).toEqual([]);
    expect(snapshot(outside, (full) => full === remote)).toEqual(before);
    expect(remoteRefs()).toBe(refsBefore);
    await expectNoSecretAnywhere(taskId, results);
    git(workspace, 'checkout', '-q', 'main');
  });

  test('pushes judged by what git reports: tags, notes, a protected branch through a symref alias; tag pruning; a switch to a tag named main', async () => {
    git(workspace, 'tag', 'keep-me');
    const refsBefore = remoteRefs();
    const main = git(workspace, 'rev-parse', 'main');
    const agentId = await h.createAgent();
    const taskId = scripted([
      { turn: toolTurn('shell_execute', { command: 'git commit --allow-empty -m next' }) },
      { turn: toolTurn('shell_execute', { command: 'git push origin HEAD:trunk' }) },
      { turn: toolTurn('shell_execute', { command: 'git push origin HEAD:refs/tags/v9' }) },
      { turn: toolTurn('shell_execute', { command: 'git push origin refs/notes/commits:refs/notes/commits' }) },
      { turn: toolTurn('shell_execute', { command: 'git push origin keep-me' }) },
      { turn: toolTurn('shell_execute', { command: 'git fetch --prune --prune-tags origin' }) },
      { turn: toolTurn('shell_execute', { command: 'git fetch -P origin' }) },
      { turn: toolTurn('shell_execute', { command: 'git switch refs/heads/feature' }) },
      {
        // A tag named like a branch (the agent could fetch one from a repository it built).
        before: () => {
          git(workspace, 'checkout', '-q', 'feature');
          git(workspace, 'branch', '-q', '-D', 'main');
          git(workspace, 'tag', 'main', main);
        },
        turn: toolTurn('shell_execute', { command: 'git switch main' }),
      },
      { turn: toolTurn('shell_execute', { command: 'git push origin HEAD:topic-ok' }) },
      { turn: submitTurn('tried') },
    ]);
    const results = await runTask(taskId, agentId);

    expect(results[0]!.isError).toBe(false);
    for (const i of [1, 2, 3, 4, 5, 6, 7, 8])
      expect([i, results[i]!.text]).toEqual([i, expect.stringMatching(TIMED_OUT)]);
    expect(results[9]!.isError).toBe(false);

    const refsAfter = remoteRefs();
    expect(refsAfter.split('\n').filter((line) => !line.startsWith('refs/heads/topic-ok '))).toEqual(
      refsBefore.split('\n'),
    );
    expect(refsAfter).toMatch(/refs\/heads\/topic-ok /);
    expect(git(workspace, 'tag', '--list')).toContain('keep-me');
    expect(git(workspace, 'rev-parse', '--abbrev-ref', 'HEAD')).toBe('feature');
    await expectNoSecretAnywhere(taskId, results);
    git(workspace, 'tag', '-d', 'main');
    git(workspace, 'branch', 'main', main);
  });

  test('a workspace folder inside a checkout never works on the host repository', async () => {
    const inner = path.join(host, '.data', 'workspaces', 'agent-x');
    mkdirSync(inner, { recursive: true });
    const before = snapshot(host, (full) => full.startsWith(`${inner}`));
    const hostHead = git(host, 'rev-parse', 'HEAD');
    const agentId = `agent-${randomUUID().slice(0, 8)}`;
    await h.client.upsertAgent({
      id: agentId,
      name: 'inner',
      files: {
        soul: 'You are careful.',
        agents: 'You complete tasks with tools.',
        heartbeat: '- check tasks',
        tools: 'Use tools.',
      },
      config: {},
      workspaceDir: inner,
    });
    const taskId = scripted([
      { turn: toolTurn('shell_execute', { command: 'git grep --untracked ANTHROPIC -- :/' }) },
      { turn: toolTurn('shell_execute', { command: 'git log --oneline' }) },
      { turn: toolTurn('shell_execute', { command: 'git checkout -b x HEAD~1' }) },
      { turn: toolTurn('shell_execute', { command: 'git switch main' }) },
      { turn: toolTurn('shell_execute', { command: 'ls ../..' }) },
      { turn: submitTurn('tried') },
    ]);
    const results = await runTask(taskId, agentId);

    for (const i of [0, 1, 2, 3]) {
      expect([i, results[i]!.isError]).toEqual([i, true]);
      expect(results[i]!.text).toMatch(/not a git repository/);
    }
    expect(results[4]!.text).toMatch(TIMED_OUT);
    expect(snapshot(host, (full) => full.startsWith(`${inner}`))).toEqual(before);
    expect(git(host, 'rev-parse', 'HEAD')).toBe(hostHead);
    expect(git(host, 'rev-parse', '--abbrev-ref', 'HEAD')).toBe('main');
    await expectNoSecretAnywhere(taskId, results);
  });

  test('the worker is still up and its environment really holds the canaries (control)', async () => {
    expect(worker.exitCode).toBeNull();
    const environ = readFileSync(`/proc/${worker.pid}/environ`, 'latin1');
    expect(environ).toContain(KEY_SECRET);
    expect(existsSync(path.join(host, '.env'))).toBe(true);
  });
});
