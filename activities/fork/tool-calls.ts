/**
 * A fork's tool calls. A call that matches the source's call at the same position (same tool, same
 * canonical arguments) returns the source's recorded result; where the tool changes only the
 * workspace (a file write, a local shell command), it also runs in the fork's own workspace so the
 * fork's files follow the source's. Any other call runs for real in the fork's workspace, in the
 * sandbox, unless it has effects outside the fork (a push, a message to another agent or a human, the
 * agent's memory, another task, a tool this module does not know): those are answered "not run in a
 * fork" unless the operator allowed the tool by name. Every call is reported in `fork_tool_calls`.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import type { ContentBlock, ToolUseBlock } from '../llm/types';
import { parseCommand } from '../tools/shell/parse';
import { splitGitArgv } from '../tools/shell/git-argv';
import type { ToolContext, ToolSpec } from '../tools/types';
import { safeToolText } from '../security/tool-text';
import type { ForkRecord } from './runtime';

/** Tools whose effects stay in the fork: its workspace, its own session and task, or reads. */
const FORK_LOCAL_TOOLS = new Set([
  'file_read',
  'file_write',
  'shell_execute',
  'read_tool_output',
  'discover_tools',
  'task_submit_review',
  'task_note',
  'task_list',
  'task_get',
  'memory_search',
  'memory_list',
  'goal_status',
  'agent_list_colleagues',
  'agent_list_group_chats',
]);
/** Of those, the ones whose effect is on the workspace: a replayed call runs again there, so the fork's files follow the source's. */
const WORKSPACE_EFFECT_TOOLS = new Set(['file_write', 'shell_execute']);
/** Git subcommands that change something beyond the repository. */
const GIT_OUTSIDE_SUBCOMMANDS = new Set(['push', 'send-email']);

/** Why a call would reach outside the fork; undefined when its effects stay inside. */
export async function outsideEffect(tool: string, args: unknown): Promise<string | undefined> {
  if (!FORK_LOCAL_TOOLS.has(tool))
    return `${tool} acts outside the fork's workspace (other agents, humans, memory, tasks or a service)`;
  if (tool !== 'shell_execute') return undefined;
  const command = (args as { command?: string | string[] }).command;
  if (command === undefined) return undefined;
  const parsed = await parseCommand(command);
  if (!parsed.ok) return undefined; // governance refuses it anyway
  for (const argv of parsed.invocations) {
    if (argv[0] !== 'git') continue;
    const sub = splitGitArgv(argv).subcommand;
    if (sub && GIT_OUTSIDE_SUBCOMMANDS.has(sub)) return `git ${sub} changes a remote repository`;
  }
  return undefined;
}

/** JSON with object keys sorted at every depth: the same arguments compare equal whatever their key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

async function toolCallsInOrder(db: Kysely<Database>, sessionId: string): Promise<ToolUseBlock[]> {
  const rows = await db
    .selectFrom('messages')
    .select('content')
    .where('session_id', '=', sessionId)
    .where('role', '=', 'assistant')
    .orderBy('id')
    .execute();
  return rows.flatMap((r) => (r.content as ContentBlock[]).filter((b): b is ToolUseBlock => b.type === 'tool_use'));
}

/** The source's recorded outcome of a call; undefined when it never finished (interrupted) or is not recorded. */
async function recordedResult(
  db: Kysely<Database>,
  sessionId: string,
  toolCallId: string,
): Promise<{ content: string; isError: boolean } | 'interrupted' | undefined> {
  const ledger = await db
    .selectFrom('tool_calls')
    .select(['status', 'result', 'is_error'])
    .where('session_id', '=', sessionId)
    .where('tool_call_id', '=', toolCallId)
    .executeTakeFirst();
  if (ledger?.status === 'started') return 'interrupted';
  if (ledger) return { content: ledger.result ?? '', isError: ledger.is_error };
  const message = await db
    .selectFrom('messages')
    .select('content')
    .where('session_id', '=', sessionId)
    .where('idem_key', '=', `result-${toolCallId}`)
    .executeTakeFirst();
  const block = (message?.content as ContentBlock[] | undefined)?.find((b) => b.type === 'tool_result');
  return block && block.type === 'tool_result'
    ? { content: block.content, isError: block.isError ?? false }
    : undefined;
}

export type ForkCallDecision = { kind: 'execute' } | { kind: 'answer'; text: string; isError: boolean };

type Ctx = Omit<ToolContext, 'toolCallId' | 'approvalComment' | 'approved'>;

/**
 * Decides a fork's call (see the module comment) and records it in the report. Idempotent: a retried
 * activity finds its report row and decides the same, and a replayed call's workspace effect runs once.
 */
