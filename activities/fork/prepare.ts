/**
 * Making a fork: validate what was asked against the source's records, then write the fork's task row,
 * its fork record, the copy of the source round's session up to the fork step (with the overrides) and
 * its own workspace. Each write is idempotent (by task id, message key, workspace marker), so the
 * client, the eval and the task's own first activity may all call `prepareFork` for the same fork.
 */
import type { Kysely } from 'kysely';
import type { Database, TaskRow } from '../../schema/database';
import { roundSessionId, type ForkInput } from '../../workflows/contract';
import { TASK_ID_PATTERN } from '../../workflows/rules/task-input';
import type { ContentBlock, ToolUseBlock } from '../llm/types';
import { findAgent } from '../store/agents';
import { appendMessage, ensureSession } from '../store/sessions';
import { addTaskEvent, findTask, recordTask } from '../store/tasks';
import { ForkError } from './errors';
import { parseForkInput } from './spec';
import { copyWorkspace } from './workspace';

/** The key the task prompt is stored under: kept, so the fork's first step finds its prompt and adds none. */
const TASK_PROMPT_KEY = 'task-prompt';
/** Copied messages get this prefix on their keys, so the fork's own turns and injections never collide with them. */
export const COPIED_KEY_PREFIX = 'fork-src-';
const ASSISTANT_KEY_PREFIX = 'assistant-';
const RESULT_KEY_PREFIX = 'result-';

/** What the source's records say a fork at this step starts from. */
export interface ForkPlan {
  fork: ForkInput;
  source: TaskRow;
  sourceSessionId: string;
  /** Steps the source round has (LLM turns with their tool results). */
  steps: number;
  /** The messages kept, in order. */
  messages: Array<{
    id: string;
    key: string;
    role: 'user' | 'assistant';
    kind: string;
    content: ContentBlock[];
    createdAt: Date;
  }>;
  copiedToolCalls: number;
  /** The time the fork step ended (its last message): the workspace is copied as of then. */
  at: Date;
  /** Source calls without a recorded outcome (the worker died while they ran), by position. */
  incomplete: Array<{ position: number; tool: string; toolCallId: string }>;
}

/** Reads and checks; throws `ForkError` in words (unknown task, no such round, a step past the end, a bad override). */
export async function planFork(db: Kysely<Database>, request: unknown): Promise<ForkPlan> {
  const parsed = parseForkInput(request);
  if (!parsed.ok) throw new ForkError(`invalid fork: ${parsed.problem}`);
  const fork = parsed.fork;
  const source = await findTask(db, fork.sourceTaskId);
  if (!source)
    throw new ForkError(`unknown task ${JSON.stringify(fork.sourceTaskId)}: there is nothing recorded to fork`);
  const round = fork.round ?? 1;
  const sourceSessionId = roundSessionId(source.id, round);
  const rows = await db
    .selectFrom('messages')
    .select(['id', 'idem_key', 'role', 'kind', 'content', 'created_at'])
    .where('session_id', '=', sourceSessionId)
    .orderBy('id')
    .execute();
  if (rows.length === 0)
    throw new ForkError(`task ${source.id} has no recorded round ${round} (it has run ${source.round} round(s))`);
  const all = rows.map((r) => ({
    id: String(r.id),
    key: r.idem_key,
    role: r.role,
    kind: r.kind,
    content: r.content as ContentBlock[],
    createdAt: r.created_at,
  }));
  const assistants = all.filter((m) => m.role === 'assistant' && m.key.startsWith(ASSISTANT_KEY_PREFIX));
  if (fork.atStep > assistants.length) {
    throw new ForkError(
      `step ${fork.atStep} is past the end of round ${round} of task ${source.id}: it has ${assistants.length} step(s), so --at takes 0 to ${assistants.length}`,
    );
  }
  const ledger = await db
    .selectFrom('tool_calls')
    .select(['tool_call_id', 'tool', 'status'])
    .where('session_id', '=', sourceSessionId)
    .execute();
  const started = new Set(ledger.filter((l) => l.status === 'started').map((l) => l.tool_call_id));
  const incomplete: ForkPlan['incomplete'] = [];
  let position = 0;
  for (const a of assistants) {
    for (const b of a.content) {
      if (b.type !== 'tool_use') continue;
      if (started.has(b.id)) incomplete.push({ position, tool: b.name, toolCallId: b.id });
      position += 1;
    }
  }

  let messages: ForkPlan['messages'];
  let copiedToolCalls = 0;
  if (fork.atStep === 0) {
    messages = all.filter((m) => m.key === TASK_PROMPT_KEY);
  } else {
    const step = assistants[fork.atStep - 1]!;
    const calls = step.content.filter((b): b is ToolUseBlock => b.type === 'tool_use');
    const resultKeys = new Set(calls.map((c) => `${RESULT_KEY_PREFIX}${c.id}`));
    const ends = all.filter((m) => m.id === step.id || resultKeys.has(m.key)).map((m) => BigInt(m.id));
    const cut = ends.reduce((a, b) => (b > a ? b : a));
    messages = all.filter((m) => BigInt(m.id) <= cut);
    for (const m of messages)
      if (m.role === 'assistant') copiedToolCalls += m.content.filter((b) => b.type === 'tool_use').length;
    const override = fork.overrides?.toolResult;
    if (override) {
      if (calls.length === 0)
        throw new ForkError(
          `step ${fork.atStep} of task ${source.id} called no tool: there is no tool result to replace (fork at a step that called one)`,
        );
      const index = override.callIndex ?? calls.length - 1;
      if (index >= calls.length)
        throw new ForkError(
          `step ${fork.atStep} of task ${source.id} made ${calls.length} tool call(s): callIndex ${index} is past them (0 to ${calls.length - 1})`,
        );
    }
  }
  if (fork.atStep === 0 && fork.overrides?.toolResult)
    throw new ForkError(
      'a tool result can be replaced only at a step that called tools (step 1 or later), not at step 0',
    );
  const at = messages.at(-1)?.createdAt ?? source.created_at;
  return { fork, source, sourceSessionId, steps: assistants.length, messages, copiedToolCalls, at, incomplete };
}

