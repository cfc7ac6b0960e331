import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createHarness, type Harness } from '../support/harness';
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
 * under their provider identity; anyone else is refused; a replayed callback finishes nothing.
 */
describe('inbox single sign-on through OpenID Connect', () => {
  let h: Harness;
  let api: TestApi;
  let browser: Browser;
  let provider: ChildProcessWithoutNullStreams;

  beforeAll(async () => {
    h = await createHarness();
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
});
