import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freeLoopbackPort } from '../../activities/store/db';
import type { RecordedRequest, ScriptedResponse } from '../fake-llm';
import { createHarness, type Harness } from '../support/harness';
import { startProductWorker, type ProductWorker } from '../support/product-worker';
import { startOwnPostgres, type OwnPostgres } from '../support/services';

const TASKS = 6;
/** `git commit` calls each task makes before it submits: every one is an effect the test counts. */
const COMMITS = 8;
const OUTAGES = 4;
/** Each outage is short enough that a step's retries (2 s, then 4 s) outlast it, long enough to fail many statements. */
const OUTAGE_MS = { min: 300, max: 1_500 };
const BETWEEN_OUTAGES_MS = { min: 200, max: 1_200 };
/** Each answer streams slowly enough that an outage lands in LLM calls as well as in tool calls. */
const CHUNK_DELAY_MS = 5;

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

const between = (range: { min: number; max: number }): number =>
  range.min + Math.floor(Math.random() * (range.max - range.min));

/**
 * Scripted agent: commit number n (n = tool results so far) with `shell_execute`, until COMMITS
 * calls have been answered, then submit. Whatever a call's result says (even "interrupted"), the
 * agent moves on, so an effect lost by the worker is a commit missing from the repository.
 */
function committingAgent(request: RecordedRequest): ScriptedResponse {
  const body = JSON.stringify(request.body);
  const done = (body.match(/"tool_result"/g) ?? []).length;
  const usage = { inputTokens: 200, outputTokens: 30 };
  if (!Array.isArray(request.body.tools) || !/TASK EXECUTION/.test(body))
    return { kind: 'message', content: [{ type: 'text', text: 'noted' }], stopReason: 'end_turn', usage };
  if (done < COMMITS)
    return {
      kind: 'message',
      content: [
        { type: 'text', text: `commit ${done}` },
        {
          type: 'tool_use',
          name: 'shell_execute',
          input: { command: `git commit -q --allow-empty -m effect-${done}` },
        },
      ],
      stopReason: 'tool_use',
      usage,
      chunkDelayMs: CHUNK_DELAY_MS,
    };
  return {
    kind: 'message',
    content: [{ type: 'tool_use', name: 'task_submit_review', input: { summary: `${COMMITS} commits` } }],
    stopReason: 'tool_use',
    usage,
  };
}

/**
 * The test's own PostgreSQL is stopped in immediate mode again and again, at random moments, while
 * tasks make `git commit` calls through the real worker process. Every commit the model asked for
 * happens exactly once (none lost, none doubled), and no call is reported to the model as
 * interrupted: the worker never stopped, so it always knows what it ran.
 */
describe('repeated PostgreSQL outages under load', () => {
  let postgres: OwnPostgres;
  let h: Harness;
  let worker: ProductWorker | undefined;
  beforeAll(async () => {
    postgres = startOwnPostgres(await freeLoopbackPort());
    h = await createHarness({ databaseUrl: postgres.url });
    h.llm.setResponder(committingAgent);
  });
  afterAll(async () => {
    await worker?.stop();
    await h.close();
    postgres.close();
  });

  test(`${TASKS} tasks × ${COMMITS} commits through ${OUTAGES} outages: every effect exactly once`, async () => {
    worker = await startProductWorker({
      DATABASE_URL: postgres.url,
      TEMPORAL_TASK_QUEUE: h.taskQueue,
      ANTHROPIC_API_KEY: 'test-key',
      ANTHROPIC_BASE_URL: h.llm.url,
    });
    const repos: string[] = [];
    const taskIds: string[] = [];
    for (let i = 0; i < TASKS; i++) {
      // One agent and one repository per task: commits of different tasks never race for a lock.
      const repo = path.join(h.workspaceDir, `repo-${i}`);
      mkdirSync(repo);
      git(repo, 'init', '-q', '-b', 'main');
      git(repo, 'commit', '-q', '--allow-empty', '-m', 'first');
      repos.push(repo);
      const agentId = `agent-outage-${i}-${Date.now()}`;
      await h.client.upsertAgent({
        id: agentId,
        name: `Committer ${i}`,
        files: { soul: 'Careful.', agents: 'You commit.', heartbeat: '- none', tools: 'Use the shell.' },
        config: {},
        workspaceDir: repo,
      });
      taskIds.push((await h.client.startTask({ agentId, title: `Commit ${i}`, description: 'make commits' })).taskId);
    }

    // Outages at random moments while the tasks run (each a fresh immediate stop).
    for (let k = 0; k < OUTAGES; k++) {
      await new Promise((r) => setTimeout(r, between(BETWEEN_OUTAGES_MS)));
      postgres.stopImmediately();
      await new Promise((r) => setTimeout(r, between(OUTAGE_MS)));
      postgres.start();
    }

    for (const taskId of taskIds) await h.waitForStatus(taskId, (s) => s.state === 'review', 120_000);

    const expected = Array.from({ length: COMMITS }, (_, n) => `effect-${n}`);
    for (const repo of repos) {
      const subjects = git(repo, 'log', '--format=%s').split('\n').reverse();
      // No effect lost, none doubled, in the model's order.
      expect(subjects).toEqual(['first', ...expected]);
    }
    const ledger = await h.db.db
      .selectFrom('tool_calls')
      .select(['task_id', 'tool', 'status', 'executions', 'result'])
      .where('task_id', 'in', taskIds)
      .where('tool', '=', 'shell_execute')
      .execute();
    expect(ledger.filter((l) => l.executions !== 1)).toEqual([]);
    expect(ledger.filter((l) => l.status !== 'completed').map((l) => l.result)).toEqual([]);
    expect(ledger).toHaveLength(TASKS * COMMITS);
    // What the model read: each call's own output, never "interrupted" or "not run".
    const results = await h.db.db
      .selectFrom('messages')
      .innerJoin('sessions', 'sessions.id', 'messages.session_id')
      .select('messages.content')
      .where('sessions.task_id', 'in', taskIds)
      .where('messages.idem_key', 'like', 'result-%')
      .execute();
    const texts = results.flatMap((r) =>
      (r.content as unknown as Array<{ type: string; content?: string }>).map((b) => b.content ?? ''),
    );
    expect(texts.filter((t) => /interrupted|was not run|failed:/i.test(t))).toEqual([]);
    // The outages did cut work off: steps failed and were retried.
    expect(worker.logs.filter((l) => l.msg === 'Activity failed').length).toBeGreaterThan(0);
    expect(worker.child.exitCode).toBeNull();
  }, 180_000);
});
