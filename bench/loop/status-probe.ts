/**
 * What a status read costs while a task runs its loop: a task of quick calls (a chain of local steps
 * after the first) polled every STATUS_POLL_MS, once through `getStatus` and once, on a second task
 * of the same shape, through the round's `progress` query alone (what `getStatus` did before 0.10.0).
 * A query waits for the round's open workflow task, which a chain of local steps holds for up to
 * LOCAL_STEP_CHAIN_MAX_MS; `getStatus` stops waiting at ROUND_PROGRESS_WAIT_MS and reads the rows.
 */
import type { Client } from '@temporalio/client';
import type { AgentsClient } from '../../client';
import { roundProgressQuery, roundWorkflowId } from '../../workflows/contract';

const STATUS_POLL_MS = 200;
/** LLM calls of each probed task: enough quick steps for several seconds of chains. */
export const STATUS_PROBE_CALLS = 400;

export interface StatusProbe {
  polls: number;
  medianMs: number;
  maxMs: number;
  /** Polls whose iteration was below the one before it. */
  backwards: number;
  /** The highest iteration a poll reported (the task made STATUS_PROBE_CALLS - 1 tool iterations). */
  lastIteration: number;
}

/**
 * Polls `read` (which resolves to the iteration it saw) until `finished()`, one read at a time, each
 * STATUS_POLL_MS after the previous one ended.
 */
export async function probeStatus(read: () => Promise<number>, finished: () => Promise<boolean>): Promise<StatusProbe> {
  const times: number[] = [];
  let backwards = 0;
  let last = 0;
  while (!(await finished())) {
    const t0 = performance.now();
    const iteration = await read();
    times.push(performance.now() - t0);
    if (iteration < last) backwards += 1;
    last = Math.max(last, iteration);
    await new Promise((r) => setTimeout(r, STATUS_POLL_MS));
  }
  times.sort((a, b) => a - b);
  return {
    polls: times.length,
    medianMs: times[Math.floor(times.length / 2)] ?? 0,
    maxMs: times.at(-1) ?? 0,
    backwards,
    lastIteration: last,
  };
}

/** Reads through `getStatus`: the iteration it reports while the task is in progress. */
export const viaGetStatus = (agents: AgentsClient, taskId: string) => async (): Promise<number> =>
  (await agents.getStatus(taskId)).iteration;

/** Reads through the round's `progress` query alone, waiting for it however long it takes. */
export const viaRoundQuery = (temporal: Client, taskId: string) => async (): Promise<number> => {
  const progress = await temporal.workflow
    .getHandle(roundWorkflowId(taskId, 1))
    .query(roundProgressQuery)
    .catch(() => undefined);
  return progress?.iteration ?? 0;
};

export function statusProbeTable(rows: Array<[string, StatusProbe]>): string[] {
  return [
    `Status reads while a task of ${STATUS_PROBE_CALLS} quick calls runs (one read every ${STATUS_POLL_MS} ms after the previous one ended; a second task of the same shape for the second row):`,
    '',
    '| read | polls | median (ms) | max (ms) | went backwards | highest iteration seen |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
    ...rows.map(
      ([name, p]) =>
        `| ${name} | ${p.polls} | ${p.medianMs.toFixed(0)} | ${p.maxMs.toFixed(0)} | ${p.backwards} | ${p.lastIteration} |`,
    ),
  ];
}
