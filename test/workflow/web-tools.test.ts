import http from 'node:http';
import zlib from 'node:zlib';
import type { AddressInfo } from 'node:net';
import { addressPolicy } from '../../activities/tools/web/address-policy';
import { configureWebTools, type ResolvedAddress, type WebToolsConfig } from '../../activities/tools/web/config';
import { fetchPage, WEB_FETCH_MAX_BYTES } from '../../activities/tools/web/fetch-page';
import { searchWeb } from '../../activities/tools/web/search';
import { toolsForAgent, toolsForScenario } from '../../activities/tools/registry';
import type { RecordedRequest } from '../fake-llm';
import { submitTurn, toolTurn } from '../support/harness';
import { lastToolResults, useScriptedHarness } from './task-support';

/** A loopback server that records every request it gets. */
async function serve(
  host: string,
  handler: http.RequestListener,
): Promise<{ origin: string; port: number; requests: string[]; close(): Promise<void> }> {
  const requests: string[] = [];
  const server = http.createServer((req, res) => {
    requests.push(`${req.headers.host} ${req.url}`);
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    origin: `http://${host}:${port}`,
    port,
    requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const ARTICLE = `<!doctype html><html><head><title>Durable retries</title></head><body>
<nav><a href="/">Home</a> <a href="/account">Your account</a></nav>
<article><h1>How activities are retried</h1><p>Temporal <strong>retries</strong> an activity until its policy gives up. See <a href="policy.html">the policy page</a>.</p>
<p>${'Each retry waits longer than the one before it, up to the maximum interval. '.repeat(6)}</p></article>
<footer>Cookie banner</footer></body></html>`;

/**
 * web_fetch and web_search through the task workflow: a real worker, the scripted model, pages served
 * from loopback (allowlisted here by the operator's setting), and the SSRF refusals: loopback without
 * the allowlist in every spelling, redirects to private addresses, and a DNS answer that changes
 * between the check and the connection. A canary server on 127.0.0.2 (never allowlisted) proves that
 * nothing refused was ever contacted.
 */
describe('web tools through the task workflow', () => {
  const { h, agents } = useScriptedHarness();
  let pages: Awaited<ReturnType<typeof serve>>;
  let canary: Awaited<ReturnType<typeof serve>>;
  /** The scripted DNS: each name's answers in order (the last one repeats), and every question asked. */
  const dns = new Map<string, ResolvedAddress[][]>();
  const asked: string[] = [];
  const resolve = async (hostname: string): Promise<ResolvedAddress[]> => {
    asked.push(hostname);
    const answers = dns.get(hostname);
    if (!answers) throw Object.assign(new Error(`no such host ${hostname}`), { code: 'ENOTFOUND' });
    return answers.length > 1 ? answers.shift()! : answers[0]!;
  };
  const v4 = (address: string): ResolvedAddress => ({ address, family: 4 });
  const configure = (allow: string[], extra: Partial<WebToolsConfig> = {}) =>
    configureWebTools({ fetchEnabled: true, policy: addressPolicy(allow), resolve, ...extra });

  /** 50 MB of zeros in about 50 KB of gzip: decompression must stop at the cap. */
  const bomb = zlib.gzipSync(Buffer.alloc(50 * 1024 * 1024));
  beforeAll(async () => {
    canary = await serve('127.0.0.2', (_req, res) =>
      res.end('<html><body><p>CANARY-INTERNAL-SECRET</p></body></html>'),
    );
    pages = await serve('127.0.0.1', (req, res) => {
      const url = new URL(req.url!, 'http://x');
      if (url.pathname === '/article')
        return void res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(ARTICLE);
      if (url.pathname === '/moved') return void res.writeHead(302, { location: '/article' }).end();
      if (url.pathname === '/to-metadata')
        return void res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/iam/' }).end();
      if (url.pathname === '/to-internal')
        return void res.writeHead(301, { location: `http://internal.test:${canary.port}/secret` }).end();
      if (url.pathname === '/to-mapped')
        return void res.writeHead(307, { location: `http://[::ffff:127.0.0.2]:${canary.port}/secret` }).end();
      if (url.pathname === '/bomb')
        return void res.writeHead(200, { 'content-type': 'text/plain', 'content-encoding': 'gzip' }).end(bomb);
      if (url.pathname === '/hang')
        return void res.writeHead(200, { 'content-type': 'text/plain' }).write('the first bytes, then nothing');
      if (url.pathname === '/brave') {
        if (req.headers['x-subscription-token'] !== 'bsa-test-token')
          return void res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"bad token"}');
        return void res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            web: {
              results: [
                {
                  title: 'Temporal docs',
                  url: 'https://docs.temporal.io/retry-policies',
                  description: 'How <strong>retries</strong> &amp; backoff work',
                },
              ],
            },
          }),
        );
      }
      if (url.pathname === '/search') {
        const q = url.searchParams.get('q');
        return void res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            query: q,
            results: [
              { title: 'Retry policies', url: `${pages.origin}/article`, content: `About <b>${q}</b>` },
              { title: 'Not a web page', url: 'file:///etc/passwd', content: 'x' },
            ],
          }),
        );
      }
      res.writeHead(404, { 'content-type': 'text/plain' }).end('no such page');
    });
  });
  afterAll(async () => {
    configureWebTools(undefined);
    await pages.close();
    await canary.close();
  });
  beforeEach(() => {
    dns.clear();
    asked.length = 0;
    canary.requests.length = 0;
  });

  const offeredTools = (request: RecordedRequest) =>
    ((request.body.tools ?? []) as Array<{ name: string }>).map((t) => t.name);

  /** Runs a task whose model calls the given tools in order, then submits; answers the tool results in order and the requests. */
  async function runCalls(
    calls: Array<[string, unknown]>,
    config: Record<string, unknown> = { permissions: { canCallExternalTools: true } },
  ) {
    const agentId = await h.createAgent(config);
    const taskId = agents.task([...calls.map(([name, input]) => toolTurn(name, input)), submitTurn('read the pages')]);
    await h.client.startTask({
      agentId,
      taskId,
      title: 'Research retries',
      description: 'Read about retries on the web',
    });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    const requests = agents.requests(taskId);
    return { results: calls.map((_, i) => lastToolResults(requests[i + 1]!)[0]!), requests };
  }

  test('an allowlisted loopback page is read as Markdown through the worker, redirects followed', async () => {
    configure(['127.0.0.1/32']);
    dns.set('docs.test', [[v4('127.0.0.1')]]);
    const { results, requests } = await runCalls([
      ['web_fetch', { url: `http://docs.test:${pages.port}/article` }],
      ['web_fetch', { url: `${pages.origin}/moved` }],
      ['web_fetch', { url: `${pages.origin}/missing` }],
    ]);
    expect(offeredTools(requests[0]!)).toContain('web_fetch');
    // No search provider is configured: web_search is not offered.
    expect(offeredTools(requests[0]!)).not.toContain('web_search');
    const [article, moved, missing] = results;
    expect(article!.isError).toBe(false);
    expect(article!.text).toContain(`Fetched http://docs.test:${pages.port}/article (HTTP 200).`);
    expect(article!.text).toContain('Title: Durable retries');
    expect(article!.text).toContain('## How activities are retried');
    expect(article!.text).toContain('Temporal **retries** an activity');
    expect(article!.text).toContain(`[the policy page](http://docs.test:${pages.port}/policy.html)`);
    expect(article!.text).toMatch(/<untrusted source="http:\/\/docs\.test:\d+\/article">/);
    expect(article!.text).not.toMatch(/Your account|Cookie banner/);
    expect(moved!.isError).toBe(false);
    expect(moved!.text).toContain(`Fetched ${pages.origin}/article (redirected from ${pages.origin}/moved)`);
    expect(missing!.isError).toBe(true);
    expect(missing!.text).toContain('answered HTTP 404');
    // The host name was resolved once, and the request went to the page server with the name as its Host.
    expect(asked).toEqual(['docs.test']);
    expect(pages.requests).toContain(`docs.test:${pages.port} /article`);
  });

  test('loopback without the allowlist is refused in every spelling, and nothing is contacted', async () => {
    configure([]);
    dns.set('localhost', [[v4('127.0.0.1')]]);
    const before = pages.requests.length;
    const spellings = [
      `${pages.origin}/article`,
      `http://2130706433:${pages.port}/article`,
      `http://0x7f.0.0.1:${pages.port}/article`,
      `http://0177.0.0.1:${pages.port}/article`,
      `http://127.1:${pages.port}/article`,
      `http://[::ffff:127.0.0.1]:${pages.port}/article`,
      `http://[::1]:${pages.port}/article`,
      `http://localhost:${pages.port}/article`,
    ];
    const { results } = await runCalls(spellings.map((url) => ['web_fetch', { url }]));
    for (const [i, result] of results.entries()) {
      expect([spellings[i], result.isError]).toEqual([spellings[i], true]);
      expect(result.text).toMatch(
        /^web_fetch refused: blocked: .* is a loopback address .*Nothing was sent there\. An operator can allow a range with WEB_FETCH_ALLOW\./,
      );
    }
    expect(results[7]!.text).toContain('(localhost resolves to 127.0.0.1)');
    expect(pages.requests.length).toBe(before);
  });

  test('a redirect to a private or metadata address is refused before anything is sent there', async () => {
    configure(['127.0.0.1/32']);
    dns.set('internal.test', [[v4('127.0.0.2')]]);
    const { results } = await runCalls([
      ['web_fetch', { url: `${pages.origin}/to-metadata` }],
      ['web_fetch', { url: `${pages.origin}/to-internal` }],
      ['web_fetch', { url: `${pages.origin}/to-mapped` }],
    ]);
    expect(results[0]!.isError).toBe(true);
    expect(results[0]!.text).toContain(
      'blocked: http://169.254.169.254 is a link-local address (cloud metadata lives here)',
    );
    expect(results[1]!.isError).toBe(true);
    expect(results[1]!.text).toContain(
      `blocked: http://internal.test:${canary.port} is a loopback address (127.0.0.2) (internal.test resolves to 127.0.0.2)`,
    );
    expect(results[2]!.isError).toBe(true);
    expect(results[2]!.text).toMatch(/blocked: .* is a loopback address \(127\.0\.0\.2, written as ::ffff:7f00:2\)/);
    expect(results.map((r) => r.text).join('\n')).not.toContain('CANARY');
    expect(canary.requests).toEqual([]);
  });

  test('a DNS answer that changes between check and connect changes nothing: the checked address is the one connected to', async () => {
    configure(['127.0.0.1/32']);
    // Rebinding: the first answer passes the check; any later question would get the internal address.
    dns.set('rebind.test', [[v4('127.0.0.1')], [v4('127.0.0.2')]]);
    // An answer that mixes an allowed and a refused address is refused whole.
    dns.set('mixed.test', [[v4('127.0.0.1'), v4('127.0.0.2')]]);
    const { results } = await runCalls([
      ['web_fetch', { url: `http://rebind.test:${pages.port}/article` }],
      // The next call resolves again (a new call is a new check) and now gets the refused address.
      ['web_fetch', { url: `http://rebind.test:${canary.port}/article` }],
      ['web_fetch', { url: `http://mixed.test:${pages.port}/article` }],
    ]);
    expect(results[0]!.isError).toBe(false);
    expect(results[0]!.text).toContain('## How activities are retried');
    expect(results[1]!.isError).toBe(true);
    expect(results[1]!.text).toContain('(rebind.test resolves to 127.0.0.2)');
    expect(results[2]!.isError).toBe(true);
    expect(results[2]!.text).toContain('(mixed.test resolves to 127.0.0.2)');
    expect(asked).toEqual(['rebind.test', 'rebind.test', 'mixed.test']);
    expect(canary.requests).toEqual([]);
  });

  test('fetchPage itself: one resolution per hop, a redirect on the same host is checked again', async () => {
    // The first hop passes, the redirect's hop re-resolves the same name and gets the internal address.
    dns.set('hop.test', [[v4('127.0.0.1')], [v4('127.0.0.2')]]);
    const policy = addressPolicy(['127.0.0.1/32']);
    await expect(
      fetchPage(`http://hop.test:${pages.port}/moved`, { policy, resolve, signal: new AbortController().signal }),
    ).rejects.toThrow(
      /blocked: http:\/\/hop\.test:\d+ is a loopback address \(127\.0\.0\.2\) \(hop\.test resolves to 127\.0\.0\.2\)/,
    );
    expect(asked).toEqual(['hop.test', 'hop.test']);
    await expect(
      fetchPage('file:///etc/passwd', { policy, resolve, signal: new AbortController().signal }),
    ).rejects.toThrow('file: URLs are not fetched: only http and https');
    await expect(
      fetchPage(`http://user:pw@127.0.0.1:${pages.port}/`, { policy, resolve, signal: new AbortController().signal }),
    ).rejects.toThrow('credentials');
    expect(canary.requests).toEqual([]);
  });

  test('web_search is offered once a provider is configured, and answers through it; an agent without canCallExternalTools gets neither tool', async () => {
    configure(['127.0.0.1/32'], { search: { kind: 'searxng', url: `${pages.origin}/search` } });
    expect([...toolsForScenario('task').keys()]).toEqual(expect.arrayContaining(['web_fetch', 'web_search']));
    const { results, requests } = await runCalls([['web_search', { query: 'activity retry policy', count: 5 }]]);
    expect(offeredTools(requests[0]!)).toEqual(expect.arrayContaining(['web_fetch', 'web_search']));
    expect(results[0]!.isError).toBe(false);
    expect(results[0]!.text).toContain('1 results for "activity retry policy" (searxng)');
    expect(results[0]!.text).toContain(`1. Retry policies\n   ${pages.origin}/article\n   About activity retry policy`);
    expect(results[0]!.text).not.toContain('file:///');
    expect(pages.requests.some((r) => r.includes('/search?q=activity+retry+policy&format=json'))).toBe(true);

    // Withheld unless granted: an agent whose config says nothing gets neither tool either.
    expect([...toolsForAgent('task', {}).keys()]).not.toContain('web_fetch');
    const withheld = toolsForAgent('task', { permissions: { canCallExternalTools: false } });
    expect([...withheld.keys()].filter((n) => n.startsWith('web_'))).toEqual([]);
    const denied = await runCalls([['web_fetch', { url: `${pages.origin}/article` }]], {
      permissions: { canCallExternalTools: false },
    });
    expect(offeredTools(denied.requests[0]!).filter((n) => n.startsWith('web_'))).toEqual([]);
    expect(denied.results[0]!.isError).toBe(true);
    expect(denied.results[0]!.text).toMatch(/Unknown tool/);
  });

  test('size and time caps: a decompression bomb is cut at the byte cap, a server that stops sending times out', async () => {
    const policy = addressPolicy(['127.0.0.1/32']);
    const signal = new AbortController().signal;
    const cut = await fetchPage(`${pages.origin}/bomb`, { policy, resolve, signal });
    expect([cut.truncated, cut.body.length]).toEqual([true, WEB_FETCH_MAX_BYTES]);
    const started = Date.now();
    await expect(fetchPage(`${pages.origin}/hang`, { policy, resolve, signal, timeoutMs: 500 })).rejects.toThrow(
      `${pages.origin} did not answer within 0.5 s`,
    );
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  test('the Brave provider: its token header, its answer shape, and a refusal reported with the status', async () => {
    const signal = new AbortController().signal;
    const brave = { kind: 'brave' as const, url: `${pages.origin}/brave`, apiKey: 'bsa-test-token' };
    expect(await searchWeb(brave, 'retries', 5, signal)).toEqual([
      { title: 'Temporal docs', url: 'https://docs.temporal.io/retry-policies', snippet: 'How retries & backoff work' },
    ]);
    expect(pages.requests).toContain(`${pages.origin.slice(7)} /brave?q=retries&count=5`);
    await expect(searchWeb({ ...brave, apiKey: 'wrong' }, 'retries', 5, signal)).rejects.toThrow(
      'the brave search provider answered HTTP 401: {"error":"bad token"}',
    );
    await expect(searchWeb({ kind: 'searxng', url: `${pages.origin}/missing` }, 'x', 5, signal)).rejects.toThrow(
      'the searxng search provider answered HTTP 404',
    );
  });

  test('a URL carrying a worker secret is denied before anything is sent', async () => {
    configure(['127.0.0.1/32']);
    process.env.WEB_TEST_API_KEY = 'wsk-0123456789abcdef';
    try {
      const before = pages.requests.length;
      const { results } = await runCalls([['web_fetch', { url: `${pages.origin}/article?k=wsk-0123456789%61bcdef` }]]);
      expect(results[0]!.isError).toBe(true);
      expect(results[0]!.text).toMatch(/contains a secret of the worker/);
      expect(pages.requests.length).toBe(before);
    } finally {
      delete process.env.WEB_TEST_API_KEY;
    }
  });
});
