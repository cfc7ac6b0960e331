import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import type { RecordedRequest } from '../fake-llm';
import { eventually } from '../support/eventually';
import { createHarness, submitTurn, textTurn, toolTurn, type Harness } from '../support/harness';
import { bodyText, isReflection, offersTools } from '../workflow/task-support';
import { startTestApi, type TestApi } from './api-support';

/** Debian's Chromium (`apt-get install chromium`; .ci/run installs it when missing). */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** Where the test leaves its screenshot of the evals page. */
const SCREENSHOT = path.resolve('.data', 'evals.png');
const CHEAP = 'claude-haiku-4-5';

/** Writes the report then submits; the cheap model submits at once. */
function respond(request: RecordedRequest) {
  if (isReflection(request)) return textTurn('Nothing new.');
  if (!offersTools(request)) return textTurn('Summary.');
  const text = bodyText(request);
  if (text.includes('"tool_result"')) return submitTurn('report written');
  if (request.body.model === CHEAP) return submitTurn('nothing to write');
  return toolTurn('file_write', { path: 'report.md', content: 'report\n' });
}

/** Forks and evals over HTTP, and the evals page beside the inbox in headless Chromium. */
describe('forks and evals over the API, and the evals page', () => {
  let h: Harness;
  let api: TestApi;
  let browser: Browser;
  let forkRoot: string;
  const previousRoot = process.env.AGENTS_FORK_WORKSPACE_ROOT;

  beforeAll(async () => {
    forkRoot = mkdtempSync(path.join(os.tmpdir(), 'da-api-forks-'));
    process.env.AGENTS_FORK_WORKSPACE_ROOT = forkRoot;
    h = await createHarness();
    h.llm.setResponder(respond);
    await h.startWorker();
    api = await startTestApi(h);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await api.close();
    await h.close();
    rmSync(forkRoot, { recursive: true, force: true });
    if (previousRoot === undefined) delete process.env.AGENTS_FORK_WORKSPACE_ROOT;
    else process.env.AGENTS_FORK_WORKSPACE_ROOT = previousRoot;
  });

  test('fork, its report, an eval and its table over HTTP; the page plots cost against pass rate', async () => {
    const agentId = await h.createAgent({ model: 'claude-sonnet-4-6' });
    const taskId = `api-orig-${agentId}`;
    await h.client.startTask({ agentId, taskId, title: 'Report', description: 'write report.md' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');

    const unknown = await api.call('POST', '/v1/tasks/nope-nope/fork', { body: { at: 0 } });
    expect([unknown.status, unknown.body.error.code]).toEqual([404, 'task_not_found']);
    const past = await api.call('POST', `/v1/tasks/${taskId}/fork`, { body: { at: 5 } });
    expect([past.status, past.body.error.code, past.body.error.message]).toEqual([
      400,
      'invalid_fork',
      expect.stringMatching(/step 5 is past the end .* it has 2 step\(s\)/),
    ]);
    const readOnly = await api.call('POST', `/v1/tasks/${taskId}/fork`, { token: api.tokens.read, body: { at: 0 } });
    expect(readOnly.status).toBe(403);

    const fork = await api.call('POST', `/v1/tasks/${taskId}/fork`, { body: { at: 0 } });
    expect(fork.status).toBe(201);
    await h.waitForStatus(fork.body.taskId, (s) => s.state === 'review');
    const report = await api.call('GET', `/v1/tasks/${fork.body.taskId}/fork-report`, { token: api.tokens.read });
    expect(report.body).toMatchObject({ sourceTaskId: taskId, counts: { replayed: 1, executed: 0, refused: 0 } });

    const badEval = await api.call('POST', '/v1/evals', {
      body: { taskIds: [taskId], candidates: [{ name: 'a', temperature: 2 }] },
    });
    expect([badEval.status, badEval.body.error.code]).toEqual([400, 'invalid_request']);
    const started = await api.call('POST', '/v1/evals', {
      body: {
        taskIds: [taskId],
        candidates: [
          { name: 'same', model: 'claude-sonnet-4-6' },
          { name: 'cheap', model: CHEAP },
        ],
        budgetUsd: 1,
      },
    });
    expect(started.status).toBe(201);
    const evalId = started.body.evalId as string;
    const done = await eventually(
      async () => {
        const r = await api.call('GET', `/v1/evals/${evalId}`, { token: api.tokens.read });
        return r.body.state === 'completed' ? r.body : undefined;
      },
      'the eval completed',
      60_000,
    );
    expect(done.totals.map((t: { candidate: string; passRate: number }) => [t.candidate, t.passRate])).toEqual([
      ['same', 1],
      ['cheap', 0],
    ]);
    const listed = await api.call('GET', '/v1/evals', { token: api.tokens.read });
    expect(listed.body.evals.map((e: { evalId: string }) => e.evalId)).toContain(evalId);

    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${api.url}/inbox`);
    await page.locator('input[name="token"]').fill(api.tokens.operator);
    await Promise.all([page.waitForURL(`${api.url}/inbox`), page.locator('button[type="submit"]').click()]);
    await page.goto(`${api.url}/inbox/evals`);
    await page.locator(`a[href="/inbox/evals/${evalId}"]`).click();
    await page.waitForURL(`${api.url}/inbox/evals/${evalId}`);
    const titles = await page.locator('svg circle title').allTextContents();
    expect(titles).toEqual([
      expect.stringMatching(/^same: 100% at \$0\.\d{4}$/),
      expect.stringMatching(/^cheap: 0% at \$0\.\d{4}$/),
    ]);
    // The dearer, passing candidate is drawn right of and above the cheaper, failing one.
    const points = await page
      .locator('svg circle')
      .evaluateAll((els) =>
        els.map((e) => [Number(e.getAttribute('cx')), Number(e.getAttribute('cy'))] as [number, number]),
      );
    expect(points[0]![0]).toBeGreaterThan(points[1]![0]);
    expect(points[0]![1]).toBeLessThan(points[1]![1]);
    await expect(page.locator('table').nth(1).locator('tr').count()).resolves.toBe(3);
    mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    await context.close();
  });
});
