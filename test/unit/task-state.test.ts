import { ApplicationFailure } from '@temporalio/common';
import {
  canTransition,
  INVALID_TRANSITION_ERROR,
  InvalidTaskTransitionError,
  isTerminal,
  TASK_STATES,
  TASK_TRANSITIONS,
  TERMINAL_STATES,
  transition,
  type TaskState,
} from '../../workflows/rules/task-state';

/** The design's documented transitions (plus pending → cancelled), as (from, to, trigger). */
const DOCUMENTED: Array<[TaskState, TaskState, string]> = [
  ['pending', 'in_progress', 'start, no blockers'],
  ['pending', 'blocked', 'start, has blockers'],
  ['pending', 'rejected', 'rejectTask'],
  ['pending', 'cancelled', 'cancelled before it started'],
  ['in_progress', 'review', 'execution finished'],
  ['in_progress', 'blocked', 'pause'],
  ['in_progress', 'failed', 'retries exhausted'],
  ['in_progress', 'cancelled', 'cancelTask'],
  ['blocked', 'in_progress', 'resume'],
  ['blocked', 'cancelled', 'cancel'],
  ['review', 'completed', 'accept'],
  ['review', 'in_progress', 'revise (new round)'],
  ['review', 'cancelled', 'cancel'],
  ['failed', 'in_progress', 'retry fresh'],
  ['failed', 'archived', 'archive'],
  ['completed', 'archived', 'archive'],
  ['cancelled', 'archived', 'archive'],
  ['rejected', 'archived', 'archive'],
  ['cancelled', 'in_progress', 'run now'],
];

describe('task state machine', () => {
  test('has the nine states of seed D1', () => {
    expect([...TASK_STATES].sort()).toEqual([
      'archived',
      'blocked',
      'cancelled',
      'completed',
      'failed',
      'in_progress',
      'pending',
      'rejected',
      'review',
    ]);
  });

  test.each(DOCUMENTED)('%s → %s is allowed (%s)', (from, to) => {
    expect(canTransition(from, to)).toBe(true);
    expect(transition(from, to)).toBe(to);
  });

  test('nothing else is allowed', () => {
    const allowed = new Set(DOCUMENTED.map(([from, to]) => `${from}→${to}`));
    for (const from of TASK_STATES) {
      for (const to of TASK_STATES) {
        expect([`${from}→${to}`, canTransition(from, to)]).toEqual([`${from}→${to}`, allowed.has(`${from}→${to}`)]);
      }
    }
    expect(Object.values(TASK_TRANSITIONS).flat()).toHaveLength(DOCUMENTED.length);
  });

  test('an illegal transition is refused with an error that names the allowed targets', () => {
    expect(() => transition('completed', 'in_progress')).toThrow(InvalidTaskTransitionError);
    expect(() => transition('review', 'failed')).toThrow(
      'illegal task transition review → failed; allowed from review: completed, in_progress, cancelled',
    );
    expect(() => transition('archived', 'pending')).toThrow('allowed from archived: none (terminal)');
    // An ApplicationFailure, non-retryable: thrown in a workflow it fails the workflow instead of hanging it.
    expect(() => transition('pending', 'review')).toThrow(ApplicationFailure);
    expect(() => transition('pending', 'review')).toThrow(
      expect.objectContaining({ type: INVALID_TRANSITION_ERROR, nonRetryable: true, from: 'pending', to: 'review' }),
    );
  });

  test('terminal states are completed, failed, rejected, cancelled and archived; archived leads nowhere', () => {
    expect([...TERMINAL_STATES].sort()).toEqual(['archived', 'cancelled', 'completed', 'failed', 'rejected']);
    expect(TASK_STATES.filter(isTerminal).sort()).toEqual([...TERMINAL_STATES].sort());
    expect(TASK_TRANSITIONS.archived).toEqual([]);
  });
});
