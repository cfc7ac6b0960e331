import { sql, type Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import {
  checkDreamPlan,
  DAILY_REPORT_MAX_CHARS,
  DREAM_MAX_ENTRIES,
  DREAM_MIN_OBSERVATIONS,
  type DreamPlan,
} from '../../workflows/rules/memory-limits';
import { agentConfig } from '../store/agents';
import { appendMessage, ensureSession } from '../store/sessions';
import { dailyReportPrompt, dreamPrompt } from '../../prompts/memory';
import {
  countObservations,
  localDay,
  MemoryLimitError,
  observationId,
  recentObservations,
  trimObservations,
  writeDailyLog,
} from './store';
import { SCENARIO_PROMPT_KEY, type MemorySessions } from './scenario-session';
import { listKnowledge, putKnowledgeSection } from './knowledge-store';

/** Characters of a dream's raw reply kept when its plan is rejected (for the record, not for replay). */
export const REJECTED_PLAN_RAW_CHARS = 4_000;

/**
 * The daily consolidation's activities: the daily report (once a day) and the dream (a validated
 * prune/merge/promote plan applied in one transaction, or rejected with its reason).
 */
export function createConsolidationActivities(
  db: Kysely<Database>,
  { requireAgent, writePrompt, replyText }: MemorySessions,
) {
  return {
    /** Writes the `[DAILY REPORT REQUEST]` prompt unless today's report exists (once a day). */
    async dailyReportPrepare(input: {
      agentId: string;
      sessionId: string;
    }): Promise<{ status: 'ready' | 'exists'; day: string }> {
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
        .select((eb) =>
          eb.fn.coalesce(eb.fn.sum<string>(sql`input_tokens + output_tokens + cache_read_tokens`), eb.lit(0)).as('n'),
        )
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
      await writePrompt(
        input.agentId,
        input.sessionId,
        'daily-report',
        dailyReportPrompt({ day, tasksTouched: tasks, tokensToday: Number(tokens.n), previousReport: previous }),
      );
      return { status: 'ready', day };
    },

    /** Stores the model's report in today's daily log (audit only; never read back into prompts). */
    async dailyReportSave(input: {
      agentId: string;
      sessionId: string;
      day: string;
      turn: number;
    }): Promise<{ chars: number }> {
      const text = (await replyText(input.sessionId, 1, input.turn)).slice(0, DAILY_REPORT_MAX_CHARS);
      await writeDailyLog(
        db,
        input.agentId,
        input.day,
        'daily-report',
        `## Daily Report\n\n${text || '(the model returned no text)'}`,
        input.sessionId,
      );
      return { chars: text.length };
    },

    /**
     * Opens a dream when the agent has at least 50 observations and no dream ran today: records the
     * (at most 200) entries offered, the only ids a plan may name, and writes the dream prompt.
     */
    async dreamPrepare(input: {
      agentId: string;
      sessionId: string;
    }): Promise<{ status: 'ready' | 'too-few' | 'already-ran'; observations: number }> {
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
            .values({
              agent_id: input.agentId,
              day,
              session_id: input.sessionId,
              status: 'planning',
              entries_offered: entries.length,
              offered_ids: entries.map((e) => e.id),
            })
            .onConflict((oc) => oc.column('session_id').doNothing())
            .returning('id')
            .executeTakeFirst();
          if (row)
            await appendMessage(trx, input.sessionId, SCENARIO_PROMPT_KEY, {
              role: 'user',
              kind: 'task_prompt',
              content: [{ type: 'text', text }],
            });
        });
      }
      return { status: 'ready', observations: total };
    },

    /**
     * Validates the dream's plan and applies it in one transaction, or changes nothing and records why
     * (malformed JSON, an id not offered or no longer present, a cap exceeded, a knowledge limit hit).
     */
    async dreamApply(input: { agentId: string; sessionId: string; turn: number }): Promise<DreamOutcome> {
      const record = await db
        .selectFrom('memory_consolidations')
        .selectAll()
        .where('session_id', '=', input.sessionId)
        .executeTakeFirst();
      if (!record) throw new Error(`no dream was prepared for session ${input.sessionId}`);
      if (record.status !== 'planning') return outcomeOf(record);
      const raw = await replyText(input.sessionId, 1, input.turn);
      const check = checkDreamPlan(raw, new Set(record.offered_ids));
      if (!check.ok) return reject(record.id, check.reason, raw);
      try {
        const counts = await applyDreamPlan(db, input.agentId, input.sessionId, check.plan);
        const row = await db
          .updateTable('memory_consolidations')
          .set({
            status: 'applied',
            removed: counts.removed,
            merged: counts.merged,
            promoted: counts.promoted,
            plan: JSON.stringify(check.plan),
            finished_at: new Date(),
          })
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
      .set({
        status: 'rejected',
        reason,
        plan: JSON.stringify({ raw: raw.slice(0, REJECTED_PLAN_RAW_CHARS) }),
        finished_at: new Date(),
      })
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

function outcomeOf(row: {
  status: string;
  reason: string | null;
  removed: number;
  merged: number;
  promoted: number;
}): DreamOutcome {
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
async function applyDreamPlan(
  db: Kysely<Database>,
  agentId: string,
  sessionId: string,
  plan: DreamPlan,
): Promise<{ removed: number; merged: number; promoted: number }> {
  return db.transaction().execute(async (trx) => {
    await trx.selectFrom('agents').select('id').where('id', '=', agentId).forUpdate().executeTakeFirst();
    const named = [
      ...plan.remove,
      ...plan.merge.flatMap((m) => m.removeIds),
      ...plan.promote.flatMap((p) => p.sourceIds),
    ];
    const rows = named.length
      ? await trx
          .selectFrom('memory_observations')
          .select(['id', 'type', 'tags'])
          .where('agent_id', '=', agentId)
          .where('id', 'in', named)
          .execute()
      : [];
    const byId = new Map(rows.map((r) => [r.id, r]));
    const gone = named.filter((id) => !byId.has(id));
    if (gone.length) throw new MemoryLimitError(`entries no longer exist: ${gone.slice(0, 5).join(', ')}`);

    if (named.length)
      await trx.deleteFrom('memory_observations').where('agent_id', '=', agentId).where('id', 'in', named).execute();
    for (const [i, merge] of plan.merge.entries()) {
      const first = byId.get(merge.removeIds[0]!)!;
      const tags = merge.tags ?? [...new Set(merge.removeIds.flatMap((id) => byId.get(id)!.tags))];
      await trx
        .insertInto('memory_observations')
        .values({
          id: observationId(sessionId, `merge-${i}`),
          agent_id: agentId,
          type: first.type,
          tags,
          content: merge.mergedContent,
          source: `dream:${sessionId}`,
        })
        .execute();
    }
    for (const promotion of plan.promote) {
      const existing = await trx
        .selectFrom('memory_knowledge')
        .select('content')
        .where('agent_id', '=', agentId)
        .where('title', '=', promotion.section)
        .executeTakeFirst();
      const content = existing ? `${existing.content.trim()}\n\n${promotion.content}` : promotion.content;
      await putKnowledgeSection(trx, agentId, promotion.section, content);
    }
    await trimObservations(trx, agentId);
    return { removed: plan.remove.length, merged: plan.merge.length, promoted: plan.promote.length };
  });
}
