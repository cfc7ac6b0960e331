import { dependencyCycle, isDependencySatisfied } from '../../workflows/rules/task-graph';

describe('task graph rules', () => {
  const edges = new Map<string, string[]>([
    ['build', ['design']],
    ['test', ['build']],
    ['docs', ['design']],
  ]);

  test('a dependency that leads back to the task is a cycle, reported as a path', () => {
    expect(dependencyCycle(edges, 'design', ['test'])).toEqual(['design', 'test', 'build', 'design']);
    expect(dependencyCycle(edges, 'design', ['design'])).toEqual(['design', 'design']);
  });

  test('dependencies that do not lead back are fine, including shared ones (a diamond)', () => {
    expect(dependencyCycle(edges, 'release', ['test', 'docs'])).toBeUndefined();
    expect(dependencyCycle(edges, 'test', ['docs'])).toBeUndefined();
  });

  test('only completed (or archived) dependencies release a task; failed ones keep it blocked', () => {
    expect(['completed', 'archived'].map(isDependencySatisfied)).toEqual([true, true]);
    expect(
      ['pending', 'in_progress', 'blocked', 'review', 'failed', 'cancelled', 'rejected'].some(isDependencySatisfied),
    ).toBe(false);
  });
});
