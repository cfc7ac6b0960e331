/**
 * `agents approvals …`: the pending requests with what each waits for, a person's own queue, a
 * request's audit trail, and handing a request to a colleague. The same views as the inbox and the
 * API (`/v1/approvals`, `/v1/approvals/:id/trail`).
 */
import type { Command } from 'commander';
import type { Kysely } from 'kysely';
import type { Database } from '../schema/database';
import { approvalTrail, pendingApprovalViews, trailLine } from '../activities/approvals/views';
import type { AgentsClient } from './index';

export function addApprovalCommands(
  program: Command,
  open: () => Promise<{ client: AgentsClient; database: { db: Kysely<Database> } }>,
): void {
  const approvals = program
    .command('approvals')
    .description('approval requests: what waits, for whom, and what happened');
  approvals
    .command('list')
    .description('pending requests, oldest first, with what each waits for')
    .option('--for <name>', "only this person's own queue (what they may decide now and have not)")
    .option('--agent <id>', "only this agent's requests")
    .action(async (opts: { for?: string; agent?: string }) => {
      const views = await pendingApprovalViews((await open()).database.db, {
        ...(opts.for ? { forPerson: opts.for } : {}),
        ...(opts.agent ? { agentId: opts.agent } : {}),
      });
      if (views.length === 0) console.log(opts.for ? `nothing waits for ${opts.for}` : 'nothing waits for approval');
      for (const v of views) {
        console.log(
          `${v.requestId}  task ${v.taskId ?? '-'} · ${v.summary}\n  ${v.waitingFor ?? 'one decision by anyone with the operator scope (no policy)'}${v.waitingOn.length ? ` · waiting on ${v.waitingOn.join(', ')}` : ''}`,
        );
      }
    });
  approvals
    .command('trail <requestId>')
    .description("a request's audit trail: asked, reminded, escalated, each decision, delegations, expiry")
    .action(async (requestId: string) => {
      const trail = await approvalTrail((await open()).database.db, requestId);
      if (!trail) throw new Error(`no approval request ${JSON.stringify(requestId)}`);
      console.log(
        `${requestId} · ${trail.summary} · ${trail.status}${trail.waitingFor ? ` · ${trail.waitingFor}` : ''}`,
      );
      for (const e of trail.events) console.log(`  ${trailLine(e)}`);
    });
  approvals
    .command('delegate <taskId> <requestId>')
    .description('hand a pending request under a policy to a colleague, who then decides as if asked')
    .requiredOption('--to <name>', 'the colleague')
    .option('--comment <text>', 'why')
    .option('--by <name>', 'who hands it on', process.env.USER)
    .action(async (taskId: string, requestId: string, opts: { to: string; comment?: string; by?: string }) => {
      const recorded = await (
        await open()
      ).client.delegateApproval(taskId, {
        requestId,
        from: opts.by ?? '',
        to: opts.to,
        ...(opts.comment ? { comment: opts.comment } : {}),
      });
      console.log(`handed by ${recorded.from} to ${recorded.to} at ${recorded.delegatedAt}: ${recorded.waitingFor}`);
    });
}
