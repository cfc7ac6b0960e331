/**
 * Cognitive depth (seed D1 "LLM call taxonomy", seed-inventory A8): how many cheap preparation calls
 * precede the main call. Pure: no I/O, no imports, so workflows and tests can use it too.
 *
 * | depth | preparation calls | base scenarios |
 * | --- | --- | --- |
 * | D0 reflexive | none | heartbeat, memory consolidation (dream), post-task reflection |
 * | D1 reactive | appraisal | chat, A2A, comment responses, group chat, reviews, requirement actions |
 * | D2 deliberative | appraisal + directed retrieval (code) + reflection | task execution |
 * | D3 meta-cognitive | D2 + post-response evaluation | D2 with blockers |
 *
 * Upgrades, applied in order so they can chain (seed D1 code): D0 → D1 when the agent has failed
 * tasks; D1 → D2 when the stimulus is over 500 characters; D2 → D3 when there are blockers. The
 * result is clamped to the agent's `maxDepth`.
 */

export type CognitiveDepth = 0 | 1 | 2 | 3;

export const DEPTH_REFLEXIVE: CognitiveDepth = 0;
export const DEPTH_REACTIVE: CognitiveDepth = 1;
export const DEPTH_DELIBERATIVE: CognitiveDepth = 2;
export const DEPTH_METACOGNITIVE: CognitiveDepth = 3;

/** Seed D1 (code): a stimulus longer than this is "a complex question" and earns D2. */
export const STIMULUS_UPGRADE_CHARS = 500;

/** Default ceiling when the agent enables preparation without naming one: the seed's full range. */
export const DEFAULT_MAX_COGNITIVE_DEPTH: CognitiveDepth = DEPTH_METACOGNITIVE;

/** The scenarios depth selection knows; our runtime's scenario names plus seed D1's other triggers. */
export type CognitiveScenario =
  | 'task'
  | 'chat'
  | 'heartbeat'
  | 'reflection'
  | 'consolidation'
  | 'a2a'
  | 'comment_response'
  | 'group_chat'
  | 'review'
  | 'requirement_action'
  | 'subagent';

/** Seed D1 A8: the depth each scenario starts from. */
export const SCENARIO_BASE_DEPTH: Readonly<Record<CognitiveScenario, CognitiveDepth>> = {
  heartbeat: DEPTH_REFLEXIVE,
  consolidation: DEPTH_REFLEXIVE,
  // Post-task reflection is an internal lightweight run, like the dream cycle.
  reflection: DEPTH_REFLEXIVE,
  chat: DEPTH_REACTIVE,
  a2a: DEPTH_REACTIVE,
  comment_response: DEPTH_REACTIVE,
  group_chat: DEPTH_REACTIVE,
  review: DEPTH_REACTIVE,
  requirement_action: DEPTH_REACTIVE,
  task: DEPTH_DELIBERATIVE,
  // A sub-agent's brief is already a prepared piece of work; it never runs the preparation pipeline.
  subagent: DEPTH_REACTIVE,
};

export interface DepthSignals {
  scenario: CognitiveScenario;
  /** Length of what the agent is responding to (the task description, the chat message). */
  stimulusChars: number;
  /** The agent has recently failed tasks (D0 → D1). */
  hasFailedTasks: boolean;
  /** Something blocks the work: blocked tasks, unmet dependencies (D2 → D3). */
  hasBlockers: boolean;
  /** The agent's ceiling; default D3. */
  maxDepth?: CognitiveDepth;
}

/** Seed D1 A8's depth selection with its upgrade rules, clamped to `maxDepth`. */
export function selectCognitiveDepth(signals: DepthSignals): CognitiveDepth {
  let depth = SCENARIO_BASE_DEPTH[signals.scenario] ?? DEPTH_REACTIVE;
  if (depth === DEPTH_REFLEXIVE && signals.hasFailedTasks) depth = DEPTH_REACTIVE;
  if (depth === DEPTH_REACTIVE && signals.stimulusChars > STIMULUS_UPGRADE_CHARS) depth = DEPTH_DELIBERATIVE;
  if (depth === DEPTH_DELIBERATIVE && signals.hasBlockers) depth = DEPTH_METACOGNITIVE;
  const ceiling = signals.maxDepth ?? DEFAULT_MAX_COGNITIVE_DEPTH;
  return Math.max(DEPTH_REFLEXIVE, Math.min(depth, ceiling)) as CognitiveDepth;
}

export interface CognitivePhases {
  /** P1: assess the situation, plan retrieval (LLM, D1+). */
  appraisal: boolean;
  /** P2: search memory with the appraisal's queries (code only, D2+). */
  retrieval: boolean;
  /** P3: persona-specific insights from what was retrieved (LLM, D2+). */
  reflection: boolean;
  /** P5: after the main response, was the prepared context adequate? (LLM, D3). */
  evaluation: boolean;
}

/** Which phases run at a depth (P4, assembly, is the notebook write and always follows). */
export function phasesForDepth(depth: CognitiveDepth): CognitivePhases {
  return {
    appraisal: depth >= DEPTH_REACTIVE,
    retrieval: depth >= DEPTH_DELIBERATIVE,
    reflection: depth >= DEPTH_DELIBERATIVE,
    evaluation: depth >= DEPTH_METACOGNITIVE,
  };
}

/** `D0`…`D3`, for events and logs. */
export function depthLabel(depth: CognitiveDepth): string {
  return `D${depth}`;
}

/** Parses an agent config's `maxDepth` (0–3, or "D0"–"D3"); anything else is the default. */
export function parseMaxDepth(value: unknown): CognitiveDepth {
  const n = typeof value === 'string' ? Number(value.replace(/^d/i, '')) : value;
  return n === 0 || n === 1 || n === 2 || n === 3 ? n : DEFAULT_MAX_COGNITIVE_DEPTH;
}
