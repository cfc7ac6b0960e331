import { randomUUID } from 'node:crypto';
import { chromium, type Browser } from 'playwright-core';
import { useHarness, submitTurn, toolTurn } from '../support/harness';
import { ScriptedAgents } from '../workflow/task-support';
import { startTestApi, type TestApi } from './api-support';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * The approvals inbox behind the organisations' walls, in headless Chromium: a person signed in with
 * acme's operator token sees acme's pending approval and none of globex's (nor the default
 * organisation's that other test files leave), and a decision posted from acme's session for globex's
 * request, carrying the session's own form token, is not recorded: globex's request stays pending.
 */
describe('the inbox of one organisation (headless Chromium)', () => {
  const h = useHarness({
    beforeClose: async () => {
      await browser?.close();
      await api.close();
    },
  });
  let api: TestApi;
  let agents: ScriptedAgents;
  let browser: Browser;
  const suffix = randomUUID().slice(0, 8);
  const acme = `acme-${suffix}`;
  const globex = `globex-${suffix}`;

  beforeAll(async () => {
    agents = new ScriptedAgents(h.llm);
    await h.startWorker();
    api = await startTestApi(h);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
  });

  /** A task of `org`'s agent waiting for approval of a shell command; its request id. */
  const pendingApproval = async (org: string): Promise<{ taskId: string; requestId: string }> => {
    const agentId = await h.createAgent({ org });
    const taskId = agents.task([
      toolTurn('shell_execute', { command: `touch marker-${org}` }, `I need a marker for ${org}.`),
      submitTurn('done'),
    ]);
    await h.client.startTask({
      agentId,
      taskId,
      title: `Work of ${org}`,
      description: 'x',
      approvalTimeoutMs: 120_000,
    });
    const status = await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1);
    return { taskId, requestId: status.pendingApprovals[0]!.requestId };
  };

  test("acme's person sees and decides only acme's approvals", async () => {
    const [ours, theirs] = await Promise.all([pendingApproval(acme), pendingApproval(globex)]);
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${api.url}/inbox/sign-in`);
    await page.locator('input[name="token"]').fill(await api.orgToken(acme, 'operator'));
    await Promise.all([page.waitForURL(`${api.url}/inbox`), page.locator('button[type="submit"]').click()]);

    const cards = await page
      .locator('article[data-request-id]')
      .evaluateAll((nodes) => nodes.map((n) => n.getAttribute('data-request-id')));
    expect(cards).toEqual([ours.requestId]);
    expect(await page.content()).not.toContain(theirs.requestId);
    expect(await page.content()).not.toContain(`Work of ${globex}`);

    // The page's own form, with the session's form token, aimed at globex's request.
    const form = page.locator(`article[data-request-id="${ours.requestId}"] form`).first();
    const action = await form.getAttribute('action');
    expect(action).toBe(`/inbox/approvals/${encodeURIComponent(ours.requestId)}`);
    await form.evaluate(
      (element, target) => element.setAttribute('action', target),
      `/inbox/approvals/${encodeURIComponent(theirs.requestId)}`,
    );
    const approve = form.locator('button[value="approved"]');
    await Promise.all([page.waitForURL(/problem=/), approve.click()]);
    const problem = new URL(page.url()).searchParams.get('problem');
    expect(problem).toMatch(/^Not recorded: /);
    expect(problem).toContain(theirs.requestId);
    const still = await h.client.getStatus(theirs.taskId);
    expect(still.pendingApprovals.map((p) => p.requestId)).toEqual([theirs.requestId]);
    const trail = await h.db.db
      .selectFrom('approvals')
      .select(['status', 'decided_by'])
      .where('id', '=', theirs.requestId)
      .executeTakeFirstOrThrow();
    expect(trail).toEqual({ status: 'pending', decided_by: null });
    await context.close();
  });
});
