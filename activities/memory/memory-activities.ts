import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { createConsolidationActivities } from './consolidation-activities';
import { createHeartbeatActivities } from './heartbeat-activities';
import { createReflectionActivities } from './reflection-activities';
import { memorySessions } from './scenario-session';

export { QUALITY_WINDOW_MS } from './heartbeat-activities';
export { REJECTED_PLAN_RAW_CHARS, type DreamOutcome } from './consolidation-activities';

/**
 * Activities of the scheduled memory workflows: heartbeat, post-task reflection, daily report and
 * dream. Each takes and returns ids and small values; prompts are written straight into the session
 * (PostgreSQL) and replies are read back from it, so no conversation enters workflow history. All are
 * idempotent: a retry re-appends nothing and re-applies nothing.
 */
export function createMemoryActivities(deps: { db: Kysely<Database> }) {
  const sessions = memorySessions(deps.db);
  return {
    ...createHeartbeatActivities(deps.db, sessions),
    ...createReflectionActivities(deps.db, sessions),
    ...createConsolidationActivities(deps.db, sessions),
  };
}

export type MemoryActivities = ReturnType<typeof createMemoryActivities>;
