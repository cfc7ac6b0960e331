import {
  formatEvalTable,
  formatVsOriginal,
  totalsPerCandidate,
  usageVsOriginal,
  type EvalRow,
  type RunFigures,
} from '../../activities/fork/graders';

const figures = (costUsd: number, tokens: number): RunFigures => ({
  state: 'review',
  reachedReview: true,
  approvalsRequested: 0,
  iterations: 2,
  tokens,
  costUsd,
  wallMs: 1_000,
  toolCalls: 1,
  toolErrors: 0,
  changedFiles: [],
});

/** The eval table's "vs orig" column when the original cost nothing: no ratio exists, and it says so. */
describe('ratios to an original that cost $0', () => {
  const original = figures(0, 0);
  const fork = figures(0.25, 1_200);

  test('there is no ratio (null, also after the row is stored as JSON), and the tables print n/a', () => {
    const vs = usageVsOriginal(fork, original);
    expect(vs.costUsd).toBeNull();
    expect(vs.tokens).toBeNull();
    expect(vs.iterations).toBe(1);
    expect(usageVsOriginal(figures(0, 0), original).costUsd).toBe(1);
    const row: EvalRow = {
      sourceTaskId: 'source-task',
      candidate: 'cheaper',
      forkTaskId: 'fork-task',
      state: 'graded',
      passed: true,
      grades: [],
      fork,
      original,
      vsOriginal: vs,
      calls: { replayed: 1, executed: 0, refused: 0 },
      judgeCostUsd: 0,
    };
    // Stored rows went through JSON, where an Infinity became null: both print the same.
    const stored = JSON.parse(JSON.stringify({ ...row, vsOriginal: { ...vs, costUsd: Infinity } })) as EvalRow;
    for (const r of [row, stored]) {
      const table = formatEvalTable([r], totalsPerCandidate([r], ['cheaper']));
      expect(table).not.toMatch(/null|Infinity/);
      expect(table.split('\n')[1]).toMatch(/ n\/a +1\/0\/0$/);
    }
    expect(formatVsOriginal(null, '×')).toBe('n/a');
    expect(formatVsOriginal(1.5, '×')).toBe('1.5×');
    expect(formatVsOriginal(undefined, 'x')).toBe('-');
  });
});
