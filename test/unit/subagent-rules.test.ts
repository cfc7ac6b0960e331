import { describeBudget } from '../../client/budget-commands';
import { spawnSubagents } from '../../activities/tools/subagent-tools';
import {
  budgetReached,
  childBudgetShare,
  SUBAGENT_BRIEF_MAX_CHARS,
  SUBAGENT_LOG_ENTRY_CHARS,
  SUBAGENT_MAX_AGGREGATE_ITERATIONS,
  SUBAGENT_MAX_TOOL_ITERATIONS,
  subagentBriefs,
  subagentIterationCap,
  type SubagentReport,
} from '../../workflows/rules/subagents';
import { formatSubagentReports } from '../../prompts/conversation';

describe('sub-agent rules (seed D1-5)', () => {
  test('the aggregate iteration allowance is shared: 10 children get 10 each, one child is capped at the single cap', () => {
    expect(subagentIterationCap(10)).toBe(SUBAGENT_MAX_AGGREGATE_ITERATIONS / 10);
    expect(subagentIterationCap(1)).toBe(SUBAGENT_MAX_TOOL_ITERATIONS);
    for (let n = 1; n <= 10; n++)
      expect(subagentIterationCap(n) * n).toBeLessThanOrEqual(SUBAGENT_MAX_AGGREGATE_ITERATIONS);
  });

  test('children share what the tree has left, keeping one share for the parent; no budget, no share', () => {
    expect(childBudgetShare(1, 0.1, 2)).toBeCloseTo(0.3, 10); // 0.9 left, 3 shares: 2 children + the parent
    expect(childBudgetShare(1, 1.5, 2)).toBe(0);
    expect(childBudgetShare(null, 5, 3)).toBeNull();
    expect(budgetReached(1, 1)).toBe(true);
    expect(budgetReached(1, 0.99)).toBe(false);
    expect(budgetReached(null, 1e9)).toBe(false);
  });

  test('the parent result keeps 500 chars of an answer or an error and caps the whole entry at 10,000', () => {
    const long = 'x'.repeat(2_000);
    const reports: SubagentReport[] = Array.from({ length: 10 }, (_, i) =>
      i % 2 === 0
        ? {
            workflowId: `w-sub-${i + 1}`,
            task: long,
            status: 'completed',
            result: long,
            iterations: 1,
            capped: false,
            costUsd: 0,
          }
        : { workflowId: `w-sub-${i + 1}`, task: 'small', status: 'failed', error: long, costUsd: 0 },
    );
    const text = formatSubagentReports(reports);
    expect(text.startsWith('10 sub-agents finished: 5 completed, 5 failed.')).toBe(true);
    expect(text.length).toBeLessThanOrEqual(SUBAGENT_LOG_ENTRY_CHARS);
    const first = text.split('### Sub-agent 2')[0]!;
    expect(first).toContain(`Result: ${'x'.repeat(499)}…`);
    expect(first).not.toContain('x'.repeat(501));
  });

  test('spawn_subagents refuses 11 briefs, an empty task and an oversized brief; both tools give the same briefs', () => {
    const eleven = { subagents: Array.from({ length: 11 }, () => ({ task: 't' })) };
    const tooMany = spawnSubagents.schema.safeParse(eleven);
    expect(tooMany.success).toBe(false);
    expect(JSON.stringify(tooMany.error?.issues)).toContain('at most 10 sub-agents run in parallel; none was started');
    expect(spawnSubagents.schema.safeParse({ subagents: [{ task: '  ' }] }).success).toBe(false);
    expect(
      spawnSubagents.schema.safeParse({ subagents: [{ task: 'a', context: 'b'.repeat(SUBAGENT_BRIEF_MAX_CHARS) }] })
        .success,
    ).toBe(false);
    expect(subagentBriefs('spawn_subagent', { task: 'a', context: ' ' })).toEqual([{ task: 'a' }]);
    expect(subagentBriefs('spawn_subagents', { subagents: [{ task: 'a' }, { task: 'b', context: 'c' }] })).toEqual([
      { task: 'a' },
      { task: 'b', context: 'c' },
    ]);
  });
});

describe('the CLI view of a tree budget', () => {
  test('one line for the tree, one per node, and the hold is called out', () => {
    const text = describeBudget({
      limitUsd: 0.5,
      spentUsd: 2.25,
      held: true,
      nodes: [
        { workflowId: 'task-t-r1', spentUsd: 0.25, limitUsd: 0.5, state: 'held' },
        { workflowId: 'task-t-r1-sub-1', spentUsd: 2, limitUsd: 0.15, state: 'held' },
      ],
    });
    expect(text.split('\n')).toEqual([
      'tree: $2.2500 spent of $0.5000 · HELD: waiting for a budget decision',
      '  task-t-r1: $0.2500 (cap $0.5000) · held',
      '  task-t-r1-sub-1: $2.0000 (cap $0.1500) · held',
    ]);
    expect(describeBudget({ limitUsd: null, spentUsd: 0, held: false, nodes: [] })).toBe(
      'tree: $0.0000 spent of no limit',
    );
  });
});
