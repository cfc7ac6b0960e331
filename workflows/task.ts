import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  isCancellation,
  patched,
  TemporalFailure,
  workflowInfo,
} from '@temporalio/workflow';
import { TaskFailureType, taskIdFromWorkflowId, type TaskWorkflowInput, type TaskWorkflowResult } from './contract';
import { OPEN_TASK_PATCH, START_GATES_PATCH, TASK_FAILURE_RECORDED_PATCH } from './patches';
import { taskInputProblem } from './rules/task-input';
import { isTerminal } from './rules/task-state';
import { openTask, passStartGates, recordTask } from './task-gates';
import { TaskRun } from './task-run';
import { announceOrg } from './org-attribute';

/**
 * A task's lifecycle: pending → in_progress → review → completed, with blocked (pause),
 * failed and cancelled; every move goes through the transition table of `rules/task-state.ts` and is
 * mirrored to PostgreSQL and the `TaskState` search attribute. Each execution round runs as the child
 * workflow `task-{taskId}-r{round}` with the session `task_{taskId}_r{round}`; the `reviewDecision`
 * signal accepts the work (→ completed, and the post-task reflection starts as an abandoned child) or
 * opens a revision round with a fresh session. A round that ends without a submission is retried in the
 * same session up to TASK_MAX_NO_SUBMIT_RETRIES times, then the task fails. Human decisions arrive as
 * signals/updates on this workflow and are forwarded to the running round.
 *
 * The run's state and its transitions live in `TaskRun` (task-run.ts); this function is its lifecycle.
 *
 * Cancelling this workflow cancels the round (stopping an in-flight LLM stream or shell command) and
 * records `cancelled` in a scope that cannot itself be cancelled. `pause` cancels the round the same
 * way but leaves the task `blocked`; `resume` runs the same round again in the same session.
 */
export async function taskWorkflow(input: TaskWorkflowInput): Promise<TaskWorkflowResult> {
  // A Schedule's runs carry no task id: each run is its own task, named after its workflow id.
  const taskId = input?.taskId ?? taskIdFromWorkflowId(workflowInfo().workflowId);
  const inputProblem = taskInputProblem(input, taskId);
  if (inputProblem)
    throw ApplicationFailure.create({
      type: TaskFailureType.invalidInput,
      message: `taskWorkflow input: ${inputProblem}`,
      nonRetryable: true,
    });
  const run = new TaskRun(input, taskId);
  run.installHandlers();
  run.announce();

  try {
    // A fresh task records itself, reads its gates and (with none) starts in one activity.
    const fresh = run.carry === undefined && run.state === 'pending' && (run.baseline || patched(OPEN_TASK_PATCH));
    let context: Awaited<ReturnType<typeof recordTask>>;
    let gates: Awaited<ReturnType<typeof openTask>>['gates'];
    if (fresh) {
      const opened = await openTask(input, taskId, { round: run.round + 1, attempt: run.attempt }, run.baseline);
      context = opened.context;
      gates = opened.gates;
      if (opened.started) run.startedByOpen();
    } else {
      context = await recordTask(input, taskId, run.carry !== undefined);
    }
    run.recorded = true;
    announceOrg(context.org);
    if (run.state === 'pending') {
      // Approval (agent-created tasks, where configured) and dependencies (blocked until they complete).
      const gate =
        fresh || (run.upFront?.startGates ?? patched(START_GATES_PATCH)) ? await passStartGates(run, gates) : 'start';
      if (gate === 'start') await run.startNextRound();
    }
    while (!isTerminal(run.state)) {
      await run.continueAsNewIfDue();
      if (run.state === 'in_progress') {
        if ((await run.runAttempt(context.modelLabel)) === 'end') break;
        continue;
      }
      if (run.state === 'review' && (await run.awaitReview()) === 'end') break;
    }
  } catch (error) {
    if (isCancellation(error)) {
      await run.cancelled();
    } else if (
      error instanceof TemporalFailure &&
      run.recorded &&
      !isTerminal(run.state) &&
      (run.upFront?.failureRecorded ?? patched(TASK_FAILURE_RECORDED_PATCH))
    ) {
      // Only failures that end the workflow: any other error fails just the workflow task, whose
      // commands are discarded and which Temporal retries (continue-as-new is not a failure either).
      await run.recordWorkflowFailure(error);
    }
    throw error;
  }
  await condition(allHandlersFinished);
  return run.result();
}
