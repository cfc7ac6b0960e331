import { costVsPassRateSvg } from '../../api/evals-page';
import {
  changedFilesVsOriginal,
  reachedReviewWithoutHuman,
  runPassed,
  totalsPerCandidate,
  type EvalRow,
  type RunFigures,
} from '../../activities/fork/graders';
import { parseEvalCandidate } from '../../activities/fork/spec';
import { canonicalJson, outsideEffect } from '../../activities/fork/tool-calls';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { copyWorkspace } from '../../activities/fork/workspace';
import { git } from '../support/canaries';

const figures = (over: Partial<RunFigures> = {}): RunFigures => ({
  state: 'review',
  reachedReview: true,
  approvalsRequested: 0,
  iterations: 1,
  tokens: 100,
  costUsd: 0.01,
  wallMs: 10,
  toolCalls: 1,
  toolErrors: 0,
  changedFiles: ['a.md'],
  ...over,
});

describe('fork rules', () => {
  test('canonical arguments compare equal whatever their key order, and differ when a value does', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { y: 2, x: 1 }], c: 'x' } })).toBe(
      canonicalJson({ a: { c: 'x', d: [1, { x: 1, y: 2 }] }, b: 1 }),
    );
    expect(canonicalJson({ a: 1 })).not.toBe(canonicalJson({ a: '1' }));
    expect(canonicalJson({ a: 1, b: undefined })).toBe(canonicalJson({ a: 1 }));
  });

  test('a push is an outside effect however it is written; workspace work is not; unknown tools are', async () => {
    for (const command of [
      'git push origin main',
      'git status && git push',
      ['git', '-c', 'x.y=z', 'push'],
      'git --no-pager push -q origin HEAD',
      'git send-email x.patch',
    ]) {
      await expect(outsideEffect('shell_execute', { command })).resolves.toMatch(/changes a remote repository/);
    }
    for (const command of ['git status', 'git commit -m x', 'git fetch origin', 'ls -la', ['git', 'log', 'push']])
      await expect(outsideEffect('shell_execute', { command })).resolves.toBeUndefined();
    await expect(outsideEffect('file_write', { path: 'x', content: 'y' })).resolves.toBeUndefined();
    for (const tool of [
      'agent_send_message',
      'notify_user',
      'memory_save',
      'task_create',
      'spawn_subagent',
      'edit_agent_file',
      'mcp__github__create_issue',
    ]) {
      await expect(outsideEffect(tool, {})).resolves.toMatch(/acts outside the fork/);
    }
  });

  test('graders: review without a human, changed files, and what a pass needs', () => {
    expect(reachedReviewWithoutHuman(figures()).passed).toBe(true);
    expect(reachedReviewWithoutHuman(figures({ approvalsRequested: 1 }))).toMatchObject({
      passed: false,
      detail: 'submitted after 1 approval request(s)',
    });
    expect(changedFilesVsOriginal(figures({ changedFiles: ['b.md'] }), figures())).toMatchObject({
      passed: false,
      detail: 'missing a.md; extra b.md',
    });
    const grades = [
      reachedReviewWithoutHuman(figures()),
      changedFilesVsOriginal(figures({ changedFiles: [] }), figures({ changedFiles: [] })),
    ];
    expect(runPassed(grades, figures({ changedFiles: [] }))).toBe(true);
    expect(
      runPassed(
        [reachedReviewWithoutHuman(figures()), changedFilesVsOriginal(figures({ changedFiles: [] }), figures())],
        figures(),
      ),
    ).toBe(false);
  });

  test('totals count skipped runs as not passed', () => {
    const row = (candidate: string, passed: boolean, state: EvalRow['state'] = 'graded'): EvalRow => ({
      sourceTaskId: 't',
      candidate,
      forkTaskId: 'f',
      state,
      passed,
      grades: [],
      ...(state === 'graded' ? { fork: figures(), original: figures() } : {}),
      calls: { replayed: 1, executed: 0, refused: 0 },
      judgeCostUsd: 0.001,
    });
    const [a] = totalsPerCandidate([row('a', true), row('a', false), row('a', false, 'skipped')], ['a']);
    expect(a).toMatchObject({ runs: 3, graded: 2, passed: 1, passRate: 0.333, costUsd: 0.023, skipped: 1 });
  });

  test('a candidate file with an unknown key or a bad name is refused, naming the file', () => {
    expect(() => parseEvalCandidate('{"name":"ok","modle":"x"}', 'c.json')).toThrow(
      /c\.json is not a valid candidate configuration:[\s\S]*modle/,
    );
    expect(() => parseEvalCandidate('{"name":"<b>"}', 'c.json')).toThrow(/a short name/);
    expect(() => parseEvalCandidate('not json', 'c.json')).toThrow(/c\.json is not valid JSON/);
    expect(parseEvalCandidate('{"name":"cheap","model":"m","instructions":"Be brief."}', 'c.json')).toEqual({
      name: 'cheap',
      model: 'm',
      instructions: 'Be brief.',
    });
  });

  test('the plot escapes what it labels', () => {
    const svg = costVsPassRateSvg([
      {
        candidate: '<script>x</script>',
        runs: 1,
        graded: 1,
        passed: 1,
        passRate: 1,
        costUsd: 1,
        originalCostUsd: 1,
        tokens: 1,
        replayed: 0,
        executed: 0,
        refused: 0,
        skipped: 0,
      },
    ]);
    expect(svg).not.toContain('<script>');
    expect(svg).toContain('&lt;script&gt;');
  });

  test("a workspace that is not a repository is copied without its .git pointer files, so the fork's git never reaches the source's repository", async () => {
    const tmp = mkdtempSync(path.join(os.tmpdir(), 'da-fork-copy-'));
    try {
      const source = path.join(tmp, 'source');
      mkdirSync(path.join(source, 'sub'), { recursive: true });
      writeFileSync(path.join(source, 'a.txt'), 'a');
      writeFileSync(path.join(source, '.git'), 'gitdir: /elsewhere/.git/worktrees/x\n');
      writeFileSync(path.join(source, 'sub', '.git'), 'gitdir: ../../modules/sub\n');
      const copy = await copyWorkspace(source, 'fork-1', new Date(), path.join(tmp, 'forks'));
      expect(readFileSync(path.join(copy.dir, 'a.txt'), 'utf8')).toBe('a');
      expect(existsSync(path.join(copy.dir, '.git'))).toBe(false);
      expect(existsSync(path.join(copy.dir, 'sub', '.git'))).toBe(false);
      expect(copy.note).toMatch(/not a git repository: copied as it is now.*left out 2 \.git pointer file\(s\)/);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });

  test("a repository is cloned at HEAD as of the step, with its own objects and the source's remotes", async () => {
    const tmp = mkdtempSync(path.join(os.tmpdir(), 'da-fork-clone-'));
    try {
      const source = path.join(tmp, 'source');
      mkdirSync(source);
      git(source, 'init', '-q', '-b', 'main');
      git(source, 'commit', '-q', '--allow-empty', '-m', 'first');
      git(source, 'remote', 'add', 'origin', 'https://example.invalid/repo.git');
      const first = git(source, 'rev-parse', 'HEAD');
      const asOf = new Date(Date.now() + 1_000);
      await new Promise((r) => setTimeout(r, 2_100)); // the reflog counts in seconds
      git(source, 'commit', '-q', '--allow-empty', '-m', 'second');
      const copy = await copyWorkspace(source, 'fork-2', asOf, path.join(tmp, 'forks'));
      expect(git(copy.dir, 'rev-parse', 'HEAD')).toBe(first);
      expect(git(copy.dir, 'symbolic-ref', '--short', 'HEAD')).toBe('main');
      expect(git(copy.dir, 'remote', 'get-url', 'origin')).toBe('https://example.invalid/repo.git');
      expect(copy.note).toMatch(new RegExp(`git clone of the source workspace at ${first.slice(0, 12)} \\(HEAD as of`));
      // Its own object store: nothing hard-linked into the source's.
      expect(
        readFileSync(path.join(copy.dir, '.git', 'objects', 'info', 'alternates'), { flag: 'a+' }).toString(),
      ).toBe('');
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});
