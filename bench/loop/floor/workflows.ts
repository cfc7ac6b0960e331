/**
 * Bench-only workflow (never registered in the product worker): the Temporal floor of a loop
 * iteration. Each iteration runs one no-op activity that waits `delayMs` (the fake provider's answer
 * time), as a regular activity or as a local one, so the bench shows what Temporal itself costs per
 * iteration on this machine, next to the product's loop.
 */
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { FloorActivities } from './activities';

/** Same retry shape as the product's step: retries never happen here (the activity cannot fail). */
const regular = proxyActivities<FloorActivities>({ startToCloseTimeout: '1 minute' });
const local = proxyLocalActivities<FloorActivities>({ startToCloseTimeout: '1 minute' });

export interface FloorInput {
  iterations: number;
  delayMs: number;
  kind: 'regular' | 'local';
}

export async function floorLoopWorkflow(input: FloorInput): Promise<number> {
  const step = input.kind === 'local' ? local.floorStep : regular.floorStep;
  for (let i = 0; i < input.iterations; i += 1) await step(input.delayMs);
  return input.iterations;
}
