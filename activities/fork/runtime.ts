/**
 * What a fork's LLM steps and tool calls read: its record (cached, since a fork record never changes
 * once its workflow runs) and the agent as the fork sees it, with the overrides applied and its own
 * workspace. Tasks that are not forks cost one cached lookup per task per worker.
 */
import type { Kysely } from 'kysely';
import type { AgentRow, Database } from '../../schema/database';
import type { ForkOverrides } from '../../workflows/contract';

export interface ForkRecord {
  taskId: string;
  sourceTaskId: string;
  sourceSessionId: string;
  atStep: number;
  overrides: ForkOverrides;
  allowTools: string[];
  workspaceDir: string;
  workspaceNote: string;
  copiedToolCalls: number;
}

/** More tasks than a worker runs at once; bounded so that a long-lived worker does not grow. */
const FORK_CACHE_MAX_TASKS = 5_000;
const cache = new Map<string, ForkRecord | null>();

function remember(taskId: string, value: ForkRecord | null): void {
  cache.set(taskId, value);
  if (cache.size > FORK_CACHE_MAX_TASKS) cache.delete(cache.keys().next().value!);
}

/** The fork record of a task; undefined for a task that is not a fork. `forkOf`: the task row's column, when the caller read it. */
export async function loadFork(
  db: Kysely<Database>,
  taskId: string | undefined,
  forkOf?: string | null,
): Promise<ForkRecord | undefined> {
  if (!taskId || forkOf === null) return undefined;
  const cached = cache.get(taskId);
  if (cached !== undefined) return cached ?? undefined;
  const row = await db.selectFrom('task_forks').selectAll().where('task_id', '=', taskId).executeTakeFirst();
  // A task row is written before its fork record; only a known fork is remembered, so a fork still being made is read again.
  if (!row) {
    if (forkOf === undefined) {
      const task = await db.selectFrom('tasks').select('fork_of').where('id', '=', taskId).executeTakeFirst();
      if (task && task.fork_of === null) remember(taskId, null);
    }
    return undefined;
  }
  const record: ForkRecord = {
    taskId: row.task_id,
    sourceTaskId: row.source_task_id,
    sourceSessionId: row.source_session_id,
    atStep: row.at_step,
    overrides: row.overrides as ForkOverrides,
    allowTools: row.allow_tools,
    workspaceDir: row.workspace_dir,
    workspaceNote: row.workspace_note,
    copiedToolCalls: row.copied_tool_calls,
  };
  remember(taskId, record);
  return record;
}

/** The agent as a fork runs it: identity files and model replaced where the fork says, the fork's own workspace. */
export function forkedAgent(agent: AgentRow, fork: ForkRecord): AgentRow {
  const o = fork.overrides;
  const config = { ...(agent.config as Record<string, unknown>) };
  if (o.provider !== undefined) config.provider = o.provider;
  if (o.model !== undefined) config.model = o.model;
  if (o.tier !== undefined) config.tier = o.tier;
  return {
    ...agent,
    soul_md: o.identity?.soul ?? agent.soul_md,
    agents_md: o.identity?.agents ?? agent.agents_md,
    heartbeat_md: o.identity?.heartbeat ?? agent.heartbeat_md,
    tools_md: o.identity?.tools ?? agent.tools_md,
    config,
    workspace_dir: fork.workspaceDir,
  };
}
