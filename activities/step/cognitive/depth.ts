/**
 * Cognitive depth: how many cheap preparation calls
 * precede the main call. Pure: no I/O, no imports, so workflows and tests can use it too.
 *
 * | depth | preparation calls | base scenarios |
 * | --- | --- | --- |
 * | 0 reflexive | none | heartbeat, memory consolidation (dream), post-task reflection |
 * | 1 reactive | appraisal | chat, A2A, comment responses, group chat, reviews, requirement actions |
 * | 2 deliberative | appraisal + directed retrieval (code) + reflection | task execution |
 * | 3 meta-cognitive | deliberative + post-response evaluation | task execution with blockers |
 *
 * Upgrades, applied in order so they can chain: reflexive → reactive when the agent has
 * failed tasks; reactive → deliberative when the stimulus is over 500 characters; deliberative →
 * meta-cognitive when there are blockers. The
 * result is clamped to the agent's `maxDepth`.
 */

export type CognitiveDepth = 0 | 1 | 2 | 3;

export const DEPTH_REFLEXIVE: CognitiveDepth = 0;
export const DEPTH_REACTIVE: CognitiveDepth = 1;
export const DEPTH_DELIBERATIVE: CognitiveDepth = 2;
export const DEPTH_METACOGNITIVE: CognitiveDepth = 3;

/** A stimulus longer than this is "a complex question" and earns the deliberative depth. */
export const STIMULUS_UPGRADE_CHARS = 500;

/** Default ceiling when the agent enables preparation without naming one: the full range. */
export const DEFAULT_MAX_COGNITIVE_DEPTH: CognitiveDepth = DEPTH_METACOGNITIVE;

/** The scenarios depth selection knows; our runtime's scenario names plus the design's other triggers. */
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

/** The depth each scenario starts from. */
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
  /** The agent has recently failed tasks (reflexive → reactive). */
  hasFailedTasks: boolean;
  /** Something blocks the work: blocked tasks, unmet dependencies (deliberative → meta-cognitive). */
  hasBlockers: boolean;
  /** The agent's ceiling; default meta-cognitive. */
  maxDepth?: CognitiveDepth;
}

/** Depth selection with its upgrade rules, clamped to `maxDepth`. */
export function selectCognitiveDepth(signals: DepthSignals): CognitiveDepth {
  let depth = SCENARIO_BASE_DEPTH[signals.scenario] ?? DEPTH_REACTIVE;
  if (depth === DEPTH_REFLEXIVE && signals.hasFailedTasks) depth = DEPTH_REACTIVE;
  if (depth === DEPTH_REACTIVE && signals.stimulusChars > STIMULUS_UPGRADE_CHARS) depth = DEPTH_DELIBERATIVE;
  if (depth === DEPTH_DELIBERATIVE && signals.hasBlockers) depth = DEPTH_METACOGNITIVE;
  const ceiling = signals.maxDepth ?? DEFAULT_MAX_COGNITIVE_DEPTH;
  return Math.max(DEPTH_REFLEXIVE, Math.min(depth, ceiling)) as CognitiveDepth;
}

export interface CognitivePhases {
  /** P1: assess the situation, plan retrieval (LLM, reactive and deeper). */
  appraisal: boolean;
  /** P2: search memory with the appraisal's queries (code only, deliberative and deeper). */
  retrieval: boolean;
  /** P3: persona-specific insights from what was retrieved (LLM, deliberative and deeper). */
  reflection: boolean;
  /** P5: after the main response, was the prepared context adequate? (LLM, meta-cognitive only). */
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

/** The depth's label in events and logs (`D` and its number, as agent configs may write it). */
export function depthLabel(depth: CognitiveDepth): string {
  return `D${depth}`;
}

/** Parses an agent config's `maxDepth` (0–3, or "D0"–"D3"); anything else is the default. */
export function parseMaxDepth(value: unknown): CognitiveDepth {
  const n = typeof value === 'string' ? Number(value.replace(/^d/i, '')) : value;
  return n === 0 || n === 1 || n === 2 || n === 3 ? n : DEFAULT_MAX_COGNITIVE_DEPTH;
}
