import { Worker } from '@temporalio/worker';
import { roundWorkflowId, runViewerPath } from '../../workflows/contract';
import { eventually } from '../support/eventually';
import { submitTurn, toolTurn, useHarness } from '../support/harness';
import { currentDetails, historiesOfAllRuns, localActivityMarkers, stepSummaries } from './task-support';
import { formatUsd } from '../../workflows/rules/call-lines';

/** A value the worker holds as a secret (its variable's name says so): it must never reach a line. */
const SECRET = 'tok-call-lines-5f1e9c2a7b';
const SECRET_VARIABLE = 'CALL_LINES_TEST_TOKEN';

/** One reply that asks for several tools at once. */
function toolsTurn(...calls: Array<{ name: string; input: unknown }>) {
  return {
    ...toolTurn(calls[0]!.name, calls[0]!.input, 'calling several tools'),
    content: [
      { type: 'text' as const, text: 'calling several tools' },
      ...calls.map((c) => ({ type: 'tool_use' as const, name: c.name, input: c.input })),
    ],
  };
}

/**
 * What an operator reads in the Temporal UI about a round: every LLM call and every tool call is named
 * in the round's history (each step's summary names the calls of the step before it, and the run ends
 * with a line for the last step's), and the round's current details show its progress, a table of the
 * newest calls and the link to the run viewer.
 */
describe("a round's calls in the Temporal UI", () => {
  const h = useHarness({ worker: true });
  beforeAll(() => {
    process.env[SECRET_VARIABLE] = SECRET;
  });
  afterAll(() => {
    delete process.env[SECRET_VARIABLE];
  });

  test('each LLM call (model, tokens in/out and cached, cost, stop reason) and each tool call (call, outcome, ledger) is named in history; the details hold the table', async () => {
    h.llm.enqueue(
      toolTurn('file_write', { path: `notes/${SECRET}.md`, content: `the key is ${SECRET}` }),
      toolsTurn(
        { name: 'file_read', input: { path: `notes/${SECRET}.md` } },
        { name: 'file_read', input: { path: 'notes/missing.md' } },
      ),
      toolTurn('file_write', { path: 'notes/![x](leak.png).md', content: 'hi' }),
      submitTurn('wrote the notes'),
    );
    const agentId = await h.createAgent();
    const { taskId } = await h.client.startTask({ agentId, title: 'Notes', description: 'Write the notes.' });
    await eventually(
      async () =>
        (await h.db.db.selectFrom('tasks').select('state').where('id', '=', taskId).executeTakeFirst())?.state ===
        'review',
      `task ${taskId} to reach review`,
    );
    const handle = h.temporal.workflow.getHandle(roundWorkflowId(taskId, 1));
    await handle.result();
    const [round] = await historiesOfAllRuns(handle);
    const markers = localActivityMarkers(round!);
    const steps = stepSummaries(round!);
    expect(steps).toHaveLength(4);

    // Each step's summary names the calls of the step before it; the run's last line names the last
    // step's calls. Together: every call of the round, once, in order.
    const last = markers.filter((m) => m.activityType === 'showLastStepCalls');
    expect(last).toHaveLength(1);
    expect(steps[0]!.summary).not.toContain('◂');
    const named = [...steps.slice(1).map((s) => s.summary.split(' ◂ ')[1]!), last[0]!.summary];
    expect(named.map((text) => /^turn (\d+): /.exec(text)?.[1])).toEqual(['0', '1', '2', '3']);
    const callsOf = (turn: number): string[] => named[turn]!.replace(/^turn \d+: /, '').split(' ▸ ');

    // The LLM calls, as the database recorded them: model, tokens in (cached, written to cache) and
    // out, cost, stop reason.
    const llmCalls = await h.db.db
      .selectFrom('llm_calls')
      .selectAll()
      .where('task_id', '=', taskId)
      .orderBy('created_at')
      .execute();
    expect(llmCalls).toHaveLength(4);
    llmCalls.forEach((call, turn) => {
      const inTokens = call.input_tokens + call.cache_read_tokens + call.cache_write_tokens;
      const cost = Number(call.cost_usd);
      expect(cost).toBeGreaterThan(0);
      expect(callsOf(turn)[0]).toBe(
        `llm ${call.model} → ${inTokens} in (${call.cache_read_tokens} cached, ${call.cache_write_tokens} to cache) / ${call.output_tokens} out · ${formatUsd(cost)} · ${call.stop_reason}`,
      );
    });

    // Every tool call: the call, its outcome and the ledger's state. The secret is cut out of the
    // arguments and the results, and Markdown from the model is inert.
    expect(callsOf(0).slice(1)).toEqual([
      expect.stringMatching(
        /^file_write notes\/\[REDACTED secret\]\.md \(\d+ chars\) → ok · ran once · 1 secret value\(s\) redacted$/,
      ),
    ]);
    expect(callsOf(1).slice(1)).toEqual([
      'file_read notes/[REDACTED secret].md → ok · ran once · 1 secret value(s) redacted',
      'file_read notes/missing.md → error · ran once (file not found: notes/missing.md)',
    ]);
    expect(callsOf(2).slice(1)).toEqual(['file_write notes/![x] (leak.png).md (2 chars) → ok · ran once']);
    expect(callsOf(3).slice(1)).toEqual(['task_submit_review: wrote the notes → ok · ran once']);
    for (const marker of markers) expect(marker.summary).not.toContain(SECRET);

    // The details: the round's progress, the newest calls as a table, the run viewer.
    const details = await currentDetails(handle);
    expect(details).toMatch(/^\*\*round 1\*\* · attempt 1 · iteration 4 · awaiting-review · /);
    expect(details).toContain('| turn | call | outcome |');
    expect(details).toMatch(/\n\| 3 \| llm .+ \| .+ in .+ out · \$.+ · tool_use \|\n/);
    expect(details).toMatch(
      /\n\| 3 \| task_submit_review: wrote the notes \| ok · ran once: Submitted for review.+ \|/,
    );
    expect(details).toContain(`(${runViewerPath(taskId)})`);
    expect(details).not.toContain(SECRET);

    // The new lines replay: the recorded run against the current workflow code.
    await Worker.runReplayHistory(
      { workflowBundle: { codePath: process.env.TEST_WORKFLOW_BUNDLE! }, replayName: 'call-lines' },
      { events: round! },
    );
  });
});
