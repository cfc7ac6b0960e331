import {
  injectionsAfterToolIteration,
  REFLECTION_CHECKPOINT_EVERY_TOOL_ITERATIONS,
  ROUND_MAX_HISTORY_EVENTS_PER_RUN,
  shouldContinueAsNew,
  TASK_MAX_NO_SUBMIT_RETRIES,
  TASK_MAX_TRANSIENT_ROUND_RETRIES,
  TASK_REMINDER_EVERY_TOOL_ITERATIONS,
  TASK_TRANSIENT_RETRY_FIRST_DELAY_MS,
  TASK_TRANSIENT_RETRY_MAX_DELAY_MS,
  TOOL_RESULT_OFFLOAD_CHARS,
  transientRetryDelayMs,
} from '../../workflows/rules/harness';
import {
  CONTINUATION_PROMPT,
  finalCriticalReminderText,
  INTERRUPTED_RETRY_TEXT,
  taskPromptText,
} from '../../prompts/task';

describe('task harness rules (seed D1 §2.D, §3.7)', () => {
  test('the seed numbers', () => {
    expect(TASK_REMINDER_EVERY_TOOL_ITERATIONS).toBe(10);
    expect(REFLECTION_CHECKPOINT_EVERY_TOOL_ITERATIONS).toBe(30);
    expect(TASK_MAX_NO_SUBMIT_RETRIES).toBe(8);
    expect(TASK_MAX_TRANSIENT_ROUND_RETRIES).toBe(8);
    expect(TOOL_RESULT_OFFLOAD_CHARS).toBe(50_000);
    expect(TASK_TRANSIENT_RETRY_FIRST_DELAY_MS).toBe(30_000);
    expect(TASK_TRANSIENT_RETRY_MAX_DELAY_MS).toBe(600_000);
  });

  test('a reminder every 10 tool iterations and a reflection checkpoint every 30, nothing in between', () => {
    const due = Array.from(
      { length: 91 },
      (_, i) =>
        [
          i,
          injectionsAfterToolIteration('t1', i).map((t) =>
            t.startsWith('[SYSTEM REMINDER — Task t1]')
              ? 'reminder'
              : t.startsWith('[REFLECTION CHECKPOINT]')
                ? 'checkpoint'
                : t,
          ),
        ] as const,
    ).filter(([, out]) => out.length > 0);
    expect(due).toEqual([
      [10, ['reminder']],
      [20, ['reminder']],
      [30, ['reminder', 'checkpoint']],
      [40, ['reminder']],
      [50, ['reminder']],
      [60, ['reminder', 'checkpoint']],
      [70, ['reminder']],
      [80, ['reminder']],
      [90, ['reminder', 'checkpoint']],
    ]);
    const [reminder] = injectionsAfterToolIteration('t1', 10);
    expect(reminder).toContain('[SYSTEM REMINDER — Task t1]');
    expect(reminder).toContain('task_submit_review');
    expect(injectionsAfterToolIteration('t1', 30)[1]).toContain('memory_save');
  });

  test('the final reminder, the continuation prompt and the retry notice carry the markers the seed names', () => {
    expect(finalCriticalReminderText('t9')).toMatch(/^\[SYSTEM — CRITICAL REMINDER — Task t9\].*task_submit_review/);
    expect(CONTINUATION_PROMPT).toMatch(/^\[SYSTEM\].*maximum output length/);
    expect(INTERRUPTED_RETRY_TEXT).toMatch(/^\[SYSTEM: Your previous execution attempt was interrupted/);
  });

  test('transient round retries wait 30 s, doubling, capped at 10 min', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8].map(transientRetryDelayMs)).toEqual([
      30_000, 60_000, 120_000, 240_000, 480_000, 600_000, 600_000, 600_000,
    ]);
  });

  test('the task prompt: marker, description, notes, revision feedback, mandatory completion section', () => {
    const first = taskPromptText({ id: 'T', title: 'Fix it', description: 'The parser loses data.' });
    expect(first.split('\n\n')[0]).toBe('[TASK EXECUTION — Task ID: T]');
    expect(first).toContain('The parser loses data.');
    expect(first).toContain('## Completion Requirements — MANDATORY');
    expect(first).toContain('you MUST call task_submit_review');
    expect(first).not.toContain('REVISION');

    const revision = taskPromptText({ id: 'T', title: 'Fix it', description: 'd', notes: ['note one'] }, 'Add a test.');
    expect(revision).toContain('- note one');
    expect(revision).toContain('## 🔴 REVISION REQUIRED — reviewer feedback\n\nAdd a test.');
    expect(revision.indexOf('REVISION REQUIRED')).toBeLessThan(revision.indexOf('Completion Requirements'));
  });

  test('continue as new when Temporal suggests it or the run reaches its own bound', () => {
    expect(
      shouldContinueAsNew(
        { continueAsNewSuggested: false, historyLength: ROUND_MAX_HISTORY_EVENTS_PER_RUN - 1 },
        ROUND_MAX_HISTORY_EVENTS_PER_RUN,
      ),
    ).toBe(false);
    expect(
      shouldContinueAsNew(
        { continueAsNewSuggested: false, historyLength: ROUND_MAX_HISTORY_EVENTS_PER_RUN },
        ROUND_MAX_HISTORY_EVENTS_PER_RUN,
      ),
    ).toBe(true);
    expect(
      shouldContinueAsNew({ continueAsNewSuggested: true, historyLength: 10 }, ROUND_MAX_HISTORY_EVENTS_PER_RUN),
    ).toBe(true);
    expect(ROUND_MAX_HISTORY_EVENTS_PER_RUN).toBeLessThan(10_000);
  });
});
