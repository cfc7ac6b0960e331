import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { context, propagation, ROOT_CONTEXT, trace, TraceFlags } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { sql } from 'kysely';
import { chromium, type Browser } from 'playwright-core';
import type { RecordedRequest, ScriptedResponse } from '../fake-llm';
import { createHarness, submitTurn, textTurn, toolTurn, type Harness } from '../support/harness';
import { bodyText, isReflection, offersTools } from '../workflow/task-support';
import { startTestApi, type TestApi } from './api-support';

/** Debian's Chromium (`apt-get install chromium`; .ci/run installs it when missing). */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** The screenshots the docs show (docs/run-viewer.md). */
const SCREENSHOT = path.resolve('docs', 'run-viewer.png');
const FORK_SCREENSHOT = path.resolve('docs', 'run-viewer-fork.png');
const UI = 'http://ui.example:8233';
/** A credential in a tool call's arguments: the worker redacts it, and the page must never show it. */
const SECRET = 'sk-ant-api03-runviewer0123456789abcdef';
const HOSTILE = '<img src=x onerror=alert(1)>';
const TASK_ID_PATTERN = /\[TASK EXECUTION — Task ID: ([^\]\s]+)\]/;
const CHILD_PATTERN = /SUBTASK(rv[a-z0-9]+)/;
/** The trace the source task is started in (the caller's `traceparent`, as an HTTP request would bring it). */
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';

/** The values of one data attribute, in document order. */
const attrs = (html: string, name: string): string[] =>
  [...html.matchAll(new RegExp(`${name}="([^"]*)"`, 'g'))].map((m) => m[1]!);
/** The HTML of one session's steps (the page lists a round's own session, then its sub-agents'). */
const sessionHtml = (html: string, sessionId: string): string => {
  const start = html.indexOf(`data-session="${sessionId}"`);
  if (start < 0) throw new Error(`no session ${sessionId} on the page`);
  const next = html.indexOf('data-session="', start + 1);
  return html.slice(start, next < 0 ? undefined : next);
};

/**
 * The run viewer over HTTP and in headless Chromium: a real task (a file write, a refused call with a
 * secret in its arguments, a sub-agent, a shell command a person approves, the submission) and a fork
 * of it, run by the worker against the fake LLM server; the page shows each call in order with its
 * ledger state and cost, hides the secret, escapes the model's HTML, answers another organisation as
 * an unknown id and needs a sign-in.
 */
