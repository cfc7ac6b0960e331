import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createHarness, submitTurn, toolTurn, type Harness } from '../support/harness';
import { ScriptedAgents } from '../workflow/task-support';
import { startTestApi, type TestApi } from './api-support';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });

/**
 * Single sign-on to the inbox against a real OpenID Connect provider nobody here wrote (the certified
 * `oidc-provider` package, on loopback), in Chromium: the authorization code flow with PKCE, the
 * provider's `groups` claim mapped to a scope. A member of the operators' group lands in the inbox
 * under their provider identity; anyone else is refused; a replayed callback finishes nothing. An
 * approval policy's `@group` lets a person decide whose groups claim carries it.
 */
describe('inbox single sign-on through OpenID Connect', () => {
  let h: Harness;
  let api: TestApi;
  let browser: Browser;
  let provider: ChildProcessWithoutNullStreams;
  let agents: ScriptedAgents;

  beforeAll(async () => {
    h = await createHarness();
    agents = new ScriptedAgents(h.llm);
    await h.startWorker();
    const apiPort = await freePort();
    const providerPort = await freePort();
    const redirect = `http://127.0.0.1:${apiPort}/inbox/sso/callback`;
    provider = spawn(process.execPath, [
      path.join(__dirname, '../support/oidc-provider.mjs'),
      String(providerPort),
      redirect,
    ]);
    let providerErrors = '';
    provider.stderr.on('data', (c) => (providerErrors += String(c)));
    await new Promise<void>((resolve, reject) => {
      provider.once('exit', (code) => reject(new Error(`the OpenID provider exited (${code}): ${providerErrors}`)));
      createInterface({ input: provider.stdout }).once('line', () => resolve());
    });
    api = await startTestApi(h, {
      sso: {
        issuer: `http://127.0.0.1:${providerPort}`,
        clientId: 'durable-agents-inbox',
        clientSecret: 'inbox-test-secret',
        roleClaim: 'groups',
        roles: { operator: ['agents-operators'], read: ['readers'] },
      },
      port: apiPort,
    });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await api?.close();
    provider?.kill();
    await h?.close();
  });

  /** Through the provider's own login and consent pages, as `login`. Returns the page where the browser lands. */
  const signInAs = async (page: Page, login: string): Promise<Page> => {
    await page.goto(`${api.url}/inbox`);
    await page.locator('a.sso').click();
    await page.locator('input[name="login"]').fill(login);
    await page.locator('input[name="password"]').fill('any password');
    await page.locator('button[type="submit"]').click();
    await page.locator('button[type="submit"]').click(); // consent
    await page.waitForURL((url) => url.href.startsWith(api.url));
    return page;
  };

  test('a member of the operators group signs in with the provider and lands in the inbox under that identity', async () => {
    const context = await browser.newContext();
    const first = await context.newPage();
    const authorizations: URL[] = [];
    first.on('request', (r) => {
      if (r.url().includes('/auth?')) authorizations.push(new URL(r.url()));
    });
    const page = await signInAs(first, 'olivia');
    expect(page.url()).toBe(`${api.url}/inbox`);
    await expect(page.locator('.who').first().textContent()).resolves.toContain('Signed in as sso:olivia@example.test');
    const session = (await context.cookies()).find((c) => c.name === 'da_session');
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/inbox' });
    // The authorization code flow with PKCE: S256 challenge, state and nonce on the request.
    const [authorization] = authorizations;
    expect(['response_type', 'code_challenge_method'].map((k) => authorization?.searchParams.get(k))).toEqual([
      'code',
      'S256',
    ]);
    expect(['code_challenge', 'state', 'nonce'].every((k) => Boolean(authorization?.searchParams.get(k)))).toBe(true);
    await context.close();
  });

  test('someone outside the operators group is refused, and a replayed callback finishes nothing', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    let callback = '';
    page.on('request', (r) => {
      if (r.url().startsWith(`${api.url}/inbox/sso/callback`)) callback = r.url();
    });
    await signInAs(page, 'rita');
    await expect(page.locator('.problem').textContent()).resolves.toMatch(
      /rita@example\.test .* holds no role that may decide here/,
    );
    expect((await context.cookies()).some((c) => c.name === 'da_session')).toBe(false);
    expect(new URL(callback).searchParams.get('code')).toBeTruthy();
    const replay = await context.newPage();
    expect((await replay.goto(callback))?.status()).toBe(400);
    await context.close();
  });

  test("a policy's @group lets a person decide whose groups claim carries it; an operator token outside the group is refused", async () => {
    const file = `sso-group-${Date.now()}.txt`;
    const agentId = await h.createAgent({
      approvals: {
        groups: { 'release-managers': [] },
        policies: [{ toolClass: 'shell', approvers: ['@release-managers'], expireAfterMs: 600_000 }],
      },
    });
    const taskId = agents.task([toolTurn('shell_execute', { command: `touch ${file}` }), submitTurn('touched')]);
    await h.client.startTask({ agentId, taskId, title: 'Touch', description: 'needs a release manager' });
    const waiting = await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1);
    const requestId = waiting.pendingApprovals[0]!.requestId;

    const refused = await fetch(`${api.url}/v1/approvals/${encodeURIComponent(requestId)}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${api.tokens.operator}`, 'content-type': 'application/json' },
      body: JSON.stringify({ decision: 'approved' }),
    });
    expect(refused.status).toBe(409);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(
      /is not an allowed approver .*allowed now: a member of @release-managers/,
    );

    const context = await browser.newContext();
    const page = await signInAs(await context.newPage(), 'olivia');
    expect(await page.locator(`.queue li[data-request-id="${requestId}"]`).count()).toBe(1);
    await page.locator(`article[data-request-id="${requestId}"] button[value="approved"]`).click();
    await expect(page.locator('.notice').textContent()).resolves.toBe('Approved: the task continues.');
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(existsSync(path.join(h.workspaceDir, file))).toBe(true);
    const votes = await h.db.db
      .selectFrom('approval_events')
      .select(['kind', 'actor'])
      .where('request_id', '=', requestId)
      .where('kind', '=', 'approved')
      .execute();
    expect(votes).toEqual([{ kind: 'approved', actor: 'sso:olivia@example.test' }]);
    await context.close();
  }, 60_000);
});