/**
 * Writes the fork `forkTaskId` (task row with `fork_of`, fork record, session copy, workspace). The
 * fork's task belongs to the source's agent; its identity and model overrides apply in the fork only.
 */
export async function prepareFork(
  db: Kysely<Database>,
  forkTaskId: string,
  request: unknown,
  extra: { createdBy?: string } = {},
): Promise<ForkPlan & { workspaceDir: string; workspaceNote: string }> {
  const plan = await planFork(db, request);
  const { fork, source } = plan;
  if (forkTaskId === source.id) throw new ForkError("a fork needs its own task id, not its source's");
  // The id names the fork's workspace folder too: a task id cannot climb out of the forks' root.
  if (!TASK_ID_PATTERN.test(forkTaskId))
    throw new ForkError(
      `invalid fork task id ${JSON.stringify(forkTaskId)}: 1-200 letters, digits or . _ : + -, starting with a letter or digit`,
    );
  const existing = await findTask(db, forkTaskId);
  if (existing && existing.fork_of !== source.id)
    throw new ForkError(
      `task ${forkTaskId} already exists and is not a fork of ${source.id}: choose another id for the fork`,
    );
  const agent = await findAgent(db, source.agent_id);
  if (!agent)
    throw new ForkError(
      `the agent ${source.agent_id} of task ${source.id} does not exist any more: there is no agent to run the fork`,
    );
  const workspace = await copyWorkspace(agent.workspace_dir, forkTaskId, plan.at);

  if (!existing) {
    await recordTask(db, {
      taskId: forkTaskId,
      agentId: source.agent_id,
      title: `fork of ${source.title}`.slice(0, 500),
      description: source.description,
      priority: source.priority as never,
      createdBy: extra.createdBy ?? 'fork',
    });
    await db.updateTable('tasks').set({ fork_of: source.id }).where('id', '=', forkTaskId).execute();
  }
  await db
    .insertInto('task_forks')
    .values({
      task_id: forkTaskId,
      source_task_id: source.id,
      source_session_id: plan.sourceSessionId,
      at_step: fork.atStep,
      overrides: JSON.stringify(fork.overrides ?? {}),
      allow_tools: JSON.stringify(fork.allowTools ?? []),
      workspace_dir: workspace.dir,
      workspace_note: workspace.note,
      copied_tool_calls: plan.copiedToolCalls,
      incomplete_calls: JSON.stringify(plan.incomplete),
    })
    .onConflict((oc) => oc.column('task_id').doNothing())
    .execute();

  // The fork's first round runs in `task_{fork}_r1`, as any task's does.
  const sessionId = roundSessionId(forkTaskId, 1);
  await ensureSession(db, { id: sessionId, agentId: source.agent_id, taskId: forkTaskId, kind: 'task' });
  const override = fork.overrides?.toolResult;
  const stepMessage =
    fork.atStep > 0
      ? plan.messages.filter((m) => m.role === 'assistant' && m.key.startsWith(ASSISTANT_KEY_PREFIX)).at(-1)
      : undefined;
  const stepCalls = stepMessage ? stepMessage.content.filter((b): b is ToolUseBlock => b.type === 'tool_use') : [];
  const replaced = override ? stepCalls[override.callIndex ?? stepCalls.length - 1]?.id : undefined;
  const answered = new Set(
    plan.messages.flatMap((m) => m.content.flatMap((b) => (b.type === 'tool_result' ? [b.toolUseId] : []))),
  );
  for (const m of plan.messages) {
    const key = m.key === TASK_PROMPT_KEY ? TASK_PROMPT_KEY : `${COPIED_KEY_PREFIX}${m.key}`;
    const content = m.content.map((b): ContentBlock => {
      // The fork is its own task: harness text naming the source's id names the fork's.
      if (m.role === 'user' && b.type === 'text') return { ...b, text: b.text.split(source.id).join(forkTaskId) };
      if (b.type === 'tool_result' && b.toolUseId === replaced && override)
        return { ...b, content: override.content, isError: override.isError ?? false };
      return b;
    });
    await appendMessage(db, sessionId, key, { role: m.role, kind: m.kind as never, content });
    // A call of the copied steps whose result was never recorded: the model needs an answer to go on.
    if (m.role === 'assistant') {
      for (const b of m.content) {
        if (b.type !== 'tool_use' || answered.has(b.id)) continue;
        await appendMessage(db, sessionId, `${COPIED_KEY_PREFIX}${RESULT_KEY_PREFIX}${b.id}`, {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              toolUseId: b.id,
              content: `The source task's call ${b.name} was interrupted: its outcome was never recorded, so it is unknown here too.`,
              isError: true,
            },
          ],
        });
      }
    }
  }
  if (fork.overrides?.instructions) {
    await appendMessage(db, sessionId, 'fork-instructions', {
      role: 'user',
      kind: 'injection',
      content: [{ type: 'text', text: fork.overrides.instructions }],
    });
  }
  await addTaskEvent(
    db,
    forkTaskId,
    'fork-created',
    {
      sourceTaskId: source.id,
      round: fork.round ?? 1,
      atStep: fork.atStep,
      copiedToolCalls: plan.copiedToolCalls,
      incompleteCalls: plan.incomplete.length,
      workspace: workspace.note,
    },
    'fork-created',
  );
  return { ...plan, workspaceDir: workspace.dir, workspaceNote: workspace.note };
}
