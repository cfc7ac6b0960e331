import type { LedgerRecord, LlmCallRecord, ReplyRecord } from '../../activities/store/run-records';
import { interruptedToolCallText, notRunToolCallText } from '../../prompts/task';
import { roundOf, sandboxSteps, stepsOf, toolCallView } from '../../api/run-viewer-calls';
import { spendChartSvg, usd } from '../../api/spend-chart';

const use = { type: 'tool_use' as const, id: 'call-1', name: 'shell_execute', input: { command: 'ls' } };
const ledger = (over: Partial<LedgerRecord> = {}): LedgerRecord => ({
  sessionId: 's',
  toolCallId: 'call-1',
  tool: 'shell_execute',
  args: { command: 'ls' },
  status: 'completed',
  sideEffecting: true,
  result: '$ ls\n[exit code 0, 4 ms]\na.md',
  resultChars: 28,
  isError: false,
  executions: 1,
  redactions: 0,
  startedAt: new Date('2026-12-05T10:00:00Z'),
  completedAt: new Date('2026-12-05T10:00:01Z'),
  ...over,
});
const state = (...args: Parameters<typeof toolCallView>) => {
  const view = toolCallView(...args);
  return [view.ledger, view.ledgerNote];
};

describe('run viewer: what the ledger says of a call', () => {
  test('committed, interrupted, not run, running and waiting, each from what was recorded', () => {
    expect(state(use, ledger(), undefined, undefined, false)).toEqual(['committed', 'ran once']);
    expect(state(use, ledger({ executions: 2 }), undefined, undefined, false)).toEqual([
      'committed',
      'ran 2 times (no side effects)',
    ]);
    // A row left `started`: the run goes on while it is the newest step of a running task, else it was cut off.
    expect(state(use, ledger({ status: 'started', result: null }), undefined, undefined, true)[0]).toBe('running');
    expect(state(use, ledger({ status: 'started', result: null }), undefined, undefined, false)[0]).toBe('interrupted');
    // Settled by a later attempt: the text the model was told.
    expect(
      state(
        use,
        ledger({ result: interruptedToolCallText('shell_execute'), isError: true }),
        undefined,
        undefined,
        false,
      )[0],
    ).toBe('interrupted');
    expect(
      state(
        use,
        ledger({ result: notRunToolCallText('shell_execute'), isError: true }),
        undefined,
        undefined,
        false,
      )[0],
    ).toBe('not run');
    // Answered without running (denied, refused, rejected, replayed in a fork).
    expect(state(use, ledger({ executions: 0, result: 'Denied by policy: …' }), undefined, undefined, false)[0]).toBe(
      'not run',
    );
    // No ledger row: waiting while it is the newest step; else its attempt ended before it started.
    expect(state(use, undefined, undefined, undefined, true)[0]).toBe('waiting');
    const stored = { sessionId: 's', toolCallId: 'call-1', text: notRunToolCallText('shell_execute'), isError: true };
    expect(state(use, undefined, stored, undefined, false)[0]).toBe('not run');
    expect(state(use, undefined, stored, undefined, false, true)).toEqual([
      'not run',
      "copied from the source with the source's result",
    ]);
  });

  test('secret values this process holds are cut out of arguments and results, whatever the worker stored', () => {
    const secret = 'unit-run-viewer-secret-value-42';
    process.env.RUN_VIEWER_UNIT_API_KEY = secret;
    try {
      const view = toolCallView(
        { ...use, input: { command: `echo ${secret}` } },
        ledger({ args: { command: `echo ${secret}` }, result: `$ echo\n[exit code 0, 1 ms]\n${secret}` }),
        undefined,
        undefined,
        false,
      );
      expect(view.args).not.toContain(secret);
      expect(view.result).not.toContain(secret);
      expect(view.result).toContain('[REDACTED secret]');
    } finally {
      delete process.env.RUN_VIEWER_UNIT_API_KEY;
    }
  });

  test("a shell result's status lines: exit code, duration, and the limit that ended or cut the run", () => {
    expect(
      sandboxSteps(
        [
          '$ ls',
          '[exit code 0, 4 ms]',
          'a.md',
          '',
          '$ yes',
          '[killed: CPU time limit of 10 s; exit code 152, 10001 ms, output truncated]',
          'y',
          '',
          '$ sleep 100',
          '[timed out, 30000 ms]',
          '',
          '$ cat big',
          '[exit code 0, 7 ms, output truncated]',
        ].join('\n'),
      ),
    ).toEqual([
      { command: 'ls', status: 'exit code 0', durationMs: 4, truncated: false },
      {
        command: 'yes',
        status: 'killed: CPU time limit of 10 s; exit code 152',
        durationMs: 10001,
        truncated: true,
        limit: 'killed: CPU time limit of 10 s',
      },
      { command: 'sleep 100', status: 'timed out', durationMs: 30000, truncated: false, limit: 'timed out' },
      { command: 'cat big', status: 'exit code 0', durationMs: 7, truncated: true, limit: 'output truncated' },
    ]);
  });
});

