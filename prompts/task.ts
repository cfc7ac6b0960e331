/**
 * What the task loop says to the model on its own: the task's opening message, the reminders and
 * checkpoints the round injects, the continuation after a cut-off answer, the note after an interrupted
 * attempt, the loop warning and the answer for a tool call the worker was killed in. Pure; the round
 * workflow and the step use these, the rules that decide *when* stay in workflows/rules/.
 */

/** How a task's opening message begins (compression keeps the message that carries it). */
export const TASK_PROMPT_HEADER = '[TASK EXECUTION';
export function reminderText(taskId: string, toolIterations: number): string {
  return (
    `[SYSTEM REMINDER — Task ${taskId}] You have used ${toolIterations} tool iterations. When the work is done, ` +
    `call task_submit_review with a summary of what you did. If you are blocked, say so in a task note and ` +
    `submit what you have rather than looping.`
  );
}

export function reflectionCheckpointText(toolIterations: number): string {
  return (
    `[REFLECTION CHECKPOINT] ${toolIterations} tool iterations so far. Pause and consider what you have learned: ` +
    `save durable insights with memory_save (tags ["insight", …]) and record progress in the notebook, then continue.`
  );
}

export function finalCriticalReminderText(taskId: string): string {
  return (
    `[SYSTEM — CRITICAL REMINDER — Task ${taskId}] You stopped without calling task_submit_review. The task is ` +
    `not finished until you call it. If the work is complete, call task_submit_review now with a summary; ` +
    `otherwise continue working and then submit.`
  );
}

export const CONTINUATION_PROMPT =
  '[SYSTEM] Your previous response was cut off because it reached the maximum output length. Continue exactly where you left off.';

export const INTERRUPTED_RETRY_TEXT =
  '[SYSTEM: Your previous execution attempt was interrupted. Review the conversation above, check what was already done, and continue from where you left off. Do not redo completed work.]';

/** The first user message of a task session. Carries the marker compression protects. */
export function taskPromptText(
  task: { id: string; title: string; description: string; notes?: string[] },
  revisionFeedback?: string,
): string {
  const parts = [`${TASK_PROMPT_HEADER} — Task ID: ${task.id}]`, `# ${task.title}`, task.description];
  if (task.notes?.length) parts.push('## Notes from earlier rounds', ...task.notes.map((n) => `- ${n}`));
  if (revisionFeedback) {
    parts.push(
      '## 🔴 REVISION REQUIRED — reviewer feedback',
      revisionFeedback,
      'Your earlier submission was not accepted. Address every point of the feedback, then submit again.',
    );
  }
  parts.push(
    '## Completion Requirements — MANDATORY',
    'Work step by step with your tools. When the work is done you MUST call task_submit_review with a concise summary of what you did and where the results are. The task is not complete until you do.',
  );
  return parts.join('\n\n');
}

export const LOOP_WARNING_TEXT =
  '[SYSTEM] Loop detected: you are repeating the same tool calls without progress. Change approach, or answer with what you have.';

/**
 * A side-effecting call that began and whose result was never stored: reported to the model, never run
 * again. The process settling it did not run it, so it cannot tell whether the worker that did stopped
 * or only lost its database before storing the result; it says both.
 */
export function interruptedToolCallText(tool: string): string {
  return (
    `Tool call ${tool} was interrupted: it began, but its result was never stored (the worker running it stopped, or lost its database), so its outcome is unknown. ` +
    `It was NOT run again. Check its effect (for example read the file or run a read-only command) before retrying it.`
  );
}

/** A call the model asked for that never started (its attempt ended first): it had no effect. */
export function notRunToolCallText(tool: string): string {
  return (
    `Tool call ${tool} was not run: the attempt that asked for it ended before it started (the worker stopped or lost its database), so it had no effect. ` +
    `Call it again if you still need it.`
  );
}

/** A call whose result was never stored, whose tool could tell that its effect never landed. */
export function notLandedToolCallText(tool: string): string {
  return (
    `Tool call ${tool} was not run: its attempt ended (the worker stopped, or lost its database) before its effect landed, so nothing changed. ` +
    `Call it again if you still need it.`
  );
}

/** A task comment that reached a running round, as the model reads it. */
export function roundCommentText(from: string | undefined, text: string): string {
  return `[COMMENT${from ? ` from ${from}` : ''}] ${text}`;
}
