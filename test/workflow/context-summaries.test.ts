import type { RecordedRequest, ScriptedResponse } from '../fake-llm';
import { useHarness } from '../support/harness';

const CHEAP_MODEL = 'claude-haiku-5-5';
/** Tool iterations before the agent submits: 2 messages each, so the session passes 60 messages at 30. */
const TOOL_TURNS = 45;
const isSummariser = (r: RecordedRequest) => r.body.tools === undefined && r.body.temperature === 0.2;
type Message = { role: string; content: Array<{ type: string; text?: string }> };
const firstSummary = (r: RecordedRequest) =>
  (r.body.messages as Message[]).find((m) => m.content[0]?.text?.startsWith('[Conversation history summary'));

describe('stage-1 summaries are cached per folded prefix (seed D1 C3 with our cost fix)', () => {
  const h = useHarness({ worker: true });

  test('a long task loop pays one summariser call per 20 new messages, and the summary is byte-identical in between', async () => {
    let summaries = 0;
    let mainCalls = 0;
    h.llm.setResponder((r): ScriptedResponse => {
      if (isSummariser(r)) {
        summaries += 1;
        return {
          kind: 'message',
          content: [{ type: 'text', text: `Summary ${summaries}: the agent wrote notes 0–${mainCalls}.` }],
          stopReason: 'end_turn',
          usage: { inputTokens: 2_000, outputTokens: 200 },
        };
      }
      mainCalls += 1;
      const call =
        mainCalls <= TOOL_TURNS
          ? {
              type: 'tool_use' as const,
              name: 'file_write',
              input: { path: `n/${mainCalls}.md`, content: `note ${mainCalls}` },
            }
          : { type: 'tool_use' as const, name: 'task_submit_review', input: { summary: 'all notes written' } };
      return {
        kind: 'message',
        content: [call],
        stopReason: 'tool_use',
        usage: { inputTokens: 500, outputTokens: 20 },
      };
    });
    const agentId = await h.createAgent();
    const { taskId } = await h.client.startTask({ agentId, title: 'Many notes', description: 'Write many notes.' });
    const status = await h.waitForStatus(taskId, (s) => s.state === 'review', 120_000);
    h.llm.setResponder(undefined);

    const main = h.llm.requests.filter((r) => !isSummariser(r));
    const summariser = h.llm.requests.filter(isSummariser);
    const withSummary = main.filter((r) => firstSummary(r) !== undefined);
    expect(main).toHaveLength(TOOL_TURNS + 1);
    // Stage 1 ran on many calls, the summariser only when the fold moved (every 20 messages).
    expect(withSummary.length).toBeGreaterThanOrEqual(10);
    expect(summariser.length).toBeGreaterThanOrEqual(1);
    expect(summariser.length).toBeLessThanOrEqual(Math.ceil(withSummary.length / 10) + 1);
    for (const r of summariser) {
      expect(r.body.model).toBe(CHEAP_MODEL);
      expect(r.body.max_tokens).toBe(1_024);
    }
    // Consecutive calls with the same fold carry the same summary text, byte for byte.
    const distinct = new Set(withSummary.map((r) => JSON.stringify(firstSummary(r))));
    expect(distinct.size).toBe(summariser.length);
    // A later fold was made incrementally from the cached earlier summary.
    if (summariser.length > 1) expect(JSON.stringify(summariser[1]!.body.messages)).toContain('[previous summary]');

    const rows = await h.db.db
      .selectFrom('session_summaries')
      .select(['prefix_length', 'source'])
      .where('session_id', '=', `task_${taskId}_r1`)
      .orderBy('prefix_length')
      .execute();
    expect(rows).toHaveLength(summariser.length);
    // Folds on the 20-message grid, moved back by one where the grid point falls inside a tool block.
    rows.forEach((r, i) => {
      expect(r.source).toBe('llm');
      expect(r.prefix_length).toBeLessThanOrEqual(20 * (i + 1));
      expect(r.prefix_length).toBeGreaterThanOrEqual(20 * (i + 1) - 1);
    });
    // Summariser calls are accounted to the task (under the step that made them) and in `status`.
    const calls = await h.db.db
      .selectFrom('llm_calls')
      .select(['model', 'idem_key', 'input_tokens'])
      .where('task_id', '=', taskId)
      .execute();
    const summaryCalls = calls.filter((c) => c.idem_key?.includes(':summary-'));
    expect(summaryCalls).toHaveLength(summariser.length);
    expect(summaryCalls.every((c) => c.model === CHEAP_MODEL)).toBe(true);
    expect(status.usage.inputTokens).toBe(calls.reduce((acc, c) => acc + c.input_tokens, 0));
    console.log(
      `summaries: ${main.length} main calls, ${withSummary.length} with a stage-1 summary, ${summariser.length} summariser calls (seed D1 without the cache: ${withSummary.length})`,
    );
  });
});
