/**
 * Checks a task workflow's input, which may come from any Temporal client (CLI, Web UI, a Schedule, a
 * service in another language). Pure: used by the workflow and by the client for a fast error.
 */
import { TASK_PRIORITIES, type TaskWorkflowInput } from '../contract';

/** Task ids become workflow ids (`task-{id}`) and session ids: printable, no whitespace, bounded. */
export const TASK_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:+-]{0,199}$/;
/** Long enough for any real title; a title is a headline, the description carries the detail. */
export const MAX_TASK_TITLE_LENGTH = 500;
/** The description goes into the task prompt: 100K characters is far more than a prompt should carry. */
export const MAX_TASK_DESCRIPTION_LENGTH = 100_000;

/**
 * Every field of `TaskWorkflowInput`. Any other is refused, not dropped: a misspelt or invented field
 * (`budget` for `costBudgetUsd`) would otherwise start a task without what its sender asked for. The
 * published JSON Schema (api/temporal-contract.ts) has `additionalProperties: false` to match.
 */
export const TASK_INPUT_FIELDS = [
  'taskId',
  'agentId',
  'title',
  'description',
  'priority',
  'createdBy',
  'approvalTimeoutMs',
  'costBudgetUsd',
  'carry',
  'restart',
  'fork',
] as const satisfies ReadonlyArray<keyof TaskWorkflowInput>;
/** Compiles only while TASK_INPUT_FIELDS names every field of the contract. */
const _everyFieldListed: Record<Exclude<keyof TaskWorkflowInput, (typeof TASK_INPUT_FIELDS)[number]>, never> = {};

/** What is wrong with the input, in words; undefined when it is usable. `taskId` is the resolved id. */
export function taskInputProblem(input: Partial<TaskWorkflowInput> | undefined, taskId: string): string | undefined {
  if (!input || typeof input !== 'object')
    return 'the input must be an object { taskId, agentId, title, description?, priority?, createdBy? }';
  const unknown = Object.keys(input).filter((k) => !(TASK_INPUT_FIELDS as readonly string[]).includes(k));
  if (unknown.length)
    return `unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => JSON.stringify(k)).join(', ')}: a task's input has only ${TASK_INPUT_FIELDS.join(', ')}`;
  if (!TASK_ID_PATTERN.test(taskId))
    return `invalid taskId ${JSON.stringify(taskId)}: 1-200 letters, digits or . _ : + -, starting with a letter or digit`;
  if (typeof input.agentId !== 'string' || !input.agentId) return 'agentId is required: the id of an existing agent';
  if (input.title !== undefined && (typeof input.title !== 'string' || input.title.length > MAX_TASK_TITLE_LENGTH)) {
    return `title must be a string of at most ${MAX_TASK_TITLE_LENGTH} characters`;
  }
  if (
    input.description !== undefined &&
    (typeof input.description !== 'string' || input.description.length > MAX_TASK_DESCRIPTION_LENGTH)
  ) {
    return `description must be a string of at most ${MAX_TASK_DESCRIPTION_LENGTH} characters`;
  }
  for (const field of ['title', 'description', 'createdBy'] as const) {
    if (typeof input[field] === 'string' && input[field].includes('\u0000'))
      return `${field} contains a NUL character (U+0000), which cannot be stored: remove it`;
  }
  if (input.priority !== undefined && !(TASK_PRIORITIES as readonly unknown[]).includes(input.priority)) {
    return `priority must be one of ${TASK_PRIORITIES.join(', ')}, got ${JSON.stringify(input.priority)}`;
  }
  if (input.createdBy !== undefined && typeof input.createdBy !== 'string') return 'createdBy must be a string';
  if (
    input.approvalTimeoutMs !== undefined &&
    !(Number.isFinite(input.approvalTimeoutMs) && input.approvalTimeoutMs > 0)
  ) {
    return 'approvalTimeoutMs must be a positive number of milliseconds';
  }
  if (
    input.costBudgetUsd !== undefined &&
    !(typeof input.costBudgetUsd === 'number' && Number.isFinite(input.costBudgetUsd) && input.costBudgetUsd > 0)
  ) {
    return 'costBudgetUsd must be a positive number of US dollars';
  }
  if (input.carry !== undefined) {
    // Only the workflow itself writes a carry, when it continues as new in one of these two states.
    const carry = input.carry as Partial<NonNullable<TaskWorkflowInput['carry']>> | null;
    if (
      !carry ||
      (carry.state !== 'in_progress' && carry.state !== 'review') ||
      !Number.isInteger(carry.round) ||
      (carry.round ?? 0) < 1
    ) {
      return 'carry is written by the workflow when it continues as new; leave it out to start a task';
    }
  }
  if (input.restart !== undefined) {
    const restart = input.restart as Partial<NonNullable<TaskWorkflowInput['restart']>> | null;
    if (
      !restart ||
      (restart.kind !== 'retry' && restart.kind !== 'rerun') ||
      !Number.isInteger(restart.afterRound) ||
      (restart.afterRound ?? -1) < 0
    ) {
      return 'restart must be { kind: "retry" | "rerun", afterRound: the task\'s last round }';
    }
    if (input.carry !== undefined) return 'restart and carry cannot be combined';
  }
  if (input.fork !== undefined) {
    const fork = input.fork as Partial<NonNullable<TaskWorkflowInput['fork']>> | null;
    if (!fork || typeof fork.sourceTaskId !== 'string' || !TASK_ID_PATTERN.test(fork.sourceTaskId))
      return 'fork.sourceTaskId must be the id of a recorded task';
    if (!Number.isInteger(fork.atStep) || (fork.atStep ?? -1) < 0)
      return 'fork.atStep must be a whole number of steps, 0 or more';
    if (fork.round !== undefined && !(Number.isInteger(fork.round) && fork.round >= 1))
      return 'fork.round must be a round number, 1 or more';
    if (fork.sourceTaskId === taskId) return "a fork needs its own task id, not its source's";
  }
  return undefined;
}