export async function decideForkCall(
  ctx: Ctx,
  fork: ForkRecord,
  call: ToolUseBlock,
  spec: ToolSpec,
  args: unknown,
): Promise<ForkCallDecision> {
  const { db } = ctx;
  const forkCalls = await toolCallsInOrder(db, ctx.sessionId);
  const position = Math.max(
    0,
    forkCalls.findIndex((b) => b.id === call.id),
  );
  const sourceCall = (await toolCallsInOrder(db, fork.sourceSessionId))[position];
  const allowed = fork.allowTools.includes(call.name);
  const outside = allowed ? undefined : await outsideEffect(call.name, args);
  const report = async (outcome: 'replayed' | 'executed' | 'refused', note?: string): Promise<boolean> => {
    const inserted = await db
      .insertInto('fork_tool_calls')
      .values({
        session_id: ctx.sessionId,
        tool_call_id: call.id,
        fork_task_id: fork.taskId,
        position,
        tool: call.name,
        outcome,
        source_tool_call_id: sourceCall?.id ?? null,
        note: note ?? null,
      })
      .onConflict((oc) => oc.columns(['session_id', 'tool_call_id']).doNothing())
      .returning('tool_call_id')
      .executeTakeFirst();
    return inserted !== undefined;
  };
  const existing = await db
    .selectFrom('fork_tool_calls')
    .selectAll()
    .where('session_id', '=', ctx.sessionId)
    .where('tool_call_id', '=', call.id)
    .executeTakeFirst();

  let sourceNote: string | undefined;
  if (sourceCall && sourceCall.name === call.name && canonicalJson(sourceCall.input) === canonicalJson(args)) {
    const recorded = await recordedResult(db, fork.sourceSessionId, sourceCall.id);
    if (recorded === 'interrupted')
      sourceNote = `the source's call at position ${position} was interrupted: its outcome is unknown, so it was not replayed`;
    else if (recorded) {
      const first = existing ? false : await report('replayed', undefined);
      if (first && WORKSPACE_EFFECT_TOOLS.has(call.name) && !outside) {
        const note = await reproduceEffect(ctx, call, spec, args, recorded.content);
        await db
          .updateTable('fork_tool_calls')
          .set({ note })
          .where('session_id', '=', ctx.sessionId)
          .where('tool_call_id', '=', call.id)
          .execute();
      }
      return { kind: 'answer', text: recorded.content, isError: recorded.isError };
    }
  }
  if (outside) {
    if (!existing) await report('refused', outside);
    return {
      kind: 'answer',
      isError: true,
      text:
        `Not run in a fork: ${outside}. This task is a fork of task ${fork.sourceTaskId} and never touches what the source touched; ` +
        `the operator can allow this tool by name when starting the fork. Carry on without it.`,
    };
  }
  if (!existing)
    await report(
      'executed',
      sourceNote ??
        (sourceCall
          ? `differs from the source's ${sourceCall.name} call at this position`
          : 'the source made no call at this position'),
    );
  return { kind: 'execute' };
}

/** Runs a replayed call's workspace effect in the fork's workspace (governed as ever); the model sees the recorded result. */
async function reproduceEffect(
  ctx: Ctx,
  call: ToolUseBlock,
  spec: ToolSpec,
  args: unknown,
  recorded: string,
): Promise<string> {
  const toolCtx: ToolContext = { ...ctx, toolCallId: call.id };
  try {
    const governance = spec.govern ? await spec.govern(args, toolCtx) : { tier: 'allow' as const };
    if (governance.tier !== 'allow')
      return `its workspace effect was not reproduced: in the fork's workspace it ${governance.tier === 'deny' ? 'is denied' : 'needs approval'} (${governance.reason})`;
    const output = await spec.run(args, toolCtx);
    const same = safeToolText(output.content).text === recorded;
    return same
      ? 'workspace effect reproduced in the fork (same output)'
      : 'workspace effect reproduced in the fork (its output differs from the recording; the recording was returned)';
  } catch (error) {
    if (ctx.signal.aborted) throw error;
    return `its workspace effect could not be reproduced: ${error instanceof Error ? error.message : String(error)}`;
  }
}

/** Counts for a fork's report: how many of its calls were replayed, executed and refused. */
export async function forkCallCounts(
  db: Kysely<Database>,
  forkTaskIds: readonly string[],
): Promise<Map<string, { replayed: number; executed: number; refused: number }>> {
  const out = new Map<string, { replayed: number; executed: number; refused: number }>();
  if (forkTaskIds.length === 0) return out;
  const rows = await db
    .selectFrom('fork_tool_calls')
    .select(['fork_task_id', 'outcome', sql<string>`count(*)`.as('n')])
    .where('fork_task_id', 'in', forkTaskIds)
    .groupBy(['fork_task_id', 'outcome'])
    .execute();
  for (const r of rows) {
    const entry = out.get(r.fork_task_id) ?? { replayed: 0, executed: 0, refused: 0 };
    entry[r.outcome] += Number(r.n);
    out.set(r.fork_task_id, entry);
  }
  return out;
}
