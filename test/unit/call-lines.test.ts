import {
  callsText,
  clampSummary,
  formatUsd,
  defuseMarkdown,
  escapeMarkdown,
  llmCallLine,
  roundDetailsMarkdown,
  stepSummary,
  SUMMARY_MAX_BYTES,
  summaryBytes,
  toolCallLine,
  uiSummary,
} from '../../workflows/rules/call-lines';
import { ZERO_USAGE_TOTALS } from '../../workflows/contract';

const usage = { inputTokens: 120, outputTokens: 40, cacheReadTokens: 1_500, cacheWriteTokens: 0, costUsd: 0.00213 };
const llm = (turn = 3) =>
  llmCallLine(turn, { model: 'claude-sonnet-4-5', usage, stopReason: 'tool_use', replayed: false });
/** The size the server counts: the summary as a JSON string, in UTF-8. */
const jsonBytes = (text: string): number => Buffer.byteLength(JSON.stringify(text), 'utf8');

describe("the calls of a round, as the Temporal UI shows them (a step's summary, the round's details)", () => {
  test('an LLM call: model, tokens in (cached, written to cache) and out, cost, stop reason', () => {
    expect(llm()).toMatchObject({
      call: 'llm claude-sonnet-4-5',
      outcome: '1.6k in (1.5k cached) / 40 out · $0.0021 · tool_use',
    });
    const stored = llmCallLine(0, {
      model: 'm',
      usage: { ...ZERO_USAGE_TOTALS, inputTokens: 10, cacheWriteTokens: 900, outputTokens: 5, costUsd: 0.5 },
      stopReason: 'end_turn',
      replayed: true,
    });
    expect(stored.outcome).toBe('910 in (900 to cache) / 5 out · $0.50 · end_turn · stored, not sent again');
  });

  test("a tool call: the call, ok or error, the ledger's state, and the result's opening on one line", () => {
    expect(
      toolCallLine(2, 'file_write notes/a.md (5 chars)', {
        isError: false,
        preview: 'wrote 5 characters\nto notes/a.md',
      }),
    ).toMatchObject({
      call: 'file_write notes/a.md (5 chars)',
      outcome: 'ok · ran once',
      preview: 'wrote 5 characters to notes/a.md',
    });
    expect(toolCallLine(2, 'shell_execute: ls', { isError: true, preview: '', replayed: true }).outcome).toBe(
      'error · recorded before, not run again',
    );
    expect(
      toolCallLine(2, 'shell_execute: make', { isError: false, preview: 'x', interrupted: true, redactions: 2 })
        .outcome,
    ).toBe('ok · interrupted: outcome unknown, not run again · 2 secret value(s) redacted');
    // The note safeToolText puts in front of a redacted result is left to the outcome, which counts them.
    const redacted = toolCallLine(1, 'file_read a', {
      isError: false,
      preview: '[1 secret value(s) were redacted from this result.]\nkey=[REDACTED secret]',
      redactions: 1,
    });
    expect(redacted.preview).toBe('key=[REDACTED secret]');
  });

  test("a step's summary: its label, then every call of the step before it; a failed call says why in short", () => {
    const previous = [
      llm(3),
      toolCallLine(3, 'file_write notes/a.md (5 chars)', { isError: false, preview: 'wrote 5 characters' }),
      toolCallLine(3, 'file_read missing.md', { isError: true, preview: 'file not found: missing.md' }),
    ];
    expect(stepSummary('llm m + tools · round 1 turn 4 · local', previous)).toBe(
      'llm m + tools · round 1 turn 4 · local ◂ turn 3: llm claude-sonnet-4-5 → 1.6k in (1.5k cached) / 40 out · $0.0021 · tool_use' +
        ' ▸ file_write notes/a.md (5 chars) → ok · ran once ▸ file_read missing.md → error · ran once (file not found: missing.md)',
    );
    expect(stepSummary('llm m + tools · round 1 turn 0', [])).toBe('llm m + tools · round 1 turn 0');
  });

  test('many calls: the summary stays within the bytes a cluster accepts, names what fits and counts the rest', () => {
    const many = [
      llm(7),
      ...Array.from({ length: 9 }, (_, i) =>
        toolCallLine(7, `file_write 目录/${'文件'.repeat(20)}${i}.md (100 chars)`, { isError: false, preview: 'ok' }),
      ),
    ];
    const summary = stepSummary('llm m + tools · round 2 turn 8 · local', many);
    expect(summaryBytes(summary)).toBe(jsonBytes(summary));
    expect(jsonBytes(summary)).toBeLessThanOrEqual(SUMMARY_MAX_BYTES);
    expect(summary).toMatch(
      /^llm m \+ tools · round 2 turn 8 · local ◂ turn 7: llm claude-sonnet-4-5 → .+ ▸ \+\d more$/,
    );
    expect(callsText(many.slice(0, 1))).toBe(`turn 7: ${llm().call} → ${llm().outcome}`);
  });

  test('text from a model or a tool links, fetches and renders nothing, in a summary and in the details', () => {
    const hostile = toolCallLine(1, 'file_write ![x](http://attacker.example/p.png) <img src=x>', {
      isError: true,
      preview: '[click](javascript:alert(1)) <https://a.example> [REDACTED secret]',
    });
    // A summary reads as written, but a link, an image, an autolink and a tag are broken by a space.
    const summary = callsText([llm(1), hostile]);
    expect(summary).not.toMatch(/\]\(|<[A-Za-z/!?]/);
    expect(summary).toContain('file_write ![x] (http://attacker.example/p.png) < img src=x> → error · ran once');
    expect(summary).toContain('([click] (javascript:alert(1)) < https://a.)'); // a failure's reason, in short
    expect(defuseMarkdown('sort < in.txt | head')).toBe('sort < in.txt | head');
    expect(uiSummary('shell_execute: echo "<b>"\n![i](http://x/y.png)')).toBe(
      'shell_execute: echo "< b>" ![i] (http://x/y.png)',
    );
    // The details are rendered: every character that could open a link, a tag or a cell is escaped.
    expect(escapeMarkdown('a\\[b](c) <d> e|f')).toBe('a\\\\\\[b\\](c) \\<d\\> e\\|f');
    const details = roundDetailsMarkdown({
      round: 1,
      attempt: 1,
      iteration: 1,
      phase: 'thinking',
      usage,
      recent: [hostile],
      runViewer: '/runs/t',
    });
    expect(details.split('\n')[4]).toBe(
      '| 1 | file_write !\\[x\\](http://attacker.example/p.png) \\<img src=x\\> | error · ran once: \\[click\\](javascript:alert(1)) \\<https://a.example\\> \\[REDACTED s |',
    );
  });

  test('a cut summary ends on a character boundary, with the JSON escapes counted', () => {
    const text = `${'"\\'.repeat(50)}${'😀'.repeat(100)}`;
    const cut = clampSummary(text, 120);
    expect(jsonBytes(cut)).toBeLessThanOrEqual(120);
    expect(cut.endsWith('…')).toBe(true);
    expect(cut).not.toMatch(/[\ud800-\udbff]…$/);
    expect(clampSummary('short', 120)).toBe('short');
  });

  test('cost reads in cents, or to the hundredth of a cent under one', () => {
    expect([0, 0.000042, 0.0099, 0.01, 12.4].map(formatUsd)).toEqual(['$0', '<$0.0001', '$0.0099', '$0.01', '$12.40']);
  });

  test("the round's details: progress, a table of the newest calls with pipes escaped, and the run viewer link", () => {
    const md = roundDetailsMarkdown({
      round: 2,
      attempt: 1,
      iteration: 4,
      phase: 'running-tool',
      usage,
      recent: [llm(4), toolCallLine(4, 'shell_execute: ls | wc -l', { isError: false, preview: '3' })],
      runViewer: '/runs/t-1',
    });
    expect(md.split('\n')).toEqual([
      '**round 2** · attempt 1 · iteration 4 · running-tool · 1.6k in / 40 out · $0.0021',
      '',
      '| turn | call | outcome |',
      '| --- | --- | --- |',
      '| 4 | llm claude-sonnet-4-5 | 1.6k in (1.5k cached) / 40 out · $0.0021 · tool_use |',
      '| 4 | shell_execute: ls \\| wc -l | ok · ran once: 3 |',
      '',
      '[run viewer: every call](/runs/t-1)',
    ]);
  });
});
