/**
 * Reading Temporal failure chains (ChildWorkflowFailure → ActivityFailure → ApplicationFailure → …):
 * whether a failure may be retried and the message a person should see. Pure; used by workflows.
 */
import { ApplicationFailure } from '@temporalio/common';

/** The failure chain, outermost first (ChildWorkflowFailure → ActivityFailure → ApplicationFailure → …). */
export function failureChain(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (
    let current = error;
    current !== undefined && current !== null && chain.length < 10;
    current = (current as { cause?: unknown }).cause
  ) {
    chain.push(current);
    if (!(current instanceof Error)) break;
  }
  return chain;
}

/** Non-retryable when any application failure in the chain says so (e.g. a provider 401). */
export function isNonRetryable(error: unknown): boolean {
  return failureChain(error).some((e) => e instanceof ApplicationFailure && e.nonRetryable === true);
}

/** The message of the first application failure in the chain: ours, written for people. */
export function failureMessage(error: unknown): string {
  const chain = failureChain(error);
  const application = chain.find((e): e is ApplicationFailure => e instanceof ApplicationFailure);
  if (application) return application.message;
  const last = chain.at(-1);
  return last instanceof Error ? last.message : String(last);
}
