/**
 * The eval's graders: plain functions over figures read from the records (never from a re-run). Each
 * says what it measured and whether the fork passed it; `passed` of a run is the conjunction of the
 * graders that apply.
 */

/** What the records say about one task (a fork, or the original it was forked from). */
export interface RunFigures {
  state: string;
  /** The task reached review (or was accepted) at some point. */
  reachedReview: boolean;
  /** Approval requests its tool calls made (each needed a human). */
  approvalsRequested: number;
  /** LLM steps that called tools. */
  iterations: number;
  tokens: number;
  costUsd: number;
  /** From its first LLM call to its submission (or its last recorded event). */
  wallMs: number;
  toolCalls: number;
  toolErrors: number;
  changedFiles: string[];
  submission?: string;
}

export interface Grade {
  grader: string;
  passed: boolean;
  detail: string;
}

export function reachedReviewWithoutHuman(fork: RunFigures): Grade {
  const passed = fork.reachedReview && fork.approvalsRequested === 0;
  const detail = fork.reachedReview
    ? fork.approvalsRequested === 0
      ? 'submitted for review on its own'
      : `submitted after ${fork.approvalsRequested} approval request(s)`
    : `did not reach review (${fork.state})`;
  return { grader: 'reached review without a human', passed, detail };
}

export function changedFilesVsOriginal(fork: RunFigures, original: RunFigures): Grade {
  const a = new Set(fork.changedFiles);
  const b = new Set(original.changedFiles);
  const missing = [...b].filter((f) => !a.has(f));
  const extra = [...a].filter((f) => !b.has(f));
  const passed = missing.length === 0 && extra.length === 0;
  const detail = passed
    ? `${a.size} file(s), as the original`
    : [missing.length ? `missing ${missing.join(', ')}` : '', extra.length ? `extra ${extra.join(', ')}` : '']
        .filter(Boolean)
        .join('; ');
  return { grader: 'changed files vs original', passed, detail };
}

export function toolErrorsVsOriginal(fork: RunFigures, original: RunFigures): Grade {
  return {
    grader: 'tool errors',
    passed: fork.toolErrors <= original.toolErrors,
    detail: `${fork.toolErrors} of ${fork.toolCalls} call(s) (original ${original.toolErrors} of ${original.toolCalls})`,
  };
}

/**
 * A ratio to the original as the tables print it: `1.5x`; `-` without a figure; `n/a` when the original
 * had none of it (it cost $0) and the fork has some, where no ratio exists. Stored results from before
 * ratios could be null hold null there too.
 */
export function formatVsOriginal(ratio: number | null | undefined, times: 'x' | '×'): string {
  if (ratio === undefined) return '-';
  if (ratio === null || !Number.isFinite(ratio)) return 'n/a';
  return `${ratio}${times}`;
}

/** Not pass/fail: the ratios a person compares candidates by. */
export function usageVsOriginal(
  fork: RunFigures,
  original: RunFigures,
): { iterations: number | null; tokens: number | null; costUsd: number | null; wallMs: number | null } {
  // Over an original of 0 there is no ratio: null (JSON has no Infinity; it became null and read "nullx").
  const ratio = (x: number, y: number): number | null => (y > 0 ? Math.round((x / y) * 100) / 100 : x > 0 ? null : 1);
  return {
    iterations: ratio(fork.iterations, original.iterations),
    tokens: ratio(fork.tokens, original.tokens),
    costUsd: ratio(fork.costUsd, original.costUsd),
    wallMs: ratio(fork.wallMs, original.wallMs),
  };
}

/** The judge's verdict as it answered; a reply that is not the asked-for JSON fails, saying so. */
export function parseJudgeVerdict(text: string): Grade {
  const json = /\{[\s\S]*\}/.exec(text)?.[0];
  try {
    const v = JSON.parse(json ?? '') as { pass?: unknown; reason?: unknown };
    if (typeof v.pass !== 'boolean') throw new Error('no boolean "pass"');
    return { grader: 'LLM judge', passed: v.pass, detail: typeof v.reason === 'string' ? v.reason.slice(0, 300) : '' };
  } catch {
    return {
      grader: 'LLM judge',
      passed: false,
      detail: `the judge did not answer {"pass": true|false, "reason": "…"}: ${text.slice(0, 200)}`,
    };
  }
}

