import { sql, type Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import type { HeartbeatOutcome } from '../../workflows/contract';
import type { IdleState } from '../../workflows/rules/heartbeat-rules';
import {
  checkDreamPlan,
  DAILY_REPORT_MAX_CHARS,
  DREAM_MAX_ENTRIES,
  DREAM_MIN_OBSERVATIONS,
  REFLECTION_MAX_PER_DAY,
  REFLECTION_NOTES,
  type DreamPlan,
} from '../../workflows/rules/memory-limits';
import { unknownAgent, unknownTask } from '../errors';
import type { TextBlock } from '../llm/types';
import { agentConfig, findAgent, type AgentConfig } from '../store/agents';
import { appendMessage, ensureSession, findMessage } from '../store/sessions';
import { findTask } from '../store/tasks';
import { assistantMessageKey } from '../tools/execute';
import { toolsForAgent } from '../tools/registry';
import { dailyReportDue, dailyReportTitle, DAILY_REPORT_MAX_WORDS } from './daily-report';
import { activeGoals, advanceGoals } from '../tools/goal-tools';
import { heartbeatFingerprint } from './fingerprint';
import { dailyReportPrompt, dreamPrompt, HEARTBEAT_FAILED_TASKS_MAX, heartbeatPrompt, reflectionPrompt } from './prompts';
import {
  countObservations,
  listKnowledge,
  localDay,
  MemoryLimitError,
  observationId,
  putKnowledgeSection,
  recentObservations,
  trimObservations,
  writeDailyLog,
} from './store';

/** Heartbeat "quality signal" window: the revision rate over tasks reviewed in this period. */
export const QUALITY_WINDOW_MS = 14 * 24 * 60 * 60_000;
/** Characters of a dream's raw reply kept when its plan is rejected (for the record, not for replay). */
export const REJECTED_PLAN_RAW_CHARS = 4_000;

const PROMPT_KEY = 'scenario-prompt';

/**
 * Activities of the scheduled memory workflows: heartbeat, post-task reflection, daily report and
 * dream. Each takes and returns ids and small values; prompts are written straight into the session
 * (PostgreSQL) and replies are read back from it, so no conversation enters workflow history. All are
 * idempotent: a retry re-appends nothing and re-applies nothing.
 */
export function createMemoryActivities(deps: { db: Kysely<Database> }) {
  const { db } = deps;

  async function requireAgent(agentId: string) {
    const agent = await findAgent(db, agentId);
    if (!agent) throw unknownAgent(agentId);
    return agent;
  }

  async function writePrompt(agentId: string, sessionId: string, kind: string, text: string): Promise<void> {
    await ensureSession(db, { id: sessionId, agentId, kind });
    await appendMessage(db, sessionId, PROMPT_KEY, { role: 'user', kind: 'task_prompt', content: [{ type: 'text', text }] });
  }

  async function replyText(sessionId: string, attempt: number, turn: number): Promise<string> {
    const message = await findMessage(db, sessionId, assistantMessageKey(attempt, turn));
    return (message?.content ?? []).filter((b): b is TextBlock => b.type === 'text').map((b) => b.text).join('\n').trim();
  }

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
    // ---- heartbeat -------------------------------------------------------------------------

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
      return { fingerprint, ...(last ? { previous: { fingerprint: last.fingerprint, skippedInRow: last.skipped_in_row } } : {}) };
    },

    /** Writes the `[HEARTBEAT CHECK-IN]` prompt (seed D1 E9) as the first message of the heartbeat session. */
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
        .select((eb) => [eb.fn.countAll<string>().as('reviewed'), eb.fn.count<string>(eb.case().when('round', '>', 1).then(1).end()).as('revised')])
        .where('agent_id', '=', input.agentId)
        .where('state', '=', 'completed')
        .where('completed_at', '>', new Date(now.getTime() - QUALITY_WINDOW_MS))
        .executeTakeFirstOrThrow();
      const text = heartbeatPrompt({
        now: `${localDay(now, config.timezone)} ${now.toISOString().slice(11, 16)} UTC`,
        checklist: agent.heartbeat_md,
        lastHeartbeat: last?.summary ? { at: last.created_at.toISOString().slice(0, 16).replace('T', ' '), summary: last.summary } : undefined,
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
        if (input.sessionId && input.lastTurn !== undefined) summary = (await replyText(input.sessionId, 1, input.lastTurn)) || null;
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

    // ---- post-task reflection --------------------------------------------------------------

    /**
     * Claims one of the agent's 5 daily reflections (counted in PostgreSQL under the agent's row lock)
     * and writes the reflection prompt with the execution trace. Idempotent per task: a retry, or a
     * second start for the same task, finds the earlier claim.
     */
    async reflectionBegin(input: { taskId: string; agentId: string; sessionId: string }): Promise<{ status: 'started' | 'rate-limited' | 'already-done' }> {
      const agent = await requireAgent(input.agentId);
      const task = await findTask(db, input.taskId);
      if (!task) throw unknownTask(input.taskId);
      const day = localDay(new Date(), agentConfig(agent).timezone);
      const claim = await db.transaction().execute(async (trx) => {
        await trx.selectFrom('agents').select('id').where('id', '=', input.agentId).forUpdate().executeTakeFirst();
        const existing = await trx.selectFrom('memory_reflections').select('status').where('task_id', '=', input.taskId).executeTakeFirst();
        if (existing) return existing.status === 'running' ? 'started' : existing.status === 'completed' ? 'already-done' : 'rate-limited';
        const used = await trx
          .selectFrom('memory_reflections')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('agent_id', '=', input.agentId)
          .where('day', '=', day)
          .where('status', 'in', ['running', 'completed'])
          .executeTakeFirstOrThrow();
        const status = Number(used.n) >= REFLECTION_MAX_PER_DAY ? 'rate-limited' : 'running';
        await trx
          .insertInto('memory_reflections')
          .values({ task_id: input.taskId, agent_id: input.agentId, day, status, session_id: status === 'running' ? input.sessionId : null, ...(status === 'rate-limited' ? { finished_at: new Date() } : {}) })
          .execute();
        return status === 'running' ? 'started' : 'rate-limited';
      });
      if (claim !== 'started') return { status: claim };

      const notes = await db
        .selectFrom('task_events')
        .select('data')
        .where('task_id', '=', input.taskId)
        .where('type', '=', 'note-added')
        .orderBy('id', 'desc')
        .limit(REFLECTION_NOTES)
        .execute();
      const toolCalls = await db
        .selectFrom('tool_calls')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('task_id', '=', input.taskId)
        .executeTakeFirstOrThrow();
      const end = task.completed_at ?? new Date();
      const text = reflectionPrompt({
        taskId: task.id,
        title: task.title,
        rounds: Math.max(1, task.round),
        durationMs: end.getTime() - task.created_at.getTime(),
        toolCalls: Number(toolCalls.n),
        resultSummary: task.result_summary ?? '',
        notes: notes.reverse().map((n) => String((n.data as { note?: unknown }).note ?? '')),
      });
      await writePrompt(input.agentId, input.sessionId, 'reflection', text);
      return { status: 'started' };
    },

    async reflectionFinish(input: { taskId: string; toolIterations: number }): Promise<void> {
      await db
        .updateTable('memory_reflections')
        .set({ status: 'completed', tool_iterations: input.toolIterations, finished_at: new Date() })
        .where('task_id', '=', input.taskId)
        .where('status', '=', 'running')
        .execute();
    },

    // ---- daily report ----------------------------------------------------------------------

    /** Writes the `[DAILY REPORT REQUEST]` prompt unless today's report exists (once a day). */
    async dailyReportPrepare(input: { agentId: string; sessionId: string }): Promise<{ status: 'ready' | 'exists'; day: string }> {
      const agent = await requireAgent(input.agentId);
      const timezone = agentConfig(agent).timezone;
      const now = new Date();
      const day = localDay(now, timezone);
      const existing = await db
        .selectFrom('memory_daily_logs')
        .select('session_id')
        .where('agent_id', '=', input.agentId)
        .where('day', '=', day)
        .where('kind', '=', 'daily-report')
        .executeTakeFirst();
      if (existing && existing.session_id !== input.sessionId) return { status: 'exists', day };
      const since = new Date(now.getTime() - 24 * 60 * 60_000);
      const tasks = await db
        .selectFrom('tasks')
        .select(['title', 'state'])
        .where('agent_id', '=', input.agentId)
        .where('updated_at', '>', since)
        .orderBy('updated_at', 'desc')
        .execute();
      const tokens = await db
        .selectFrom('llm_calls')
        .select((eb) => eb.fn.coalesce(eb.fn.sum<string>(sql`input_tokens + output_tokens + cache_read_tokens`), eb.lit(0)).as('n'))
        .where('agent_id', '=', input.agentId)
        .where('created_at', '>', since)
        .executeTakeFirstOrThrow();
      const previous = await db
        .selectFrom('memory_daily_logs')
        .select(['day', 'content'])
        .where('agent_id', '=', input.agentId)
        .where('kind', '=', 'daily-report')
        .where('day', '<', day)
        .orderBy('day', 'desc')
        .executeTakeFirst();
      await writePrompt(input.agentId, input.sessionId, 'daily-report', dailyReportPrompt({ day, tasksTouched: tasks, tokensToday: Number(tokens.n), previousReport: previous }));
      return { status: 'ready', day };
    },

    /** Stores the model's report in today's daily log (audit only; never read back into prompts). */
    async dailyReportSave(input: { agentId: string; sessionId: string; day: string; turn: number }): Promise<{ chars: number }> {
      const text = (await replyText(input.sessionId, 1, input.turn)).slice(0, DAILY_REPORT_MAX_CHARS);
      await writeDailyLog(db, input.agentId, input.day, 'daily-report', `## Daily Report\n\n${text || '(the model returned no text)'}`, input.sessionId);
      return { chars: text.length };
    },

    // ---- dream -----------------------------------------------------------------------------

    /**
     * Opens a dream when the agent has at least 50 observations and no dream ran today: records the
     * (at most 200) entries offered, the only ids a plan may name, and writes the dream prompt.
     */
    async dreamPrepare(input: { agentId: string; sessionId: string }): Promise<{ status: 'ready' | 'too-few' | 'already-ran'; observations: number }> {
      const agent = await requireAgent(input.agentId);
      const day = localDay(new Date(), agentConfig(agent).timezone);
      const total = await countObservations(db, input.agentId);
      const today = await db
        .selectFrom('memory_consolidations')
        .select(['session_id'])
        .where('agent_id', '=', input.agentId)
        .where('day', '=', day)
        .execute();
      if (today.some((r) => r.session_id !== input.sessionId)) return { status: 'already-ran', observations: total };
      if (today.length === 0 && total < DREAM_MIN_OBSERVATIONS) return { status: 'too-few', observations: total };
      if (today.length === 0) {
        const entries = await recentObservations(db, input.agentId, DREAM_MAX_ENTRIES);
        const text = dreamPrompt(entries, total, await listKnowledge(db, input.agentId));
        await ensureSession(db, { id: input.sessionId, agentId: input.agentId, kind: 'consolidation' });
        // The offered ids and the prompt that shows them are written together, or not at all.
        await db.transaction().execute(async (trx) => {
          const row = await trx
            .insertInto('memory_consolidations')
            .values({ agent_id: input.agentId, day, session_id: input.sessionId, status: 'planning', entries_offered: entries.length, offered_ids: entries.map((e) => e.id) })
            .onConflict((oc) => oc.column('session_id').doNothing())
            .returning('id')
            .executeTakeFirst();
          if (row) await appendMessage(trx, input.sessionId, PROMPT_KEY, { role: 'user', kind: 'task_prompt', content: [{ type: 'text', text }] });
        });
      }
      return { status: 'ready', observations: total };
    },

    /**
     * Validates the dream's plan and applies it in one transaction, or changes nothing and records why
     * (malformed JSON, an id not offered or no longer present, a cap exceeded, a knowledge limit hit).
     */
    async dreamApply(input: { agentId: string; sessionId: string; turn: number }): Promise<DreamOutcome> {
      const record = await db.selectFrom('memory_consolidations').selectAll().where('session_id', '=', input.sessionId).executeTakeFirst();
      if (!record) throw new Error(`no dream was prepared for session ${input.sessionId}`);
      if (record.status !== 'planning') return outcomeOf(record);
      const raw = await replyText(input.sessionId, 1, input.turn);
      const check = checkDreamPlan(raw, new Set(record.offered_ids));
      if (!check.ok) return reject(record.id, check.reason, raw);
      try {
        const counts = await applyDreamPlan(db, input.agentId, input.sessionId, check.plan);
        const row = await db
          .updateTable('memory_consolidations')
          .set({ status: 'applied', removed: counts.removed, merged: counts.merged, promoted: counts.promoted, plan: JSON.stringify(check.plan), finished_at: new Date() })
          .where('id', '=', record.id)
          .returningAll()
          .executeTakeFirstOrThrow();
        return outcomeOf(row);
      } catch (error) {
        if (error instanceof MemoryLimitError) return reject(record.id, error.message, raw);
        throw error;
      }
    },
  };

  async function reject(id: string, reason: string, raw: string): Promise<DreamOutcome> {
    const row = await db
      .updateTable('memory_consolidations')
      .set({ status: 'rejected', reason, plan: JSON.stringify({ raw: raw.slice(0, REJECTED_PLAN_RAW_CHARS) }), finished_at: new Date() })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
    return outcomeOf(row);
  }
}

export interface DreamOutcome {
  status: 'applied' | 'rejected';
  reason?: string;
  removed: number;
  merged: number;
  promoted: number;
}

function outcomeOf(row: { status: string; reason: string | null; removed: number; merged: number; promoted: number }): DreamOutcome {
  return {
    status: row.status === 'applied' ? 'applied' : 'rejected',
    ...(row.reason ? { reason: row.reason } : {}),
    removed: row.removed,
    merged: row.merged,
    promoted: row.promoted,
  };
}

/**
 * Applies a checked plan atomically: every named entry must still exist (an entry deleted since the
 * dream saw it rejects the plan), removals and merge/promotion sources leave the buffer, merged entries
 * are added, promoted content is appended to its knowledge section within the section and total caps.
 */
async function applyDreamPlan(db: Kysely<Database>, agentId: string, sessionId: string, plan: DreamPlan): Promise<{ removed: number; merged: number; promoted: number }> {
  return db.transaction().execute(async (trx) => {
    await trx.selectFrom('agents').select('id').where('id', '=', agentId).forUpdate().executeTakeFirst();
    const named = [...plan.remove, ...plan.merge.flatMap((m) => m.removeIds), ...plan.promote.flatMap((p) => p.sourceIds)];
    const rows = named.length
      ? await trx.selectFrom('memory_observations').select(['id', 'type', 'tags']).where('agent_id', '=', agentId).where('id', 'in', named).execute()
      : [];
    const byId = new Map(rows.map((r) => [r.id, r]));
    const gone = named.filter((id) => !byId.has(id));
    if (gone.length) throw new MemoryLimitError(`entries no longer exist: ${gone.slice(0, 5).join(', ')}`);

    if (named.length) await trx.deleteFrom('memory_observations').where('agent_id', '=', agentId).where('id', 'in', named).execute();
    for (const [i, merge] of plan.merge.entries()) {
      const first = byId.get(merge.removeIds[0]!)!;
      const tags = merge.tags ?? [...new Set(merge.removeIds.flatMap((id) => byId.get(id)!.tags))];
      await trx
        .insertInto('memory_observations')
        .values({ id: observationId(sessionId, `merge-${i}`), agent_id: agentId, type: first.type, tags, content: merge.mergedContent, source: `dream:${sessionId}` })
        .execute();
    }
    for (const promotion of plan.promote) {
      const existing = await trx.selectFrom('memory_knowledge').select('content').where('agent_id', '=', agentId).where('title', '=', promotion.section).executeTakeFirst();
      const content = existing ? `${existing.content.trim()}\n\n${promotion.content}` : promotion.content;
      await putKnowledgeSection(trx, agentId, promotion.section, content);
    }
    await trimObservations(trx, agentId);
    return { removed: plan.remove.length, merged: plan.merge.length, promoted: plan.promote.length };
  });
}

export type MemoryActivities = ReturnType<typeof createMemoryActivities>;
