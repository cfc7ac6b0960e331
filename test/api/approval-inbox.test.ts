import { existsSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createToken } from '../../api/tokens';
import { createHarness, submitTurn, toolTurn, type Harness } from '../support/harness';
import { ScriptedAgents } from '../workflow/task-support';
import { eventually } from '../support/eventually';
import { startTestApi, type TestApi } from './api-support';

/** Debian's Chromium (`apt-get install chromium`; .ci/run installs it when missing). */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * Approvals under a policy as people see them, in headless Chromium and through the JSON API: a
 * reminder, then an escalation to the on-call person, then their decision, each in the trail shown on
 * the card; the "what it waits for" line and the on-call person's own queue; a delegation from the page.
 */
describe('approval policies in the inbox (headless Chromium) and the API', () => {
  let h: Harness;
  let api: TestApi;
  let agents: ScriptedAgents;
  let browser: Browser;
  let oncall: { name: string; token: string };

  beforeAll(async () => {
    h = await createHarness();
    agents = new ScriptedAgents(h.llm);
    await h.startWorker();
    api = await startTestApi(h);
    const name = `oncall-${Date.now()}`;
    oncall = { name, token: (await createToken(h.db.db, name, 'operator')).token };
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await api.close();
    await h.close();
  });

  async function signIn(token: string): Promise<Page> {
    const page = await (await browser.newContext({ viewport: { width: 1000, height: 1200 } })).newPage();
    await page.goto(`${api.url}/inbox/sign-in`);
    await page.locator('input[name="token"]').fill(token);
    await Promise.all([page.waitForURL(`${api.url}/inbox`), page.locator('button[type="submit"]').click()]);
    return page;
  }

  test('a reminder, an escalation and a decision by the escalation target: each in the trail, the waiting line and the queue', async () => {
    const file = `inbox-escalated-${Date.now()}.txt`;
    const agentId = await h.createAgent({
      approvals: {
        groups: { oncall: [oncall.name] },
        policies: [
          {
            name: 'deploy',
            toolClass: 'shell',
            approvers: ['away-person'],
            remind: { afterMs: 800 },
            escalate: { afterMs: 8_000, to: ['@oncall'] },
            expireAfterMs: 600_000,
          },
        ],
      },
    });
    const taskId = agents.task([toolTurn('shell_execute', { command: `touch ${file}` }), submitTurn('deployed')]);
    await h.client.startTask({ agentId, taskId, title: 'Deploy the site', description: 'needs a human' });
    const requestId = (await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1)).pendingApprovals[0]!
      .requestId;

    const page = await signIn(oncall.token);
    await page.goto(`${api.url}/inbox?agent=${agentId}`);
    const card = page.locator(`article[data-request-id="${requestId}"]`);
    await expect(card.locator('.waiting').textContent()).resolves.toMatch(
      /^Waits for: 0 of 1 approval; escalates to @oncall in \d+ s; expires in 10 min$/,
    );
    expect(await page.locator('.queue li').count()).toBe(0);
    const queued = await api.call('GET', `/v1/approvals?for=${oncall.name}`);
    expect(queued.body.approvals.map((a: { requestId: string }) => a.requestId)).not.toContain(requestId);

    await h.waitForStatus(taskId, (s) => s.pendingApprovals[0]?.wait?.escalated === true);
    // The trail rows are written by the activities before the round reports; the page reads them.
    await eventually(
      async () =>
        (await api.call('GET', `/v1/approvals/${encodeURIComponent(requestId)}/trail`)).body.events.length === 3
          ? true
          : undefined,
      'the escalation in the trail',
    );
    await page.reload();
    await expect(page.locator(`.queue li[data-request-id="${requestId}"]`).textContent()).resolves.toMatch(
      /^shell_execute: touch .* · 0 of 1 approval; escalated to @oncall; expires in \d+ min$/,
    );
    await expect(card.locator('.waiting').textContent()).resolves.toMatch(
      /^Waits for: 0 of 1 approval; escalated to @oncall; expires in/,
    );
    await card.locator('details.trail summary').click();
    const lines = await card.locator('details.trail li').allTextContents();
    expect(lines.map((l) => l.replace(/^\d\d:\d\d:\d\d /, ''))).toEqual([
      'asked → away-person',
      'reminded → away-person',
      `escalated → ${oncall.name}`,
    ]);
    const listed = await api.call('GET', `/v1/approvals?for=${oncall.name}`);
    expect(listed.body.approvals.find((a: { requestId: string }) => a.requestId === requestId)).toMatchObject({
      policy: `agent ${agentId} deploy`,
      waitingFor: expect.stringMatching(/^0 of 1 approval; escalated to @oncall/),
      waitingOn: ['away-person', oncall.name],
    });

    await card.locator('form:not(.delegate) input[name="comment"]').fill('on call says go');
    await card.locator('button[value="approved"]').click();
    await page.waitForURL(/notice=/);
    await expect(page.locator('.notice').textContent()).resolves.toBe('Approved: the task continues.');
    await eventually(
      async () => ((await h.client.getTaskRow(taskId)).state === 'review' ? true : undefined),
      `task ${taskId} in review`,
    );
    expect(existsSync(path.join(h.workspaceDir, file))).toBe(true);
    const trail = await api.call('GET', `/v1/approvals/${encodeURIComponent(requestId)}/trail`);
    expect(trail.status).toBe(200);
    expect(trail.body).toMatchObject({ status: 'approved', waitingFor: null });
    expect(
      trail.body.events.map((e: { kind: string; actor: string | null; targets: string[]; comment: string | null }) => [
        e.kind,
        e.actor,
        e.targets,
        e.comment,
      ]),
    ).toEqual([
      ['asked', null, ['away-person'], null],
      ['reminded', null, ['away-person'], null],
      ['escalated', null, [oncall.name], null],
      ['approved', oncall.name, [], 'on call says go'],
    ]);
    await page.context().close();
  });

  test('a delegation from the page: the delegate decides, and the trail names both', async () => {
    const file = `inbox-delegated-${Date.now()}.txt`;
    const agentId = await h.createAgent({
      approvals: { policies: [{ toolClass: 'shell', approvers: [oncall.name], expireAfterMs: 600_000 }] },
    });
    const taskId = agents.task([toolTurn('shell_execute', { command: `touch ${file}` }), submitTurn('done')]);
    await h.client.startTask({ agentId, taskId, title: 'Hand on', description: 'the on-call person is busy' });
    const requestId = (await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1)).pendingApprovals[0]!
      .requestId;

    const page = await signIn(oncall.token);
    await page.goto(`${api.url}/inbox?agent=${agentId}`);
    expect(await page.locator(`.queue li[data-request-id="${requestId}"]`).count()).toBe(1);
    const card = page.locator(`article[data-request-id="${requestId}"]`);
    await card.locator('form.delegate input[name="to"]').fill(api.tokenNames.operator);
    await card.locator('form.delegate input[name="comment"]').fill('you own this service');
    await card.locator('form.delegate button').click();
    await page.waitForURL(/notice=/);
    await expect(page.locator('.notice').textContent()).resolves.toBe(`Handed to ${api.tokenNames.operator}.`);
    await expect(card.locator('.waiting').textContent()).resolves.toMatch(
      new RegExp(`handed by ${oncall.name} to ${api.tokenNames.operator}`),
    );
    expect(await page.locator('.queue li').count()).toBe(0);

    // The one who handed it on can no longer decide; the delegate (the API's operator token) can.
    const refused = await api.call('POST', `/v1/approvals/${encodeURIComponent(requestId)}`, {
      token: oncall.token,
      body: { decision: 'approved' },
    });
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toMatch(/handed approval request .* who decides instead/);
    const decided = await api.call('POST', `/v1/approvals/${encodeURIComponent(requestId)}`, {
      body: { decision: 'approved', comment: 'ok' },
    });
    expect(decided.status).toBe(200);
    expect(decided.body).toMatchObject({
      decision: 'approved',
      decidedBy: api.tokenNames.operator,
      waitingFor: 'approved',
    });
    await eventually(
      async () => ((await h.client.getTaskRow(taskId)).state === 'review' ? true : undefined),
      `task ${taskId} in review`,
    );
    const trail = await api.call('GET', `/v1/approvals/${encodeURIComponent(requestId)}/trail`);
    expect(
      trail.body.events.map((e: { kind: string; actor: string | null; targets: string[] }) => [
        e.kind,
        e.actor,
        e.targets,
      ]),
    ).toEqual([
      ['asked', null, [oncall.name]],
      ['delegated', oncall.name, [api.tokenNames.operator]],
      ['approved', api.tokenNames.operator, []],
    ]);
    await page.context().close();
  });
});
