import { existsSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { useHarness, submitTurn, toolTurn } from '../support/harness';
import { ScriptedAgents } from '../workflow/task-support';
import { eventually } from '../support/eventually';
import { startTestApi, type TestApi } from './api-support';

/** Debian's Chromium (`apt-get install chromium`; .ci/run installs it when missing). */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** Where the test leaves its screenshot (docs/inbox.png is a copy of it). */
const SCREENSHOT = path.resolve('.data', 'inbox.png');

/** A page that, once opened, posts a decision to the inbox by itself: the classic forged form. */
const forgery = (action: string) => `<!doctype html><html><body>
<form id="f" method="post" action="${action}"><input name="decision" value="rejected"><input name="comment" value="forged"></form>
<script>document.getElementById('f').submit()</script></body></html>`;

/**
 * The approvals inbox as a person uses it, in headless Chromium: sign in with an operator token typed
 * into a form (it never appears in a URL), read what the agent wants to run and why, shrug off two
 * forged posts (a page on another port of the same host, and one on another site), approve with a
 * comment, see the task continue to review, then accept it from the same page and sign out. Other
 * scopes and no session are refused.
 */
describe('approvals inbox in headless Chromium', () => {
  const h = useHarness({
    beforeClose: async () => {
      await browser?.close();
      await api.close();
    },
  });
  let api: TestApi;
  let agents: ScriptedAgents;
  let browser: Browser;

  beforeAll(async () => {
    agents = new ScriptedAgents(h.llm);
    await h.startWorker();
    api = await startTestApi(h, { temporalUiUrl: 'http://ui.example:8233' });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
  });

  /** The inbox lists what the database says: wait for the row (written just after the workflow's own state). */
  const inReview = (taskId: string) =>
    eventually(
      async () => ((await h.client.getTaskRow(taskId)).state === 'review' ? true : undefined),
      `task ${taskId} in review`,
    );

  test('approve a pending shell command with a comment, see the task continue, accept it', async () => {
    const file = `inbox-${Date.now()}.txt`;
    const agentId = await h.createAgent();
    const words = 'The report needs a marker file before I can write it, so I will create it now.';
    const taskId = agents.task([
      toolTurn('shell_execute', { command: `touch ${file}` }, words),
      submitTurn(`Created ${file} and wrote the report.`),
    ]);
    const other = agents.task([submitTurn('Drafted the release notes: three sections, 400 words.')]);
    await h.client.startTask({ agentId, taskId: other, title: 'Draft the release notes', description: 'for 1.2' });
    await h.client.startTask({
      agentId,
      taskId,
      title: 'Write the weekly report',
      description: 'with a marker file',
      approvalTimeoutMs: 120_000,
    });
    const waiting = await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1);
    await inReview(other);
    const requestId = waiting.pendingApprovals[0]!.requestId;

    const context = await browser.newContext({ viewport: { width: 1000, height: 1100 } });
    const page = await context.newPage();
    await page.goto(`${api.url}/inbox`);
    expect(page.url()).toBe(`${api.url}/inbox/sign-in`);
    await page.locator('input[name="token"]').fill(api.tokens.operator);
    const [opened] = await Promise.all([
      page.waitForResponse((r) => r.url() === `${api.url}/inbox`),
      page.locator('button[type="submit"]').click(),
    ]);
    expect([opened.status(), page.url()]).toEqual([200, `${api.url}/inbox`]);
    expect(opened.headers()).toMatchObject({
      'referrer-policy': 'same-origin',
      'x-content-type-options': 'nosniff',
      'content-security-policy': expect.stringContaining("frame-ancestors 'none'"),
    });
    const [cookie] = await context.cookies();
    expect(cookie).toMatchObject({ name: 'da_session', httpOnly: true, sameSite: 'Strict', path: '/inbox' });
    expect(cookie!.value).not.toContain(api.tokens.operator.slice(16));
    await page.goto(`${api.url}/inbox?agent=${agentId}`); // this test's items only (the suite shares the database)
    const card = page.locator(`article[data-request-id="${requestId}"]`);
    await expect(card.locator('.tool').textContent()).resolves.toBe('shell_execute');
    await expect(card.locator('pre.command').textContent()).resolves.toBe(`touch ${file}`);
    await expect(card.locator('.reason').textContent()).resolves.toMatch(/^Why it needs you: .+/);
    await expect(card.locator('.words').textContent()).resolves.toBe(`The agent said: ${words}`);
    await expect(card.locator('.age').textContent()).resolves.toMatch(/^waiting \d+ (s|min)$/);
    await expect(card.locator('a.run').getAttribute('href')).resolves.toMatch(
      /^http:\/\/ui\.example:8233\/namespaces\/default\/workflows\/task-.+-r1$/,
    );
    const review = page.locator(`article[data-task-id="${other}"]`);
    await expect(review.locator('.words').textContent()).resolves.toBe(
      'Submission: Drafted the release notes: three sections, 400 words.',
    );
    await expect(review.locator('a.run').first().getAttribute('href')).resolves.toBe(
      `http://ui.example:8233/namespaces/default/workflows/task-${other}`,
    );
    mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    expect(existsSync(path.join(h.workspaceDir, file))).toBe(false);

    // Forged posts from a page on another port of this host (same site: the cookie goes along) and
    // from another site (it does not): both refused, and the request is still pending.
    const evil = createServer((_req, res) =>
      res
        .writeHead(200, { 'content-type': 'text/html' })
        .end(forgery(`${api.url}/inbox/approvals/${encodeURIComponent(requestId)}`)),
    );
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    try {
      const evilPort = (evil.address() as AddressInfo).port;
      for (const attacker of [`http://127.0.0.1:${evilPort}/`, `http://localhost:${evilPort}/`]) {
        const tab = await context.newPage();
        const [answer] = await Promise.all([
          tab.waitForResponse((r) => r.url().startsWith(`${api.url}/inbox/approvals/`)),
          tab.goto(attacker),
        ]);
        expect([attacker, answer.status()]).toEqual([attacker, 403]);
        await tab.close();
      }
    } finally {
      evil.close();
    }
    // Our own origin but no form token (a script that read nothing of the page): refused too.
    const noToken = await fetch(`${api.url}/inbox/approvals/${encodeURIComponent(requestId)}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        origin: api.url,
        cookie: `da_session=${cookie!.value}`,
      },
      body: 'decision=rejected',
    });
    expect([noToken.status, ((await noToken.json()) as { error: { code: string } }).error.code]).toEqual([
      403,
      'csrf_token_invalid',
    ]);
    expect(
      (await h.db.db.selectFrom('approvals').select('status').where('id', '=', requestId).executeTakeFirstOrThrow())
        .status,
    ).toBe('pending');

    // A second tab showing the same request, to decide it again once it is stale.
    const stale = await context.newPage();
    await stale.goto(`${api.url}/inbox?agent=${agentId}`);
    await card.locator('input[name="comment"]').fill('Fine, keep it in the workspace');
    await card.locator('button[value="approved"]').click();
    await page.waitForURL(new RegExp(`/inbox\\?agent=${agentId}&notice=`));
    await expect(page.locator('.notice').textContent()).resolves.toBe('Approved: the task continues.');

    await inReview(taskId);
    expect(existsSync(path.join(h.workspaceDir, file))).toBe(true);
    const row = await h.db.db.selectFrom('approvals').selectAll().where('id', '=', requestId).executeTakeFirstOrThrow();
    expect(row).toMatchObject({
      status: 'approved',
      decided_by: expect.stringMatching(/^operator-/),
      comment: 'Fine, keep it in the workspace',
    });

    // A second decision (another tab, a stale page) is refused and said so on the page.
    await stale.locator(`article[data-request-id="${requestId}"] button[value="rejected"]`).click();
    await stale.waitForURL(new RegExp(`/inbox\\?agent=${agentId}&problem=`));
    await expect(stale.locator('.problem').textContent()).resolves.toMatch(
      /^Not recorded: approval request .* is already approved$/,
    );

    await page.goto(`${api.url}/inbox?agent=${agentId}`);
    expect(await page.locator(`article[data-request-id="${requestId}"]`).count()).toBe(0);
    const mine = page.locator(`article[data-task-id="${taskId}"]`);
    await expect(mine.locator('.words').textContent()).resolves.toBe(
      `Submission: Created ${file} and wrote the report.`,
    );
    await mine.locator('button[value="accept"]').click();
    await page.waitForURL(new RegExp(`/inbox\\?agent=${agentId}&notice=`));
    expect((await h.client.result(taskId)).state).toBe('completed');
    await h.client.review(other, { decision: 'accept', decidedBy: 'test' });

    // Signing out ends the session on the server: the old cookie opens nothing.
    await page.locator('button.link').click();
    await page.waitForURL(`${api.url}/inbox/sign-in`);
    const replayed = await fetch(`${api.url}/inbox`, {
      headers: { cookie: `da_session=${cookie!.value}` },
      redirect: 'manual',
    });
    expect([replayed.status, replayed.headers.get('location')]).toEqual([303, '/inbox/sign-in']);
  });

  test('behind a TLS-terminating proxy (API_TRUST_PROXY) the session cookie is Secure and the origin check uses https', async () => {
    const signIn = (url: string, origin: string) =>
      fetch(`${url}/inbox/sign-in`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin, 'x-forwarded-proto': 'https' },
        body: `token=${encodeURIComponent(api.tokens.operator)}`,
      });
    const proxied = await startTestApi(h, { trustProxy: true });
    try {
      const host = new URL(proxied.url).host;
      const answer = await signIn(proxied.url, `https://${host}`);
      expect([answer.status, answer.headers.get('set-cookie')]).toEqual([
        303,
        expect.stringMatching(/^da_session=[^;]+; HttpOnly; SameSite=Strict; Path=\/inbox; Max-Age=\d+; Secure$/),
      ]);
    } finally {
      await proxied.close();
    }
    // Without trusting a proxy, a forwarded header changes nothing: the https origin is not ours.
    expect((await signIn(api.url, `https://${new URL(api.url).host}`)).status).toBe(403);
  });

  test('no session, a token in the URL, or a token below operator cannot open or post to the inbox', async () => {
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${api.url}/inbox`);
    expect(page.url()).toBe(`${api.url}/inbox/sign-in`);
    expect((await page.goto(`${api.url}/inbox?token=${api.tokens.operator}`))?.status()).toBe(400);
    await page.goto(`${api.url}/inbox/sign-in`);
    await page.locator('input[name="token"]').fill(api.tokens.service);
    const [refused] = await Promise.all([
      page.waitForResponse((r) => r.url() === `${api.url}/inbox/sign-in` && r.request().method() === 'POST'),
      page.locator('button[type="submit"]').click(),
    ]);
    expect(refused.status()).toBe(403);
    const post = await fetch(`${api.url}/inbox/approvals/anything`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: api.url },
      body: 'decision=approved',
    });
    expect(post.status).toBe(401);
    // A machine with an operator token may still post (no cookie, so nothing to forge).
    const machine = await fetch(`${api.url}/inbox/approvals/no-such-request`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Bearer ${api.tokens.operator}` },
      body: 'decision=approved',
    });
    expect(machine.status).toBe(303);
  });
});
