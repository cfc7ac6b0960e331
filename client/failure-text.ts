import { apiAnswerOf } from './errors';

/**
 * A failure as the CLI prints it: what the HTTP API would answer for it, in the API's words with its
 * code (`error: task t1 is completed; it no longer takes cancellation (409 task_finished)`), else the
 * error's own message. The CLI then exits non-zero.
 */
export function describeFailure(error: unknown): string {
  const answer = apiAnswerOf(error);
  if (answer) return `error: ${answer.message} (${answer.status} ${answer.code})`;
  return `error: ${error instanceof Error ? error.message : String(error)}`;
}
