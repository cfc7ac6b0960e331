/**
 * A task's figures as its records give them (PostgreSQL rows, git's reflog), for the graders. The
 * original's are read the same way as its forks', never by running it again.
 */
import path from 'node:path';
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import type { ContentBlock } from '../llm/types';
import type { RunFigures } from './graders';
import { forkBaseCommit, git, headAsOf, isRepositoryRoot } from './workspace';

const REVIEW_STATES = ['review', 'completed'];

function normalisedPath(p: string): string {
  return path.posix.normalize(p.replace(/\\/g, '/')).replace(/^\.\//, '');
}

async function committedChanges(repo: string, from: string | undefined, to: string | undefined): Promise<string[]> {
  if (!from || !to || from === to) return [];
  const out = await git(['diff', '--no-ext-diff', '--no-textconv', '--name-only', from, to], repo).catch(() => '');
  return out.split('\n').filter(Boolean);
}

/**
 * `workspace`: the task's workspace and how to read its changes — the original's (its agent's folder,
 * between HEAD at its first LLM call and at its end) or a fork's (its own folder, from its base commit).
 */
export async function runFigures(
  db: Kysely<Database>,
  taskId: string,
  workspace: { kind: 'original'; dir: string } | { kind: 'fork' },
): Promise<RunFigures> {
  const task = await db.selectFrom('tasks').select(['state']).where('id', '=', taskId).executeTakeFirstOrThrow();
  const events = await db
    .selectFrom('task_events')
    .select(['type', 'data', 'created_at'])
    .where('task_id', '=', taskId)
    .where('type', '=', 'state-changed')
    .orderBy('seq')
    .execute();
  const review = events.find((e) => REVIEW_STATES.includes(String((e.data as { state?: string }).state)));
  const approvals = await db
    .selectFrom('approvals')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('task_id', '=', taskId)
    .executeTakeFirstOrThrow();
  const steps = await db
    .selectFrom('messages')
    .innerJoin('sessions', 'sessions.id', 'messages.session_id')
    .select(['messages.content'])
    .where('sessions.task_id', '=', taskId)
    .where('messages.role', '=', 'assistant')
    .where('messages.idem_key', 'like', 'assistant-%')
    .execute();
  const iterations = steps.filter((s) => (s.content as ContentBlock[]).some((b) => b.type === 'tool_use')).length;
  // The execution rounds' calls only: a reflection after acceptance is not part of doing the task.
  const calls = await db
    .selectFrom('llm_calls')
    .select(['created_at', 'input_tokens', 'output_tokens', 'cache_read_tokens', 'cache_write_tokens', 'cost_usd'])
    .where('task_id', '=', taskId)
    .where('session_id', 'like', `task\\_${taskId.replace(/[\\%_]/g, (c) => `\\${c}`)}\\_r%`)
    .orderBy('created_at')
    .execute();
  const usage = {
    tokens: calls.reduce(
      (s, c) => s + c.input_tokens + c.output_tokens + c.cache_read_tokens + c.cache_write_tokens,
      0,
    ),
    costUsd: Math.round(calls.reduce((s, c) => s + Number(c.cost_usd), 0) * 1e6) / 1e6,
  };
  const first = calls[0]?.created_at;
  const end = review?.created_at ?? calls.at(-1)?.created_at;
  const ledger = await db
    .selectFrom('tool_calls')
    .select(['tool', 'args', 'is_error', 'status'])
    .where('task_id', '=', taskId)
    .execute();
  const written = ledger
    .filter((l) => l.tool === 'file_write' && !l.is_error && l.status === 'completed')
    .map((l) => normalisedPath(String((l.args as { path?: unknown }).path ?? '')))
    .filter(Boolean);
  let committed: string[] = [];
  if (workspace.kind === 'original') {
    if (first && end && (await isRepositoryRoot(workspace.dir)))
      committed = await committedChanges(
        workspace.dir,
        await headAsOf(workspace.dir, first),
        await headAsOf(workspace.dir, end),
      );
  } else {
    const fork = await db
      .selectFrom('task_forks')
      .select(['workspace_dir'])
      .where('task_id', '=', taskId)
      .executeTakeFirst();
    if (fork && (await isRepositoryRoot(fork.workspace_dir))) {
      committed = await committedChanges(
        fork.workspace_dir,
        await forkBaseCommit(path.dirname(fork.workspace_dir), taskId),
        await git(['rev-parse', 'HEAD'], fork.workspace_dir).catch(() => undefined),
      );
    }
  }
  const submission = await db.selectFrom('tasks').select('result_summary').where('id', '=', taskId).executeTakeFirst();
  return {
    state: task.state,
    reachedReview: review !== undefined,
    approvalsRequested: Number(approvals.n),
    iterations,
    tokens: usage.tokens,
    costUsd: usage.costUsd,
    wallMs: first && end ? Math.max(0, end.getTime() - first.getTime()) : 0,
    toolCalls: ledger.length,
    toolErrors: ledger.filter((l) => l.is_error).length,
    changedFiles: [...new Set([...written, ...committed])].sort(),
    ...(submission?.result_summary ? { submission: submission.result_summary } : {}),
  };
}
