import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { agentGitIdentity, applyGitIdentity } from '../../activities/store/workspace-dir';
import { submitTurn, toolTurn, useHarness } from '../support/harness';
import { lastToolResults, ScriptedAgents } from './task-support';

/** git as a person without any global identity (the worker's situation on a fresh machine). */
const GIT_ENV = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  HOME: os.tmpdir(),
};
const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', args, { cwd, env: GIT_ENV, encoding: 'utf8' }).trim();

/** Agents commit as themselves: a workspace repository gets the agent's identity unless it has one. */
describe("an agent's git identity", () => {
  const h = useHarness();
  let scratch: string;
  beforeAll(async () => {
    scratch = mkdtempSync(path.join(os.tmpdir(), 'da-git-identity-'));
  });
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  test('an agent that runs `git init` and then `git commit` in a fresh workspace commits as itself, not "Author identity unknown"', async () => {
    await h.startWorker();
    const agents = new ScriptedAgents(h.llm);
    const workspaceDir = path.join(scratch, 'fresh');
    const agentId = `committer-${Date.now()}`;
    await h.client.upsertAgent({
      id: agentId,
      name: 'Cora Committer',
      files: { soul: 's', agents: 'a', heartbeat: '', tools: '' },
      workspaceDir,
    });
    const taskId = agents.task([
      toolTurn('shell_execute', { command: 'git init -q -b main' }),
      toolTurn('file_write', { path: 'notes.md', content: 'first notes' }),
      toolTurn('shell_execute', { command: 'git add notes.md' }),
      toolTurn('shell_execute', { command: 'git commit -q -m "Add notes"' }),
      submitTurn('committed'),
    ]);
    await h.client.startTask({ agentId, taskId, title: 'Commit', description: 'commit the notes' });
    // `git init` (and possibly others) ask a person first: approve whatever is asked until the review.
    for (;;) {
      const status = await h.waitForStatus(
        taskId,
        (s) => s.state === 'review' || s.pendingApprovals.length > 0,
        60_000,
      );
      if (status.state === 'review') break;
      for (const pending of status.pendingApprovals)
        await h.client
          .decideApproval(taskId, { requestId: pending.requestId, decision: 'approved', decidedBy: 'ana' })
          .catch(() => undefined);
    }
    const results = lastToolResults(agents.requests(taskId).at(-1)!);
    expect(JSON.stringify(results)).not.toMatch(/Author identity unknown|Please tell me who you are/);
    expect(git(workspaceDir, 'log', '-1', '--format=%an <%ae>|%s')).toBe(
      `Cora Committer <${agentId}@agents.localhost>|Add notes`,
    );
  }, 90_000);

  test('`git init && git add && git commit` in one call commits as the agent (the repository made by the first step gets the identity before the next)', async () => {
    // The worker the previous test started serves this one too.

    const agents = new ScriptedAgents(h.llm);
    const workspaceDir = path.join(scratch, 'one-call');
    const agentId = `one-call-${Date.now()}`;
    await h.client.upsertAgent({
      id: agentId,
      name: 'Olga Onecall',
      files: { soul: 's', agents: 'a', heartbeat: '', tools: '' },
      workspaceDir,
    });
    const taskId = agents.task([
      toolTurn('file_write', { path: 'notes.md', content: 'first notes' }),
      toolTurn('shell_execute', { command: 'git init -q -b main && git add notes.md && git commit -q -m "Add notes"' }),
      submitTurn('committed'),
    ]);
    await h.client.startTask({ agentId, taskId, title: 'Commit in one call', description: 'commit the notes' });
    for (;;) {
      const status = await h.waitForStatus(
        taskId,
        (s) => s.state === 'review' || s.pendingApprovals.length > 0,
        60_000,
      );
      if (status.state === 'review') break;
      for (const pending of status.pendingApprovals)
        await h.client
          .decideApproval(taskId, { requestId: pending.requestId, decision: 'approved', decidedBy: 'ana' })
          .catch(() => undefined);
    }
    expect(JSON.stringify(lastToolResults(agents.requests(taskId).at(-1)!))).not.toMatch(
      /Author identity unknown|Please tell me who you are/,
    );
    expect(git(workspaceDir, 'log', '-1', '--format=%an <%ae>|%s')).toBe(
      `Olga Onecall <${agentId}@agents.localhost>|Add notes`,
    );
  }, 90_000);

  test('an identity the repository already has is kept; the address domain is configurable; a bad domain is refused', async () => {
    const configured = path.join(scratch, 'configured');
    mkdirSync(configured);
    git(configured, 'init', '-q');
    git(configured, 'config', 'user.name', 'Ops Person');
    git(configured, 'config', 'user.email', 'ops@example.com');
    const nested = path.join(configured, 'clone');
    mkdirSync(nested);
    git(nested, 'init', '-q');
    const identity = agentGitIdentity(
      { id: 'rev', name: 'Rev Reviewer' },
      { AGENTS_GIT_EMAIL_DOMAIN: 'bots.example.org' },
    );
    expect(identity).toEqual({ name: 'Rev Reviewer', email: 'rev@bots.example.org' });
    expect(await applyGitIdentity(configured, identity)).toEqual([nested]);
    expect([git(configured, 'config', 'user.name'), git(configured, 'config', 'user.email')]).toEqual([
      'Ops Person',
      'ops@example.com',
    ]);
    expect([git(nested, 'config', 'user.name'), git(nested, 'config', 'user.email')]).toEqual([
      'Rev Reviewer',
      'rev@bots.example.org',
    ]);
    expect(() =>
      agentGitIdentity({ id: 'rev', name: 'R' }, { AGENTS_GIT_EMAIL_DOMAIN: 'not a domain; rm -rf' }),
    ).toThrow(/AGENTS_GIT_EMAIL_DOMAIN="not a domain; rm -rf" is not allowed: a domain name/);
  });

  test('a `.git` that is a link or a gitdir file (it could lead outside the workspace) is left alone', async () => {
    const outside = path.join(scratch, 'outside-repo');
    mkdirSync(outside);
    git(outside, 'init', '-q');
    const linked = path.join(scratch, 'linked');
    mkdirSync(linked);
    symlinkSync(path.join(outside, '.git'), path.join(linked, '.git'));
    expect(await applyGitIdentity(linked, { name: 'Mallory', email: 'm@agents.localhost' })).toEqual([]);
    expect(() => git(outside, 'config', '--local', 'user.name')).toThrow();
    // A config git cannot parse is left as it is, and the preparation goes on.
    const broken = path.join(scratch, 'broken');
    mkdirSync(broken);
    git(broken, 'init', '-q');
    writeFileSync(path.join(broken, '.git', 'config'), '[core\n\tbare = ');
    await expect(applyGitIdentity(broken, { name: 'A', email: 'a@agents.localhost' })).resolves.toEqual([]);
    expect(readFileSync(path.join(broken, '.git', 'config'), 'utf8')).toBe('[core\n\tbare = ');
  });
});
