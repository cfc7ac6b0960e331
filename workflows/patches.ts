/**
 * Every `patched()` id the workflows use, in one registry. A patch keeps a workflow's old command order
 * for histories recorded before a change (`patched(id)` is false when replaying them); new runs write
 * the id as a marker and take the new branch. Each entry says when the patch was added, what its legacy
 * branch does, and when it may go.
 *
 * Support window (docs/operations.md, "Upgrades"): a release replays the histories of the last
 * SUPPORTED_RELEASES releases. A patch added in release R has legacy histories up to R-1, so it may be
 * deprecated (`deprecatePatch`, the legacy branch deleted) once R-1 has left the window, and removed
 * once no history in the window carries its marker. `test/unit/patches.test.ts` fails on a
 * `patched('literal')` or an id that is not here.
 */

/*
 * Up-front patches: why the runs of 0.8.0 on ask most patches in their first workflow task
 * (`TaskRun.upFront`, the round's `upFront`) rather than where the branch is taken. In replay,
 * `patched()` learns that a marker is present only while the workflow task that wrote it is replayed.
 * A local activity's result can reach the original run one workflow task later than it reaches a
 * replay: a query (the status poll) or the task's heartbeat makes the worker complete the workflow task
 * as soon as the activity ends, and the code after it runs in the next one. A `patched()` asked right
 * after a local activity could then be answered `false` in replay where the original run wrote the
 * marker, which fails as "Non-deprecated patch marker encountered … but there is no corresponding
 * change command". The first workflow task is the same in both. Runs recorded before 0.8.0 carry their
 * markers where they were asked, so they still ask there.
 */

/*
 * The release baseline: why the runs of 0.9.0 on ask one patch, not ten. A run of the task workflow, the
 * round or the agent asks `BASELINE_0_9_0_PATCH` first, in its first workflow task. A run that carries
 * its marker was started by 0.9.0 or later and takes the new branch of every patch listed here before it
 * without asking them: one marker (two events) per run instead of one per patch, and no patch asked after
 * a local activity (the agent's two were, since 0.3.0 and 0.4.0). A run recorded before 0.9.0 has no
 * baseline marker and asks each patch where it always did, so its history replays unchanged. A patch
 * added after the baseline is asked up front as usual, until the next baseline.
 */

/** Releases whose committed histories must replay: open runs of an older release are not supported by an upgrade. */
export const SUPPORTED_RELEASES = 4;

export interface PatchEntry {
  /** The marker id written into history; never change it once released. */
  id: string;
  /** The first release whose new runs took the patched branch. */
  addedIn: string;
  /** What runs recorded before the patch do (the branch `patched()` false keeps). */
  legacy: string;
  /** The release after which the patch may be deprecated (its legacy histories are out of the window). */
  deprecateAfter: string;
  /** Where it stands: `active` (both branches live) or `deprecated` (legacy branch deleted, marker still written). */
  status: 'active' | 'deprecated';
}

/** Rounds run the LLM call and the auto-allowed tools in one activity (`llmStepWithTools`). */
export const FUSED_STEP_PATCH = 'fused-llm-tool-step';
/**
 * A fresh round sends its task workflow no progress report at start: the task workflow already shows
 * that phase, iteration 0, zero usage and no approvals, and the signal cost a workflow task in both
 * workflows. A run continued as new still reports once (its carried usage).
 */
export const NO_START_REPORT_PATCH = 'round-no-start-report';
/** A pending task passes its start gates (approval, dependencies) before its first round. */
export const START_GATES_PATCH = 'task-start-gates';
/**
 * A `dependenciesChanged` wake that arrives while the gates are read or the blockers recorded is kept
 * (dependants are woken on every state change of a dependency, so a review and an accept in quick
 * succession are two wakes).
 */
export const DEPENDENCY_WAKE_KEPT_PATCH = 'task-dependency-wake-kept';
/** A fresh task records itself, reads its gates and starts in one activity (`openTask`). */
export const OPEN_TASK_PATCH = 'task-open-one-activity';
/** A failure that ends the task workflow is recorded on the task row first. */
export const TASK_FAILURE_RECORDED_PATCH = 'task-failure-recorded';
/** The agent loops instead of continuing as new while an update handler is still running. */
export const AGENT_WAITS_FOR_LATE_DELIVERIES_PATCH = 'agent-can-waits-for-late-deliveries';
/** An agent's answer on a thread opened from a task joins that task's running round. */
export const AGENT_ANSWERS_JOIN_TASK_PATCH = 'agent-answers-join-task';
/** A risky call under an approval policy waits with reminders, escalation, quorum, delegation and expiry. */
export const APPROVAL_POLICY_WAIT_PATCH = 'approval-policy-wait';
/** A cancelled round waits for every sub-agent to settle before it ends. */
export const SUBAGENTS_SETTLE_BEFORE_CANCEL_PATCH = 'subagents-settle-before-cancel';
/** The task row's opening and state moves run as local activities (`TASK_STORE_LOCAL`). */
export const TASK_STORE_LOCAL_PATCH = 'task-store-local-activities';
/**
 * A round runs a quick step after a quick one as a local activity (rules/step-placement.ts): one marker
 * event instead of an activity task, six events and a workflow task.
 */
