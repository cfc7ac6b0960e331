import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { roundWorkflowId, runViewerPath } from '../../workflows/contract';
import { eventually } from '../support/eventually';
import { submitTurn, toolTurn, useHarness } from '../support/harness';
import { historiesOfAllRuns, localActivityMarkers } from './task-support';

/** Debian's Chromium (`apt-get install chromium`; .ci/run installs it when missing). */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** Where the test leaves its screenshot (docs/ui-round.png is a copy of it). */
const SCREENSHOT = path.resolve('.data', 'ui-round.png');
/** The page's width, and the height of the details part under the history. */
const WIDTH = 1600;
const DETAILS_HEIGHT = 470;

/**
 * The Temporal Web UI of the server the tests use: TEMPORAL_UI_URL, else where `npm test`'s dev server
 * serves it (its port + 1000, scripts/test.sh).
 */
function temporalUiUrl(): string {
  if (process.env.TEMPORAL_UI_URL) return process.env.TEMPORAL_UI_URL.replace(/\/$/, '');
  const [host, port] = process.env.TEMPORAL_ADDRESS!.split(':');
  return `http://${host}:${Number(port) + 1000}`;
}

/** One reply that asks for several tools at once. */
function toolsTurn(...calls: Array<{ name: string; input: unknown }>) {
  const turn = toolTurn(calls[0]!.name, calls[0]!.input, 'reading it back');
  return { ...turn, content: [turn.content[0]!, ...calls.map((c) => ({ type: 'tool_use' as const, ...c }))] };
}

/** The text of the rendered current details (the UI renders Markdown in a frame of its own). */
async function detailsFrameText(page: Page): Promise<string> {
  return eventually(async () => {
    for (const frame of page.frames()) {
      const text = await frame
        .locator('body')
        .innerText({ timeout: 500 })
        .catch(() => '');
      if (text.includes('run viewer')) return text;
    }
    return undefined;
  }, 'the current details to render');
}

/**
 * A round as an operator sees it in the Temporal Web UI, in headless Chromium: the event history names
 * every LLM call and tool call (the step summaries and the run's last line), and the User Metadata tab
 * shows the round's current details as a table. Saves the screenshot the README shows.
 */
describe('a round in the Temporal Web UI', () => {
  const h = useHarness({ worker: true });
  let browser: Browser;
  const ui = temporalUiUrl();
  beforeAll(async () => {
    const settings = await fetch(`${ui}/api/v1/settings`).catch((error: unknown) => error as Error);
    if (!(settings instanceof Response) || !settings.ok)
      throw new Error(`no Temporal Web UI at ${ui} (set TEMPORAL_UI_URL to the UI of ${process.env.TEMPORAL_ADDRESS})`);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
  });
  afterAll(async () => {
    await browser?.close();
  });

  test("the history names each call with its figures; the details show the newest calls and the run viewer's link", async () => {
    h.llm.enqueue(
      toolTurn(
        'file_write',
        { path: 'plan.md', content: '# A one-page guide to durable agents\n' },
        'writing the plan',
      ),
      toolsTurn({ name: 'file_read', input: { path: 'plan.md' } }, { name: 'file_read', input: { path: 'notes.md' } }),
      submitTurn('Wrote and checked plan.md'),
    );
    const agentId = await h.createAgent();
    const { taskId } = await h.client.startTask({
      agentId,
      title: 'Plan a one-page guide to durable agents',
      description: 'Write plan.md, then read it back.',
    });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    const round = h.temporal.workflow.getHandle(roundWorkflowId(taskId, 1));
    await round.result();
    const runId = (await round.describe()).runId;
    const [events] = await historiesOfAllRuns(round);
    const summaries = localActivityMarkers(events!).map((m) => m.summary);

    const page = await browser.newPage({ viewport: { width: WIDTH, height: 1000 } });
    await page.goto(`${ui}/namespaces/default/workflows/${encodeURIComponent(round.workflowId)}/${runId}/history`);
    await page.getByText('Compact', { exact: true }).click();
    const rows = page.locator('tr[data-testid="event-summary-row"]');
    await rows.filter({ hasText: 'showLastStepCalls' }).waitFor();
    // Every call, with its figures, is on the page: each local step's summary and the last line, whole.
    const shown = (await rows.allInnerTexts()).join('\n');
    for (const summary of summaries) expect(shown).toContain(summary);
    expect(shown).toMatch(
      /◂ turn 0: llm \S+ → \d+ in \(\d+ cached, \d+ to cache\) \/ \d+ out · \$[\d.]+ · tool_use ▸ /,
    );
    expect(shown).toContain('file_write plan.md (37 chars) → ok · ran once');
    expect(shown).toContain('file_read notes.md → error · ran once (file not found: notes.md)');
    expect(shown).toMatch(/turn 2: llm .+ ▸ task_submit_review: Wrote and checked plan\.md → ok · ran once/);
    const history = await page.screenshot();

    // The current details, rendered: the round's progress, a row per recent call, the run viewer.
    await page.getByText('User Metadata', { exact: true }).click();
    const details = await detailsFrameText(page);
    expect(details).toMatch(/round 1 · attempt 1 · iteration 3 · awaiting-review/);
    expect(details).toContain('file_read notes.md');
    expect(details).toContain('task_submit_review: Wrote and checked plan.md');
    const link = await eventually(async () => {
      for (const frame of page.frames()) {
        const href = await frame
          .locator('a', { hasText: 'run viewer' })
          .getAttribute('href', { timeout: 500 })
          .catch(() => null);
        if (href) return href;
      }
      return undefined;
    }, "the run viewer's link");
    expect(link).toContain(runViewerPath(taskId));
    // The details part: under the tabs, right of the navigation (the history above already shows it).
    const tabs = (await page.getByText('User Metadata', { exact: true }).boundingBox())!;
    const left = Math.round((await page.getByText('Timeline', { exact: true }).first().boundingBox())!.x - 8);
    const clip = { x: left, y: Math.round(tabs.y + tabs.height + 8), width: WIDTH - left, height: DETAILS_HEIGHT };
    const metadata = await page.screenshot({ clip });
    await page.close();

    // One picture: the history, and under it the details tab.
    const picture = await browser.newPage({ viewport: { width: WIDTH, height: 600 } });
    const img = (png: Buffer, indent = 0) =>
      `<img style="display:block;margin-left:${indent}px" src="data:image/png;base64,${png.toString('base64')}">`;
    await picture.setContent(`<body style="margin:0;background:#fff">${img(history)}${img(metadata, left)}</body>`);
    mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    await picture.screenshot({ path: SCREENSHOT, fullPage: true });
    await picture.close();
  });
});
