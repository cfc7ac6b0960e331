/** The floor workflow's only activity: waits `delayMs` (0: returns at once) and does nothing else. */
export async function floorStep(delayMs: number): Promise<void> {
  if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
}

export const floorActivities = { floorStep };
export type FloorActivities = typeof floorActivities;
