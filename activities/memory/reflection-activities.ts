import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { REFLECTION_MAX_PER_DAY, REFLECTION_NOTES } from '../../workflows/rules/memory-limits';
import { unknownTask } from '../errors';
import { agentConfig } from '../store/agents';
import { findTask } from '../store/tasks';
import { reflectionPrompt } from '../../prompts/memory';
import { localDay } from './store';
import type { MemorySessions } from './scenario-session';

/** Post-task reflection: one of the agent's daily reflections is claimed and its prompt written; the run's end is recorded. */
export function createReflectionActivities(db: Kysely<Database>, { requireAgent, writePrompt }: MemorySessions) {
  return {
    /**
     * Claims one of the agent's 5 daily reflections (counted in PostgreSQL under the agent's row lock)
     * and writes the reflection prompt with the execution trace. Idempotent per task: a retry, or a
     * second start for the same task, finds the earlier claim.
     */
    async reflectionBegin(input: {
      taskId: string;
      agentId: string;
      sessionId: string;
    }): Promise<{ status: 'started' | 'rate-limited' | 'already-done' }> {
      const agent = await requireAgent(input.agentId);
      const task = await findTask(db, input.taskId);
      if (!task) throw unknownTask(input.taskId);
      const day = localDay(new Date(), agentConfig(agent).timezone);
      const claim = await db.transaction().execute(async (trx) => {
        await trx.selectFrom('agents').select('id').where('id', '=', input.agentId).forUpdate().executeTakeFirst();
        const existing = await trx
          .selectFrom('memory_reflections')
          .select('status')
          .where('task_id', '=', input.taskId)
          .executeTakeFirst();
        if (existing)
          return existing.status === 'running'
            ? 'started'
            : existing.status === 'completed'
              ? 'already-done'
              : 'rate-limited';
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
          .values({
            task_id: input.taskId,
            agent_id: input.agentId,
            day,
            status,
            session_id: status === 'running' ? input.sessionId : null,
            ...(status === 'rate-limited' ? { finished_at: new Date() } : {}),
          })
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
  };
}