describe('run viewer', () => {
  let h: Harness;
  let api: TestApi;
  let browser: Browser;
  let forkRoot: string;
  const previousRoot = process.env.AGENTS_FORK_WORKSPACE_ROOT;
  const scripts = new Map<string, ScriptedResponse[]>();
  const sourceId = `rv-${randomUUID().slice(0, 8)}`;
  const forkId = `${sourceId}-fork`;
  const child = `rv${randomUUID().replace(/-/g, '').slice(0, 10)}`;
  let agentId: string;

  /** The task's requests by the task id in its prompt, the sub-agent's by its brief's key. */
  function respond(request: RecordedRequest): ScriptedResponse {
    if (isReflection(request) || !offersTools(request)) return textTurn('Summary.');
    const messages = JSON.stringify(request.body.messages ?? '');
    const key = TASK_ID_PATTERN.exec(messages)?.[1] ?? CHILD_PATTERN.exec(messages)?.[1];
    const next = key ? scripts.get(key)?.shift() : undefined;
    return next ?? { kind: 'error', status: 400, message: `no script for ${key ?? bodyText(request).slice(0, 80)}` };
  }

  beforeAll(async () => {
    forkRoot = mkdtempSync(path.join(os.tmpdir(), 'da-run-viewer-forks-'));
    process.env.AGENTS_FORK_WORKSPACE_ROOT = forkRoot;
    h = await createHarness();
    h.llm.setResponder(respond);
    await h.startWorker();
    api = await startTestApi(h, { temporalUiUrl: UI });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });

    scripts.set(sourceId, [
      toolTurn('file_write', { path: 'notes.md', content: `notes ${HOSTILE}\n` }, `I will write notes ${HOSTILE}.`),
      toolTurn('file_read', { token: SECRET }),
      toolTurn('spawn_subagent', { task: `SUBTASK${child}: count the words in notes.md` }),
      toolTurn('shell_execute', { command: 'touch marker.txt' }),
      submitTurn('notes written, words counted, marker made'),
    ]);
    scripts.set(child, [toolTurn('file_read', { path: 'notes.md' }), textTurn('3 words')]);
    scripts.set(forkId, [toolTurn('file_read', { path: 'notes.md' }), submitTurn('the fork read its notes')]);

    agentId = await h.createAgent({ model: 'claude-sonnet-4-6' });
    // Started inside a caller's trace: the client's tracing interceptor puts it in the start's header.
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const caller = trace.setSpanContext(ROOT_CONTEXT, {
      traceId: TRACE_ID,
      spanId: '00f067aa0ba902b7',
      traceFlags: TraceFlags.SAMPLED,
    });
    await context.with(caller, () =>
      h.client.startTask({
        agentId,
        taskId: sourceId,
        title: 'Notes with a marker',
        description: 'write notes.md, count its words, make a marker file',
        costBudgetUsd: 0.01,
        approvalTimeoutMs: 120_000,
      }),
    );
    const waiting = await h.waitForStatus(sourceId, (s) => s.pendingApprovals.length === 1, 60_000);
    const decided = await api.call('POST', `/v1/approvals/${waiting.pendingApprovals[0]!.requestId}`, {
      body: { decision: 'approved', comment: 'a marker is harmless' },
    });
    expect(decided.status).toBe(200);
    await h.waitForStatus(sourceId, (s) => s.state === 'review', 60_000);

    const fork = await api.call('POST', `/v1/tasks/${sourceId}/fork`, {
      body: { at: 1, taskId: forkId, overrides: { model: 'claude-haiku-4-5' } },
    });
    expect(fork.status).toBe(201);
    await h.waitForStatus(forkId, (s) => s.state === 'review', 60_000);
  });
  afterAll(async () => {
    propagation.disable();
    context.disable();
    await browser?.close();
    await api?.close();
    await h?.close();
    rmSync(forkRoot, { recursive: true, force: true });
    if (previousRoot === undefined) delete process.env.AGENTS_FORK_WORKSPACE_ROOT;
    else process.env.AGENTS_FORK_WORKSPACE_ROOT = previousRoot;
  });

  test('every call in order, with its ledger state, cost, sandbox status and approval trail', async () => {
    const page = await api.call('GET', `/runs/${sourceId}`, { token: api.tokens.read });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const html = page.body as string;

    const round = sessionHtml(html, `task_${sourceId}_r1`);
    expect(attrs(round, 'data-tool')).toEqual([
      'file_write',
      'file_read',
      'spawn_subagent',
      'shell_execute',
      'task_submit_review',
    ]);
    expect(attrs(round, 'data-ledger')).toEqual(['committed', 'not run', 'committed', 'committed', 'committed']);
    expect(attrs(round, 'data-step')).toEqual([0, 1, 2, 3, 4].map((t) => `assistant-a1-t${t}`));
    expect(attrs(round, 'data-stop')).toEqual(['tool_use', 'tool_use', 'tool_use', 'tool_use', 'tool_use']);
    // The sub-agent's own session, below its round, with its workflow in Temporal.
    const sub = sessionHtml(html, `sub_task-${sourceId}-r1_1`);
    expect(attrs(sub, 'data-tool')).toEqual(['file_read']);
    expect(attrs(sub, 'data-ledger')).toEqual(['committed']);
    expect(html).toContain(`${UI}/namespaces/default/workflows/task-${sourceId}-r1-sub-1`);

    // Every usage row of the task is on the page once, and the costs add up to them.
    const usage = await sql<{ calls: string; cost: string }>`
      select count(*) as calls, coalesce(sum(cost_usd), 0) as cost from llm_calls where task_id = ${sourceId}`.execute(
      h.db.db,
    );
    const costs = attrs(html, 'data-cost-usd').map(Number);
    expect(costs).toHaveLength(Number(usage.rows[0]!.calls));
    expect(costs.every((c) => c > 0)).toBe(true);
    expect(costs.reduce((a, b) => a + b, 0)).toBeCloseTo(Number(usage.rows[0]!.cost), 9);
    expect(Number(attrs(html, 'data-total-cost-usd')[0])).toBeCloseTo(Number(usage.rows[0]!.cost), 9);

    // What the prompt held and what the cache served, as recorded (the fake reports 100 + 50 read + 10 written).
    expect(round).toMatch(/<td title="uncached 100">160<\/td><td>50<\/td><td>10<\/td><td>20<\/td>/);
    expect(round).toContain('exit code 0');
    expect(round).toMatch(/data-approval="approved"><b>approved<\/b> by operator-[^:]+: a marker is harmless/);
    // The model's HTML is text; the secret in the refused call's arguments never reaches the page.
    expect(html).not.toContain(HOSTILE);
    expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;');
    expect(html).not.toContain(SECRET);
    expect(round).toContain('[REDACTED');
    // Spend against the budget, drawn on the server; links to the task's and the round's workflows.
    expect(html).toMatch(/<svg [^>]*aria-label="spend over time against the budget"/);
    expect(attrs(html, 'data-budget')).toEqual(['0.01']);
    expect(attrs(html, 'data-series')).toEqual(
      expect.arrayContaining(['total', 'this task (its rounds)', 'sub-agent r1-sub-1']),
    );
    expect(html).toContain(`${UI}/namespaces/default/workflows/task-${sourceId}"`);
    expect(html).toContain(`${UI}/namespaces/default/workflows/task-${sourceId}-r1"`);
    expect(html).toContain(`href="/runs/${forkId}"`);
    expect(html).toContain(`<code class="trace">${TRACE_ID}</code>`);
  });

  test("another organisation's task answers as an unknown one; a browser must sign in", async () => {
    const acme = await api.orgToken('acme', 'read');
    for (const prefix of ['/runs/', '/inbox/runs/']) {
      const other = await api.call('GET', `${prefix}${sourceId}`, { token: acme });
      const unknown = await api.call('GET', `${prefix}no-such-task`, { token: acme });
      expect([other.status, other.body.error.code]).toEqual([404, 'task_not_found']);
      expect([unknown.status, unknown.body.error.code]).toEqual([404, 'task_not_found']);
      expect(other.body.error.message.replace(sourceId, 'X')).toBe(
        unknown.body.error.message.replace('no-such-task', 'X'),
      );
    }
    expect((await api.call('GET', `/runs/${sourceId}`, { token: api.platformToken })).status).toBe(200);

    // No token: a browser goes to the inbox's copy of the page, and without a session on to the sign-in.
    const bare = await fetch(`${api.url}/runs/${sourceId}`, { redirect: 'manual' });
    expect([bare.status, bare.headers.get('location')]).toEqual([303, `/inbox/runs/${sourceId}`]);
    const noSession = await fetch(`${api.url}/inbox/runs/${sourceId}`, { redirect: 'manual' });
    expect([noSession.status, noSession.headers.get('location')]).toEqual([303, '/inbox/sign-in']);
    const forged = await fetch(`${api.url}/runs/${sourceId}`, { headers: { authorization: 'Bearer da_nope' } });
    expect(forged.status).toBe(401);

    // Signed in (the inbox's session cookie): the page.
    const signIn = await fetch(`${api.url}/inbox/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: api.url },
      body: new URLSearchParams({ token: api.tokens.operator }).toString(),
    });
    const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
    const signedIn = await fetch(`${api.url}/inbox/runs/${sourceId}`, { headers: { cookie } });
    expect(signedIn.status).toBe(200);
    const html = await signedIn.text();
    expect(html).toContain('Notes with a marker');
    // Links to other runs stay behind the same sign-in.
    expect(html).toContain(`href="/inbox/runs/${forkId}"`);
  });

  test('a fork: what differs from its source, call by call', async () => {
    const page = await api.call('GET', `/runs/${forkId}`, { token: api.tokens.read });
    expect(page.status).toBe(200);
    const html = page.body as string;
    expect(html).toContain(`Fork of <a href="/runs/${sourceId}">${sourceId}</a> at step 1`);
    const steps = [...html.matchAll(/data-fork-step="(\d+)">([\s\S]*?)<\/tr>/g)].map((m) => [
      Number(m[1]),
      /class="verdict">([^<]*)</.exec(m[2]!)![1],
    ]);
    expect(steps).toEqual([
      [1, 'copied'],
      [2, 'model claude-sonnet-4-6 → claude-haiku-4-5; other calls'],
      [3, 'model claude-sonnet-4-6 → claude-haiku-4-5; other calls'],
      [4, 'the fork ended before this step'],
      [5, 'the fork ended before this step'],
    ]);
    const calls = [...html.matchAll(/data-fork-call="(\d+)" data-outcome="([^"]*)">([\s\S]*?)<\/tr>/g)].map((m) => [
      Number(m[1]),
      m[2],
      /class="verdict">([^<]*)</.exec(m[3]!)![1],
    ]);
    expect(calls).toEqual([
      [0, 'copied', 'same call, same result'],
      [1, 'executed', 'another call'],
      [2, 'executed', 'another call'],
      [3, '', 'the fork made no call here'],
      [4, '', 'the fork made no call here'],
    ]);
  });

  test('in Chromium: sign in, open the run and its fork, see the calls and the chart', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${api.url}/runs/${sourceId}`);
    expect(page.url()).toBe(`${api.url}/inbox/sign-in`);
    await page.locator('input[name="token"]').fill(api.tokens.operator);
    await Promise.all([page.waitForURL(`${api.url}/inbox`), page.locator('button[type="submit"]').click()]);
    // The inbox's review card links to the run (this test's agent only: the suite shares the database).
    await page.goto(`${api.url}/inbox?agent=${agentId}`);
    await Promise.all([
      page.waitForURL(`${api.url}/inbox/runs/${sourceId}`),
      page.locator(`article[data-task-id="${sourceId}"] a.calls`).click(),
    ]);
    // The token's address, opened in the browser, lands on the same page.
    await page.goto(`${api.url}/runs/${sourceId}`);
    expect(page.url()).toBe(`${api.url}/inbox/runs/${sourceId}`);

    await expect(page.locator('h1').textContent()).resolves.toBe('Run · Notes with a marker');
    await expect(page.locator('svg.spend-chart').isVisible()).resolves.toBe(true);
    const round = page.locator(`[data-session="task_${sourceId}_r1"]`);
    await expect(round.locator('tr.tool-call td:first-child b').allTextContents()).resolves.toEqual([
      'file_write',
      'file_read',
      'spawn_subagent',
      'shell_execute',
      'task_submit_review',
    ]);
    await expect(round.locator('.ledger').allTextContents()).resolves.toEqual([
      'committed',
      'not run',
      'committed',
      'committed',
      'committed',
    ]);
    await expect(page.getByText(HOSTILE).first().isVisible()).resolves.toBe(true);
    await expect(page.locator('img').count()).resolves.toBe(0);
    await expect(page.locator('.approval').first().textContent()).resolves.toMatch(/approved by operator-/);
    await page.screenshot({ path: SCREENSHOT, fullPage: true });

    await page.locator(`a[href="/inbox/runs/${forkId}"]`).first().click();
    await page.waitForURL(`${api.url}/inbox/runs/${forkId}`);
    await expect(page.locator('#fork').textContent()).resolves.toBe(`Fork of ${sourceId} at step 1`);
    await expect(page.locator('table.fork-calls tr[data-fork-call] td.verdict').allTextContents()).resolves.toEqual([
      'same call, same result',
      'another call',
      'another call',
      'the fork made no call here',
      'the fork made no call here',
    ]);
    await page.locator('#fork').scrollIntoViewIfNeeded();
    await page.screenshot({ path: FORK_SCREENSHOT, fullPage: true });
    await context.close();
  });
});
