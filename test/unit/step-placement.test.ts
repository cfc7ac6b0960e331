import { ActivityFailure, ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../../workflows/failure-types';
import {
  FIRST_STEP_PLACEMENT,
  isRoundStop,
  LOCAL_STEP_BOUNDS,
  LOCAL_STEP_BOUNDS_0_8_0,
  LOCAL_STEP_CHAIN_MAX_MS,
  LOCAL_STEP_MAX_MS,
  nextStepPlacement,
  roundStopKey,
  type StepPlacement,
} from '../../workflows/rules/step-placement';

/** The placements of a run's steps, given each step's wall time. */
function placements(elapsed: Array<number | undefined>): string[] {
  let placement: StepPlacement = FIRST_STEP_PLACEMENT;
  const kinds: string[] = [];
  for (const ms of elapsed) {
    kinds.push(placement.kind);
    placement = nextStepPlacement(placement, ms);
  }
  return kinds;
}

describe('where a fused step runs', () => {
  test('the first step of a run is regular; a step after a quick one is local', () => {
    expect(FIRST_STEP_PLACEMENT.kind).toBe('regular');
    expect(placements([10, 10, 10])).toEqual(['regular', 'local', 'local']);
  });

  test('a step after a slow one (or one whose time is unknown) is regular', () => {
    expect(placements([10, LOCAL_STEP_MAX_MS, 10, 10])).toEqual(['regular', 'local', 'regular', 'local']);
    expect(placements([10, undefined, 10])).toEqual(['regular', 'local', 'regular']);
    expect(placements([LOCAL_STEP_MAX_MS - 1, 5])).toEqual(['regular', 'local']);
  });

  test('local steps in a row end with a regular one once they have taken LOCAL_STEP_CHAIN_MAX_MS in all', () => {
    const step = LOCAL_STEP_CHAIN_MAX_MS / 4;
    // The regular step's own time does not count; four local quarters reach the bound.
    expect(placements([step, step, step, step, step, step, step])).toEqual([
      'regular',
      'local',
      'local',
      'local',
      'local',
      'regular',
      'local',
    ]);
    const after = nextStepPlacement({ kind: 'local', chainMs: LOCAL_STEP_CHAIN_MAX_MS - 1 }, 1);
    expect(after).toEqual(FIRST_STEP_PLACEMENT);
  });

  test('runs recorded by 0.8.0 and 0.9.0 keep their 1 s bounds; runs since take 5 s', () => {
    expect(LOCAL_STEP_BOUNDS).toEqual({ stepMaxMs: 5_000, chainMaxMs: 5_000 });
    const legacy = (elapsed: number[]) => {
      let placement: StepPlacement = FIRST_STEP_PLACEMENT;
      return elapsed.map((ms) => {
        const kind = placement.kind;
        placement = nextStepPlacement(placement, ms, LOCAL_STEP_BOUNDS_0_8_0);
        return kind;
      });
    };
    // A 2 s step keeps the next one local now, and sends it back to a regular activity under 0.8.0's bounds.
    expect(placements([10, 2_000, 10])).toEqual(['regular', 'local', 'local']);
    expect(legacy([10, 2_000, 10])).toEqual(['regular', 'local', 'regular']);
    // Four local steps of 400 ms: one chain now; cut after the third under 0.8.0's bounds.
    expect(placements([10, 400, 400, 400, 400, 10])).toEqual(['regular', 'local', 'local', 'local', 'local', 'local']);
    expect(legacy([10, 400, 400, 400, 400, 10])).toEqual(['regular', 'local', 'local', 'local', 'regular', 'local']);
  });

  test("a stop request's key names the round and the attempt", () => {
    expect(roundStopKey(2, 3)).toBe('round-stop:2:3');
    expect(roundStopKey(2, 3)).not.toBe(roundStopKey(2, 4));
  });

  test("a local step's stop request is recognised whether it arrives wrapped in an ActivityFailure or bare", () => {
    const stop = ApplicationFailure.create({
      type: FailureType.RoundStopRequested,
      message: 'stop',
      nonRetryable: true,
    });
    const other = ApplicationFailure.create({ type: 'SomethingElse', message: 'other', nonRetryable: true });
    const wrapped = (cause: Error) =>
      new ActivityFailure('activity failed', 'llmStepWithTools', '1', undefined, undefined, cause);
    expect(isRoundStop(wrapped(stop))).toBe(true);
    expect(isRoundStop(stop)).toBe(true); // as a step resolved after the workflow task's heartbeats arrived in CI
    expect(isRoundStop(wrapped(other))).toBe(false);
    expect(isRoundStop(other)).toBe(false);
    expect(isRoundStop(new Error('stop'))).toBe(false);
  });
});
