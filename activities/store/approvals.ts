import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import type { ToolUseBlock } from '../llm/types';
import { storableText } from '../security/binary';
import { assistantMessageKey } from '../tools/execute';
import { findMessage } from './sessions';
import { addTaskEvent } from './tasks';

export interface ApprovalRequestInput {
  requestId: string;
  agentId: string;
  taskId?: string;
  workflowId: string;
  sessionId: string;
  attempt: number;
  turn: number;
  toolCallId: string;
  tool: string;
  summary: string;
  reason: string;
}

/**
 * Records an approval request (idempotent by request id) with the arguments of the tool call it is
 * for, read from the stored assistant message, and the task's timeline event.
 */
export async function recordApprovalRequest(
  db: Kysely<Database>,
  input: ApprovalRequestInput,
  /** The approval policy that governs the request (stored on the row, named in the task event). */
  policy?: { name: string },
): Promise<{ requestedAt: string; requestedAtMs: number }> {
  const message = await findMessage(db, input.sessionId, assistantMessageKey(input.attempt, input.turn));
  const call = message?.content.find((b): b is ToolUseBlock => b.type === 'tool_use' && b.id === input.toolCallId);
  const row = await db
    .insertInto('approvals')
    .values({
      id: input.requestId,
      task_id: input.taskId ?? null,
      agent_id: input.agentId,
      workflow_id: input.workflowId,
      tool: input.tool,
      args: JSON.stringify(call?.input ?? null),
      summary: input.summary,
      status: 'pending',
      ...(policy ? { policy: JSON.stringify(policy) } : {}),
    })
    .onConflict((oc) => oc.column('id').doUpdateSet({ summary: input.summary }))
    .returning('requested_at')
    .executeTakeFirstOrThrow();
  if (input.taskId) {
    await addTaskEvent(
      db,
      input.taskId,
      'approval-requested',
      {
        requestId: input.requestId,
        tool: input.tool,
        summary: input.summary,
        reason: input.reason,
        ...(policy ? { policy: policy.name } : {}),
      },
      `approval-req:${input.requestId}`,
    );
  }
  return { requestedAt: row.requested_at.toISOString(), requestedAtMs: row.requested_at.getTime() };
}

export interface ApprovalDecisionInput {
  requestId: string;
  taskId?: string;
  status: 'approved' | 'rejected' | 'timed_out' | 'expired';
  decidedBy?: string;
  comment?: string;
}

/**
 * Records who decided what, and when; returns how long the request waited (for the approval-wait
 * metric), or nothing when it was already decided (a retry).
 */
export async function recordApprovalDecision(
  db: Kysely<Database>,
  input: ApprovalDecisionInput,
): Promise<{ waitedSeconds?: number }> {
  const decided = await db
    .updateTable('approvals')
    .set({
      status: input.status,
      // A person's words: stored escaped (a NUL would fail this write on every retry).
      decided_by: input.decidedBy === undefined ? null : storableText(input.decidedBy),
      comment: input.comment === undefined ? null : storableText(input.comment),
      decided_at: new Date(),
    })
    .where('id', '=', input.requestId)
    .where('status', '=', 'pending')
    .returning(['requested_at', 'decided_at'])
    .executeTakeFirst();
  if (input.taskId) {
    await addTaskEvent(db, input.taskId, 'approval-decided', { ...input }, `approval-dec:${input.requestId}`);
  }
  return decided?.decided_at
    ? { waitedSeconds: Math.max(0, (decided.decided_at.getTime() - decided.requested_at.getTime()) / 1000) }
    : {};
}

/** The attempt that asked is gone: its undecided requests can no longer be answered. */
export async function withdrawPendingApprovals(db: Kysely<Database>, taskId: string): Promise<void> {
  await db
    .updateTable('approvals')
    .set({ status: 'withdrawn', decided_at: new Date() })
    .where('task_id', '=', taskId)
    .where('status', '=', 'pending')
    .execute();
}