/** A run passes when every grader that applies passed (changed files apply when the original changed any). */
export function runPassed(grades: readonly Grade[], original: RunFigures): boolean {
  return grades
    .filter((g) => g.grader !== 'changed files vs original' || original.changedFiles.length > 0)
    .filter((g) => g.grader !== 'tool errors')
    .every((g) => g.passed);
}

export interface EvalRow {
  sourceTaskId: string;
  candidate: string;
  forkTaskId: string;
  state: 'graded' | 'skipped' | 'failed';
  passed: boolean;
  grades: Grade[];
  fork?: RunFigures;
  original?: RunFigures;
  vsOriginal?: ReturnType<typeof usageVsOriginal>;
  calls: { replayed: number; executed: number; refused: number };
  /** The fork's records are incomplete, or its source's were (interrupted calls): said, not hidden. */
  incomplete?: string;
  judgeCostUsd: number;
  note?: string;
}

export interface CandidateTotals {
  candidate: string;
  runs: number;
  graded: number;
  passed: number;
  passRate: number;
  costUsd: number;
  originalCostUsd: number;
  tokens: number;
  replayed: number;
  executed: number;
  refused: number;
  skipped: number;
}

export function totalsPerCandidate(rows: readonly EvalRow[], candidates: readonly string[]): CandidateTotals[] {
  return candidates.map((candidate) => {
    const mine = rows.filter((r) => r.candidate === candidate);
    const graded = mine.filter((r) => r.state === 'graded');
    const passed = graded.filter((r) => r.passed).length;
    const sum = (f: (r: EvalRow) => number): number => Math.round(mine.reduce((s, r) => s + f(r), 0) * 1e6) / 1e6;
    return {
      candidate,
      runs: mine.length,
      graded: graded.length,
      passed,
      passRate: graded.length ? Math.round((passed / mine.length) * 1000) / 1000 : 0,
      costUsd: sum((r) => (r.fork?.costUsd ?? 0) + r.judgeCostUsd),
      originalCostUsd: sum((r) => r.original?.costUsd ?? 0),
      tokens: sum((r) => r.fork?.tokens ?? 0),
      replayed: sum((r) => r.calls.replayed),
      executed: sum((r) => r.calls.executed),
      refused: sum((r) => r.calls.refused),
      skipped: mine.filter((r) => r.state === 'skipped').length,
    };
  });
}

/** The table a person reads: one line per task and candidate, then the totals per candidate. */
export function formatEvalTable(rows: readonly EvalRow[], totals: readonly CandidateTotals[]): string {
  const money = (n: number): string => `$${n.toFixed(4)}`;
  const lines = [
    'task                                  candidate        pass  review  files  errors  iter  tokens   cost      vs orig  calls r/e/x',
  ];
  for (const r of rows) {
    const g = (name: string): string =>
      r.grades.find((x) => x.grader === name)?.passed ? 'yes' : r.grades.some((x) => x.grader === name) ? 'no' : '-';
    lines.push(
      [
        r.sourceTaskId.slice(0, 36).padEnd(37),
        r.candidate.slice(0, 16).padEnd(16),
        (r.state === 'graded' ? (r.passed ? 'PASS' : 'fail') : r.state).padEnd(5),
        g('reached review without a human').padEnd(7),
        g('changed files vs original').padEnd(6),
        String(r.fork?.toolErrors ?? '-').padEnd(7),
        String(r.fork?.iterations ?? '-').padEnd(5),
        String(r.fork?.tokens ?? '-').padEnd(8),
        money((r.fork?.costUsd ?? 0) + r.judgeCostUsd).padEnd(9),
        formatVsOriginal(r.vsOriginal?.costUsd, 'x').padEnd(8),
        `${r.calls.replayed}/${r.calls.executed}/${r.calls.refused}${r.incomplete ? ' (incomplete)' : ''}`,
      ].join(' '),
    );
  }
  lines.push(
    '',
    'candidate        pass rate  passed  cost      original  tokens   replayed  executed  refused  skipped',
  );
  for (const t of totals) {
    lines.push(
      [
        t.candidate.slice(0, 16).padEnd(16),
        `${Math.round(t.passRate * 100)}%`.padEnd(10),
        `${t.passed}/${t.runs}`.padEnd(7),
        money(t.costUsd).padEnd(9),
        money(t.originalCostUsd).padEnd(9),
        String(t.tokens).padEnd(8),
        String(t.replayed).padEnd(9),
        String(t.executed).padEnd(9),
        String(t.refused).padEnd(8),
        String(t.skipped),
      ].join(' '),
    );
  }
  return lines.join('\n');
}
