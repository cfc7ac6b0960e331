/**
 * Rules of the task graph (subtasks and dependencies) as pure functions and named constants, shared by
 * the task tools, the client and the task workflow's start gates.
 */
import type { TaskState } from './task-state';

/** A dependency is satisfied once it completed; archiving a dependency is a human's "it no longer blocks". */
export const DEPENDENCY_SATISFIED_STATES: readonly TaskState[] = ['completed', 'archived'];
/** A dependency in one of these will not complete by itself: its dependants wait for a human (retry, rerun or cancel). */
export const DEPENDENCY_DEAD_STATES: readonly TaskState[] = ['failed', 'cancelled', 'rejected'];
/** Dependencies one task may have: more is a plan that belongs in subtasks, and a prompt that lists them all gets long. */
export const TASK_MAX_DEPENDENCIES = 20;
/** A soft cap: past this many subtasks the tool still creates one but says the split is too fine. */
export const SUBTASK_SOFT_CAP = 8;
/** Hard cap on subtasks of one task, so a looping agent cannot flood the board. */
export const SUBTASK_HARD_CAP = 50;
/**
 * A blocked task re-reads its dependencies this often even without a signal: the reconciliation that
 * makes a lost "dependency finished" signal cost a delay, never a stuck task. At 4 checks an hour a
 * blocked task's history grows ~600 events a day, far below Temporal's 51,200-event limit.
 */
export const DEPENDENCY_RECHECK_INTERVAL_MS = 15 * 60_000;
/** Task list page size (TASK_LIST_PAGE_SIZE 20, max 100). */
export const TASK_LIST_PAGE_SIZE = 20;
export const TASK_LIST_PAGE_MAX = 100;

export function isDependencySatisfied(state: string): boolean {
  return (DEPENDENCY_SATISFIED_STATES as readonly string[]).includes(state);
}

/**
 * The path that adding the edges `taskId → dependsOn` would close into a cycle, or undefined.
 * `edges` maps each task to what it already depends on. A cycle would leave every task on it blocked
 * forever, so it is refused before anything is written.
 */
export function dependencyCycle(
  edges: ReadonlyMap<string, readonly string[]>,
  taskId: string,
  dependsOn: readonly string[],
): string[] | undefined {
  for (const start of dependsOn) {
    if (start === taskId) return [taskId, taskId];
    // Depth-first from the new dependency: reaching taskId means taskId (indirectly) depends on itself.
    const stack: Array<{ node: string; path: string[] }> = [{ node: start, path: [taskId, start] }];
    const seen = new Set<string>();
    while (stack.length) {
      const { node, path } = stack.pop()!;
      if (seen.has(node)) continue;
      seen.add(node);
      for (const next of edges.get(node) ?? []) {
        if (next === taskId) return [...path, taskId];
        stack.push({ node: next, path: [...path, next] });
      }
    }
  }
  return undefined;
}
