import { readFileSync } from 'node:fs';
import path from 'node:path';
import { armStopDeadline, closeInOrder, STOP_DEADLINE_MS, STOP_GRACE_MS } from '../../worker/graceful-stop';

describe('the stop of a process', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  test('the deadline falls inside the documented grace time, and docs/operations.md says which', () => {
    expect(STOP_DEADLINE_MS).toBeLessThan(STOP_GRACE_MS);
    // Kubernetes' default termination grace period: a process that keeps the promise is never killed.
    expect(STOP_GRACE_MS).toBeLessThanOrEqual(30_000);
    const operations = readFileSync(path.join(__dirname, '../../docs/operations.md'), 'utf8');
    expect(operations).toContain(`**Grace time: ${STOP_GRACE_MS / 1000} s.**`);
  });

  test('a step that never ends is named, and the process exits 0 at the deadline', async () => {
    const exit = jest.fn();
    const expired = jest.fn();
    const deadline = armStopDeadline(expired, { exit });
    const closed: string[] = [];
    const stopping = closeInOrder(
      [
        ['closing the health server', () => closed.push('health')],
        ['exporting the last spans', () => new Promise(() => undefined)], // a collector that never answers
        ['closing the database pool', () => closed.push('database')],
      ],
      { deadline, onError: () => undefined },
    );
    await jest.advanceTimersByTimeAsync(STOP_DEADLINE_MS - 1);
    expect([closed, expired.mock.calls, exit.mock.calls]).toEqual([['health'], [], []]);
    await jest.advanceTimersByTimeAsync(1);
    expect([expired.mock.calls, exit.mock.calls]).toEqual([[['exporting the last spans', STOP_DEADLINE_MS]], [[0]]]);
    void stopping;
  });

  test('a step that fails is reported and the next still runs', async () => {
    const errors: string[] = [];
    const closed: string[] = [];
    await closeInOrder(
      [
        ['closing the metrics server', () => closed.push('metrics')],
        [
          'exporting the last spans',
          () => {
            throw new Error('collector gone');
          },
        ],
        ['closing the database pool', async () => closed.push('database')],
      ],
      { onError: (what, error) => errors.push(`${what}: ${(error as Error).message}`) },
    );
    expect([closed, errors]).toEqual([['metrics', 'database'], ['exporting the last spans: collector gone']]);
  });
});
