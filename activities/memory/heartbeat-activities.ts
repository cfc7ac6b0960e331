import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import type { HeartbeatOutcome } from '../../workflows/contract';
import type { IdleState } from '../../workflows/rules/heartbeat-rules';
import { agentConfig, type AgentConfig } from '../store/agents';
import { toolsForAgent } from '../tools/registry';
import { dailyReportDue, dailyReportTitle, DAILY_REPORT_MAX_WORDS } from './daily-report';
import { activeGoals, advanceGoals } from '../tools/goal-tools';
import { heartbeatFingerprint } from './fingerprint';
import { HEARTBEAT_FAILED_TASKS_MAX, heartbeatPrompt } from '../../prompts/memory';
import { localDay } from './store';
import type { MemorySessions } from './scenario-session';

/** Heartbeat "quality signal" window: the revision rate over tasks reviewed in this period. */
export const QUALITY_WINDOW_MS = 14 * 24 * 60 * 60_000;

/**
 * The heartbeat's activities: what it watches (the idle fingerprint), its check-in prompt, and its
 * recorded outcome. Idempotent: a retry re-appends nothing and records once per workflow id.
 */
export function createHeartbeatActivities(
  db: Kysely<Database>,
  { requireAgent, writePrompt, replyText }: MemorySessions,
) {
  async function dailyReportSection(agentId: string, config: AgentConfig, now: Date) {
    const due = await dailyReportDue(db, agentId, config, now);
    return due && { ...due, maxWords: DAILY_REPORT_MAX_WORDS, title: dailyReportTitle(due.day) };
  }

  /** What the heartbeat watches; a manager's due report counts, so the idle check does not skip it. */
  async function watchedFingerprint(agentId: string): Promise<string> {
    const fingerprint = await heartbeatFingerprint(db, agentId);
    const agent = await requireAgent(agentId);
    const due = await dailyReportDue(db, agentId, agentConfig(agent), new Date());
    return due ? `${fingerprint}:report-due:${due.day}` : fingerprint;
  }

  return {
    /** The fingerprint of what the heartbeat watches, and the idle state the last heartbeat left. */
    async heartbeatBegin(input: { agentId: string }): Promise<{ fingerprint: string; previous?: IdleState }> {
      await requireAgent(input.agentId);
      const fingerprint = await watchedFingerprint(input.agentId);
      const last = await db
        .selectFrom('heartbeat_runs')
        .select(['fingerprint', 'skipped_in_row'])
        .where('agent_id', '=', input.agentId)
        .orderBy('id', 'desc')
        .executeTakeFirst();
      return {
        fingerprint,
        ...(last ? { previous: { fingerprint: last.fingerprint, skippedInRow: last.skipped_in_row } } : {}),
      };
    },

    /** Writes the `[HEARTBEAT CHECK-IN]` prompt as the first message of the heartbeat session. */
    async heartbeatPrepare(input: { agentId: string; sessionId: string }): Promise<{ promptChars: number }> {
      const agent = await requireAgent(input.agentId);
      const config = agentConfig(agent);
      const now = new Date();
      const last = await db
        .selectFrom('heartbeat_runs')
        .select(['summary', 'created_at'])
        .where('agent_id', '=', input.agentId)
        .where('summary', 'is not', null)
        .orderBy('id', 'desc')
        .executeTakeFirst();
      const failed = await db
        .selectFrom('tasks')
        .select(['id', 'title', 'last_error'])
        .where('agent_id', '=', input.agentId)
        .where('state', '=', 'failed')
        .orderBy('updated_at', 'desc')
        .limit(HEARTBEAT_FAILED_TASKS_MAX)
        .execute();
      const blocked = await db
        .selectFrom('tasks')
        .select(['id', 'title'])
        .where('agent_id', '=', input.agentId)
        .where('state', '=', 'blocked')
        .orderBy('updated_at', 'desc')
        .limit(HEARTBEAT_FAILED_TASKS_MAX)
        .execute();
      const quality = await db
        .selectFrom('tasks')
        .select((eb) => [
          eb.fn.countAll<string>().as('reviewed'),
          eb.fn.count<string>(eb.case().when('round', '>', 1).then(1).end()).as('revised'),
        ])
        .where('agent_id', '=', input.agentId)
        .where('state', '=', 'completed')
        .where('completed_at', '>', new Date(now.getTime() - QUALITY_WINDOW_MS))
        .executeTakeFirstOrThrow();
      const text = heartbeatPrompt({
        now: `${localDay(now, config.timezone)} ${now.toISOString().slice(11, 16)} UTC`,
        checklist: agent.heartbeat_md,
        lastHeartbeat: last?.summary
          ? { at: last.created_at.toISOString().slice(0, 16).replace('T', ' '), summary: last.summary }
          : undefined,
        goals: (await activeGoals(db, input.agentId)).map((g) => ({
          title: `${g.title} [${g.id}]`,
          status: g.status,
          currentIteration: g.current_iteration,
          maxIterations: g.max_iterations,
          criteria: g.criteria,
        })),
        failedTasks: failed.map((t) => ({ id: t.id, title: t.title, error: t.last_error })),
        blockedTasks: blocked,
        quality: { reviewed: Number(quality.reviewed), revised: Number(quality.revised) },
        tools: new Set(toolsForAgent('heartbeat', config).keys()),
        dailyReport: await dailyReportSection(input.agentId, config, now),
      });
      await writePrompt(input.agentId, input.sessionId, 'heartbeat', text);
      return { promptChars: text.length };
    },

    /**
     * Records a heartbeat's outcome (once per workflow id). A run that acted stores its final reply as
     * the "last heartbeat summary" and the fingerprint as it is *after* its own actions, so what the
     * heartbeat did itself does not wake the next one. HEARTBEAT_OK stores no summary.
     */
    async heartbeatRecord(input: {
      agentId: string;
      workflowId: string;
      outcome: HeartbeatOutcome | 'failed';
      fingerprint: string;
      skippedInRow: number;
      toolIterations: number;
      sessionId?: string;
      lastTurn?: number;
    }): Promise<void> {
      let fingerprint = input.fingerprint;
      let summary: string | null = null;
      if (input.outcome === 'ok' || input.outcome === 'acted' || input.outcome === 'iteration-cap') {
        // The goal loop: a check-in that ran is one iteration of every active goal.
        await advanceGoals(db, input.agentId, input.workflowId);
        fingerprint = await watchedFingerprint(input.agentId);
      }
      if (input.outcome === 'acted' || input.outcome === 'iteration-cap') {
        if (input.sessionId && input.lastTurn !== undefined)
          summary = (await replyText(input.sessionId, 1, input.lastTurn)) || null;
      }
      // A failed heartbeat must not make the next one look idle.
      if (input.outcome === 'failed') fingerprint = '';
      await db
        .insertInto('heartbeat_runs')
        .values({
          agent_id: input.agentId,
          workflow_id: input.workflowId,
          session_id: input.sessionId ?? null,
          outcome: input.outcome,
          fingerprint,
          skipped_in_row: input.skippedInRow,
          tool_iterations: input.toolIterations,
          summary,
        })
        .onConflict((oc) => oc.column('workflow_id').doNothing())
        .execute();
    },
  };
}
