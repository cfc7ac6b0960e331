import type { Kysely } from 'kysely';
import { z } from 'zod';
import type { Database } from '../../schema/database';
import { addTaskEvent, updateTaskState } from '../store/tasks';
import { defineTool } from './types';

/** Notes carried into later rounds are capped (≤30 notes × 1,200 chars). */
export const TASK_NOTE_MAX_CHARS = 1_200;
export const TASK_NOTES_CARRIED = 30;

export const TASK_SUBMIT_REVIEW = 'task_submit_review';

export const taskSubmitReview = defineTool({
  name: TASK_SUBMIT_REVIEW,
  description:
    'Submit your work on the current task for review. Call this exactly once, when the work is done, with a summary of what you did and where the results are.',
  schema: z
    .object({
      summary: z.string().min(1).max(20_000).describe('What you did, what the results are and where to find them'),
      deliverables: z.array(z.string()).max(50).optional().describe('Workspace paths of the files you produced'),
    })
    .strict(),
  sideEffecting: true,
  summarize: (a) => `task_submit_review: ${a.summary.slice(0, 80)}`,
  run: async (args, ctx) => {
    if (!ctx.taskId) return { content: 'task_submit_review is only available while executing a task', isError: true };
    await ctx.db
      .updateTable('tasks')
      .set({ result_summary: args.summary, updated_at: new Date() })
      .where('id', '=', ctx.taskId)
      .execute();
    await addTaskEvent(
      ctx.db,
      ctx.taskId,
      'review-submitted',
      { summary: args.summary, deliverables: args.deliverables ?? [] },
      `submit:${ctx.toolCallId}`,
    );
    return { content: 'Submitted for review. The reviewer will accept it or ask for a revision; you can stop now.' };
  },
});

export const taskNote = defineTool({
  name: 'task_note',
  description:
    'Record a short progress note on the current task. Notes are kept for later rounds (revisions and retries).',
  schema: z.object({ note: z.string().min(1).max(TASK_NOTE_MAX_CHARS) }).strict(),
  sideEffecting: true,
  summarize: (a) => `task_note: ${a.note.slice(0, 80)}`,
  run: async (args, ctx) => {
    if (!ctx.taskId) return { content: 'task_note is only available while executing a task', isError: true };
    await addTaskEvent(ctx.db, ctx.taskId, 'note-added', { note: args.note }, `note:${ctx.toolCallId}`);
    return { content: 'Note saved.' };
  },
});

export async function loadTaskNotes(db: Kysely<Database>, taskId: string): Promise<string[]> {
  const rows = await db
    .selectFrom('task_events')
    .select('data')
    .where('task_id', '=', taskId)
    .where('type', '=', 'note-added')
    .orderBy('id', 'desc')
    .limit(TASK_NOTES_CARRIED)
    .execute();
  return rows.reverse().map((r) => String((r.data as { note?: unknown }).note ?? ''));
}

// Re-exported for the workflow-facing activity that marks the task state.
export { updateTaskState };
