import {
  DEFAULT_MAX_COGNITIVE_DEPTH,
  SCENARIO_BASE_DEPTH,
  STIMULUS_UPGRADE_CHARS,
  parseMaxDepth,
  phasesForDepth,
  selectCognitiveDepth,
  type CognitiveScenario,
  type DepthSignals,
} from '../../activities/step/cognitive/depth';

const calm = (scenario: CognitiveScenario, extra: Partial<DepthSignals> = {}): DepthSignals => ({
  scenario,
  stimulusChars: 100,
  hasFailedTasks: false,
  hasBlockers: false,
  ...extra,
});

describe('cognitive depth selection (seed D1 A8)', () => {
  test('base depth per scenario: D0 reflexive, D1 reactive, D2 task execution', () => {
    expect(selectCognitiveDepth(calm('heartbeat'))).toBe(0);
    expect(selectCognitiveDepth(calm('consolidation'))).toBe(0);
    expect(selectCognitiveDepth(calm('reflection'))).toBe(0);
    for (const s of [
      'chat',
      'a2a',
      'comment_response',
      'group_chat',
      'review',
      'requirement_action',
      'subagent',
    ] as const)
      expect(selectCognitiveDepth(calm(s))).toBe(1);
    expect(selectCognitiveDepth(calm('task'))).toBe(2);
    expect(Object.keys(SCENARIO_BASE_DEPTH)).toHaveLength(11);
  });

  test('D0 → D1 when the agent has failed tasks', () => {
    expect(selectCognitiveDepth(calm('heartbeat', { hasFailedTasks: true }))).toBe(1);
    expect(selectCognitiveDepth(calm('chat', { hasFailedTasks: true }))).toBe(1);
  });

  test('D1 → D2 when the stimulus is over 500 characters (500 itself is not)', () => {
    expect(STIMULUS_UPGRADE_CHARS).toBe(500);
    expect(selectCognitiveDepth(calm('chat', { stimulusChars: 500 }))).toBe(1);
    expect(selectCognitiveDepth(calm('chat', { stimulusChars: 501 }))).toBe(2);
  });

  test('D2 → D3 when there are blockers', () => {
    expect(selectCognitiveDepth(calm('task', { hasBlockers: true }))).toBe(3);
    expect(selectCognitiveDepth(calm('chat', { hasBlockers: true }))).toBe(1); // blockers alone do not lift the reactive depth
  });

  test('upgrades chain in order: a reflexive scenario with failures, a long stimulus and blockers reaches D3', () => {
    expect(
      selectCognitiveDepth(calm('heartbeat', { hasFailedTasks: true, stimulusChars: 2_000, hasBlockers: true })),
    ).toBe(3);
    expect(selectCognitiveDepth(calm('heartbeat', { stimulusChars: 2_000, hasBlockers: true }))).toBe(0); // no failure: stays reflexive
  });

  test('maxDepth clamps the result; the default ceiling is D3', () => {
    expect(DEFAULT_MAX_COGNITIVE_DEPTH).toBe(3);
    expect(selectCognitiveDepth(calm('task', { hasBlockers: true, maxDepth: 1 }))).toBe(1);
    expect(selectCognitiveDepth(calm('task', { maxDepth: 0 }))).toBe(0);
    expect(selectCognitiveDepth(calm('chat', { maxDepth: 3 }))).toBe(1); // a ceiling never raises
  });

  test('phases per depth: D1 appraisal; D2 + retrieval and reflection; D3 + evaluation', () => {
    expect(phasesForDepth(0)).toEqual({ appraisal: false, retrieval: false, reflection: false, evaluation: false });
    expect(phasesForDepth(1)).toEqual({ appraisal: true, retrieval: false, reflection: false, evaluation: false });
    expect(phasesForDepth(2)).toEqual({ appraisal: true, retrieval: true, reflection: true, evaluation: false });
    expect(phasesForDepth(3)).toEqual({ appraisal: true, retrieval: true, reflection: true, evaluation: true });
  });

  test('maxDepth from config: numbers or D-labels, anything else is the default', () => {
    expect(parseMaxDepth(2)).toBe(2);
    expect(parseMaxDepth('D1')).toBe(1);
    expect(parseMaxDepth('d0')).toBe(0);
    expect(parseMaxDepth(7)).toBe(3);
    expect(parseMaxDepth(undefined)).toBe(3);
  });
});