describe('run viewer: sessions and steps', () => {
  test("a session's round: its own, or its sub-agent's parent round (nested sub-agents too)", () => {
    expect(roundOf('task_t-1_r2', 't-1')).toBe(2);
    expect(roundOf('sub_task-t-1-r3_1', 't-1')).toBe(3);
    expect(roundOf('sub_task-t-1-r3-sub-1_2', 't-1')).toBe(3);
    expect(roundOf('task_t-10_r1', 't-1')).toBeUndefined();
    expect(roundOf('reflection-t-1', 't-1')).toBeUndefined();
  });

  test('steps in conversation order, auxiliary calls under their step, a call without a reply where its time puts it', () => {
    const at = (s: number) => new Date(Date.UTC(2026, 11, 5, 10, 0, s));
    const reply = (key: string, s: number): ReplyRecord => ({
      sessionId: 's',
      key,
      content: [{ type: 'text', text: `reply ${key}` }],
      at: at(s),
    });
    const call = (id: string, key: string, s: number, error: string | null = null): LlmCallRecord => ({
      id,
      taskId: 't',
      sessionId: 's',
      key,
      provider: 'anthropic',
      model: 'm',
      inputTokens: 10,
      outputTokens: 2,
      cacheReadTokens: 5,
      cacheWriteTokens: 1,
      costUsd: 0.001,
      durationMs: 100,
      stopReason: error ? null : 'end_turn',
      error,
      at: at(s),
    });
    const steps = stepsOf(
      's',
      { ledger: [], storedResults: [], approvals: [], truncations: [] },
      [reply('assistant-a1-t0', 1), reply('assistant-a2-t0', 20)],
      [
        call('1', 'assistant-a1-t0', 1),
        call('2', 'assistant-a1-t1', 5, 'overloaded'),
        call('3', 'assistant-a2-t0:summary:abc', 18),
        call('4', 'assistant-a2-t0', 20),
      ],
      true,
    );
    expect(steps.map((s) => [s.label, s.llmCalls.map((c) => `${c.id}:${c.purpose}`)])).toEqual([
      ['attempt 1 · turn 0', ['1:step']],
      ['attempt 1 · turn 1', ['2:step']],
      ['attempt 2 · turn 0', ['3:summary:abc', '4:step']],
    ]);
    expect(steps[0]!.llmCalls[0]!.promptTokens).toBe(16);
  });
});

describe('run viewer: the spend chart', () => {
  test('a step line per part of the tree, the whole tree, and the budget', () => {
    const at = (s: number) => new Date(Date.UTC(2026, 11, 5, 10, 0, s));
    const svg = spendChartSvg({
      limitUsd: 0.01,
      spentUsd: 0.003,
      total: [
        { at: at(0), totalUsd: 0.001 },
        { at: at(5), totalUsd: 0.003 },
      ],
      series: [
        { label: 'this task (its rounds)', points: [{ at: at(0), totalUsd: 0.001 }], spentUsd: 0.001, limitUsd: null },
        { label: 'sub-agent <r1-sub-1>', points: [{ at: at(5), totalUsd: 0.002 }], spentUsd: 0.002, limitUsd: 0.004 },
      ],
    });
    expect(svg).toContain('data-budget="0.01"');
    expect(svg).toContain('data-series="sub-agent &lt;r1-sub-1&gt;"');
    expect(svg.match(/<path /g)).toHaveLength(3);
    expect([usd(0), usd(0.000123), usd(0.5)]).toEqual(['$0', '$0.000123', '$0.5000']);
  });
});