export const LOCAL_STEP_PATCH = 'round-local-steps';
/** A task workflow records a round's stop request (pause, cancel) in PostgreSQL, where a local step sees it. */
export const ROUND_STOP_RECORDED_PATCH = 'task-round-stop-recorded';

/**
 * A run started by 0.9.0 or later: every patch above is taken without being asked (see 'The release
 * baseline' above). Asked first by the task workflow, the round and the agent.
 */
export const BASELINE_0_9_0_PATCH = 'baseline-0.9.0';
/**
 * A round places its steps with 5 s bounds instead of 1 s (`LOCAL_STEP_BOUNDS` in
 * rules/step-placement.ts): on a saturated worker, quick steps stay local. Asked up front.
 */
export const LOCAL_STEP_BOUNDS_5S_PATCH = 'round-local-step-bounds-5s';

/**
 * A round's run ends with a line that names the calls of its last step (a local activity that does
 * nothing: workflows/round-calls.ts); the steps before it are named by the next step's summary. Asked
 * up front.
 */
export const ROUND_LAST_CALLS_PATCH = 'round-last-calls-line';

export const PATCHES: readonly PatchEntry[] = [
  {
    id: FUSED_STEP_PATCH,
    addedIn: '0.2.0',
    // Only 0.1.0's rounds took the legacy loop; they are out of the window and their histories are gone.
    legacy:
      'two activities per iteration (llmStep, then executeTool for every call) and a progress signal every few iterations',
    deprecateAfter: '0.4.0',
    status: 'deprecated',
  },
  {
    id: START_GATES_PATCH,
    addedIn: '0.2.0',
    legacy: 'a pending task starts its first round without reading approval or dependency gates',
    deprecateAfter: '0.4.0',
    status: 'active',
  },
  {
    id: TASK_FAILURE_RECORDED_PATCH,
    addedIn: '0.2.0',
    legacy: 'a failure that ends the workflow leaves the task row in its last state',
    deprecateAfter: '0.4.0',
    status: 'active',
  },
  {
    id: NO_START_REPORT_PATCH,
    addedIn: '0.3.0',
    legacy: 'a fresh round signals its first progress report to the task workflow before its first step',
    deprecateAfter: '0.5.0',
    status: 'active',
  },
  {
    id: AGENT_WAITS_FOR_LATE_DELIVERIES_PATCH,
    addedIn: '0.3.0',
    legacy:
      'the agent continues as new even while a delivery handler is still running (the sender gets UnprocessedUpdate)',
    deprecateAfter: '0.5.0',
    status: 'active',
  },
  {
    id: AGENT_ANSWERS_JOIN_TASK_PATCH,
    addedIn: '0.4.0',
    legacy: "an agent's message that carries a task id starts a conversation run instead of joining the task's round",
    deprecateAfter: '0.6.0',
    status: 'active',
  },
  {
    id: SUBAGENTS_SETTLE_BEFORE_CANCEL_PATCH,
    addedIn: '0.4.0',
    legacy: 'Promise.all over the sub-agents: the first cancelled child ends the round and the others are terminated',
    deprecateAfter: '0.6.0',
    status: 'active',
  },
  {
    id: DEPENDENCY_WAKE_KEPT_PATCH,
    addedIn: '0.5.0',
    legacy:
      'the wake flag is cleared after the gates are read, so a wake during that work waits for the periodic recheck',
    deprecateAfter: '0.7.0',
    status: 'active',
  },
  {
    id: OPEN_TASK_PATCH,
    addedIn: '0.5.0',
    legacy: 'three activities at start: loadTaskContext, taskStartGates, recordTaskState',
    deprecateAfter: '0.7.0',
    status: 'active',
  },
  {
    id: APPROVAL_POLICY_WAIT_PATCH,
    addedIn: '0.6.0',
    legacy: 'one wait for the first decision until approvalTimeoutMs, then timed_out',
    deprecateAfter: '0.8.0',
    status: 'active',
  },
  {
    id: TASK_STORE_LOCAL_PATCH,
    addedIn: '0.7.0',
    legacy: 'openTask and every recordTaskState as activities: each an activity task and a workflow task more',
    deprecateAfter: '0.9.0',
    status: 'active',
  },
  {
    id: LOCAL_STEP_PATCH,
    addedIn: '0.8.0',
    legacy: 'every fused step as a regular activity',
    deprecateAfter: '0.10.0',
    status: 'active',
  },
  {
    id: ROUND_STOP_RECORDED_PATCH,
    addedIn: '0.8.0',
    legacy: 'a pause or cancel only cancels the round child workflow',
    deprecateAfter: '0.10.0',
    status: 'active',
  },
  {
    id: BASELINE_0_9_0_PATCH,
    addedIn: '0.9.0',
    legacy:
      'each earlier patch asked where its branch is taken (the agent asked two of them after a local activity), one marker per patch',
    deprecateAfter: '0.11.0',
    status: 'active',
  },
  {
    id: LOCAL_STEP_BOUNDS_5S_PATCH,
    addedIn: '0.10.0',
    legacy: 'a step runs locally after one under 1 s, and a chain of local steps is cut after 1 s',
    deprecateAfter: '0.12.0',
    status: 'active',
  },
  {
    id: ROUND_LAST_CALLS_PATCH,
    addedIn: '0.11.0',
    legacy: "a run ends without a line for its last step's calls (they are read from that step's result)",
    deprecateAfter: '0.13.0',
    status: 'active',
  },
];
