/**
 * The run viewer's reading of a task's records (activities/store/run-records.ts): rounds, and in each
 * the steps in the order the model took them, every LLM call with its figures and every tool call with
 * its ledger state, sandbox status and approval trail; the spend of the task's budget tree over time;
 * and, for a fork, its calls beside its source's. Pure: the page (run-viewer-page.ts) renders it.
 *
 * Secrets: what the worker stored was redacted there; every argument, result and reply text shown is
 * passed through the same helpers again (`redactSecrets`, `safeToolText`, `safeLine`) with this
 * process's secret values, so a secret the API holds and the worker did not is cut out too.
 */
import { canonicalJson } from '../activities/fork/tool-calls';
import { COPIED_KEY_PREFIX } from '../activities/fork/prepare';
import { AUXILIARY_KEY_SEPARATOR } from '../activities/llm/usage';
import type { ContentBlock, ToolUseBlock } from '../activities/llm/types';
import { redactSecrets } from '../activities/security/secrets';
import { safeLine, safeToolText } from '../activities/security/tool-text';
import type {
  ApprovalRecord,
  LedgerRecord,
  LlmCallRecord,
  ReplyRecord,
  RunRecords,
  SpendRecord,
  StoredResultRecord,
  TruncationRecord,
} from '../activities/store/run-records';
import { interruptedToolCallText, notLandedToolCallText, notRunToolCallText } from '../prompts/task';
import { roundSessionId, roundWorkflowId, taskWorkflowId } from '../workflows/contract';
import { isTerminal, type TaskState } from '../workflows/rules/task-state';
import type { BudgetNode } from '../workflows/rules/subagents';

/** Characters of a tool call's arguments shown in its row (the rest folds under "more"). */
export const ARGS_SHOWN_CHARS = 300;
/** Characters of a result shown in a call's row; up to RESULT_PREVIEW_MAX_CHARS fold under "more". */
export const RESULT_SHOWN_CHARS = 240;
/** Characters of the model's words shown before a step's calls. */
export const REPLY_TEXT_SHOWN_CHARS = 400;

/**
 * What the tool-call ledger says of a call. `committed`: it ran and its outcome is stored (run once
 * or, for a tool without side effects, again after a retry). `interrupted`: it began and its outcome
 * is unknown, so it was not run again. `not run`: it never ran (refused, denied, rejected, its attempt
 * ended first, or a fork answered it from the source). `running`: it began and the run goes on.
 * `waiting`: the newest step asked for it and nothing ran it yet (an approval, say).
 */
export type LedgerState = 'committed' | 'interrupted' | 'not run' | 'running' | 'waiting';

/** One step of a shell command as the tool reported it (`describeStatus` in shell-tool.ts). */
export interface SandboxStep {
  command: string;
  /** `exit code 0`, `timed out`, `killed: CPU time limit of 10 s; exit code 152` … */
  status: string;
  durationMs: number;
  truncated: boolean;
  /** A limit that ended or cut the run (timeout, a sandbox limit, the output cap). */
  limit?: string;
}

export interface ToolCallView {
  toolCallId: string;
  tool: string;
  /** The arguments as JSON, secrets redacted. */
  args: string;
  ledger: LedgerState;
  /** How the ledger got there: "ran once", "ran 2 times", the refusal … */
  ledgerNote: string;
  isError: boolean;
  /** The result's opening, secrets redacted; empty when there is none. */
  result: string;
  resultChars: number;
  redactions: number;
  sandbox: SandboxStep[];
  approval?: ApprovalRecord;
}

export interface LlmCallView extends LlmCallRecord {
  /** What the prompt held in tokens: uncached input, read from the cache and written to it. */
  promptTokens: number;
  /** `step` for the step's own call, else the auxiliary call's purpose (`summary:…`, `cpp-appraisal`). */
  purpose: string;
}

export interface StepView {
  key: string;
  /** `a1 t3` for a task step; the key otherwise. */
  label: string;
  /** Copied from the fork's source (no call of this task made it). */
  copied: boolean;
  /** The model's words before its calls, secrets redacted. */
  text: string;
  llmCalls: LlmCallView[];
  tools: ToolCallView[];
  truncations: TruncationRecord[];
}

export interface SessionView {
  sessionId: string;
  kind: 'round' | 'sub-agent' | 'other';
  /** The workflow that ran it, when known: a round's, a sub-agent's. */
  workflowId?: string;
  steps: StepView[];
  costUsd: number;
}

export interface RoundView {
  round: number;
  workflowId: string;
  /** The round's own session first, then its sub-agents'. */
  sessions: SessionView[];
  costUsd: number;
}

export interface SpendSeries {
  /** What the series counts: the task's own calls, a sub-agent's, a subtask's subtree. */
  label: string;
  /** Cumulative spend after each call. */
  points: Array<{ at: Date; totalUsd: number }>;
  spentUsd: number;
  /** Its own cap or grant, when it has one. */
  limitUsd: number | null;
}

export interface SpendView {
  limitUsd: number | null;
  spentUsd: number;
  series: SpendSeries[];
  /** The whole tree's cumulative spend. */
  total: Array<{ at: Date; totalUsd: number }>;
}

export interface ForkStepRow {
  step: number;
  source?: { model: string; costUsd: number; tokens: number; stopReason: string | null; tools: string[] };
  fork?: {
    model: string;
    costUsd: number;
    tokens: number;
    stopReason: string | null;
    tools: string[];
    copied: boolean;
  };
  verdict: string;
}

export interface ForkCallRow {
  position: number;
  source?: ToolCallView;
  fork?: ToolCallView;
  /** copied | replayed | executed | refused (with the fork's note), or absent when the fork made no call here. */
  outcome?: string;
  note?: string;
  verdict: string;
}

export interface ForkView {
  sourceTaskId: string;
  atStep: number;
  overrides: Record<string, unknown>;
  allowTools: string[];
  workspaceNote: string;
  steps: ForkStepRow[];
  calls: ForkCallRow[];
}

export interface RunView {
  taskId: string;
  taskWorkflowId: string;
  rounds: RoundView[];
  /** Runs for the task outside its rounds (reflection …), and calls recorded without a session. */
  others: SessionView[];
  costUsd: number;
  llmCallCount: number;
  toolCallCount: number;
  spend: SpendView;
  fork?: ForkView;
}

/** The budget as the task's workflow reports it (limit, per-node caps), when it answered. */
export interface BudgetFacts {
  limitUsd: number | null;
  nodes: readonly BudgetNode[];
}

export function buildRunView(records: RunRecords, budget?: BudgetFacts): RunView {
  const { task } = records;
  const finished = isTerminal(task.state as TaskState) || task.state === 'review';
  const bySession = groupBy(records.llmCalls, (c) => c.sessionId ?? '');
  const sessionIds = [...new Set([...records.replies.map((r) => r.sessionId), ...bySession.keys()])].filter(Boolean);
  const sessions = sessionIds.map((id) =>
    sessionView(id, task.id, records, records.replies, bySession.get(id) ?? [], finished),
  );
  const rounds = new Map<number, RoundView>();
  const others: SessionView[] = [];
  for (const s of sessions) {
    const round = roundOf(s.sessionId, task.id);
    if (round === undefined) {
      others.push(s);
      continue;
    }
    const view = rounds.get(round) ?? {
      round,
      workflowId: roundWorkflowId(task.id, round),
      sessions: [],
      costUsd: 0,
    };
    view.sessions.push(s);
    view.costUsd += s.costUsd;
    rounds.set(round, view);
  }
  for (const r of rounds.values()) r.sessions.sort((a, b) => (a.kind === 'round' ? -1 : b.kind === 'round' ? 1 : 0));
  const unattributed = bySession.get('') ?? [];
  if (unattributed.length > 0)
    others.push({
      sessionId: '(no session)',
      kind: 'other',
      steps: unattributed.map((c) => ({
        key: c.key ?? '',
        label: c.key ?? '',
        copied: false,
        text: '',
        llmCalls: [llmCallView(c, c.key ?? '')],
        tools: [],
        truncations: [],
      })),
      costUsd: sum(unattributed.map((c) => c.costUsd)),
    });
  const all = [...rounds.values()].flatMap((r) => r.sessions).concat(others);
  return {
    taskId: task.id,
    taskWorkflowId: taskWorkflowId(task.id),
    rounds: [...rounds.values()].sort((a, b) => a.round - b.round),
    others,
    costUsd: sum(records.llmCalls.map((c) => c.costUsd)),
    llmCallCount: records.llmCalls.length,
    toolCallCount: sum(all.flatMap((s) => s.steps.map((st) => st.tools.length))),
    spend: spendView(records, budget),
    ...(records.fork ? { fork: forkView(records, finished) } : {}),
  };
}

/** The round a session belongs to: its own (`task_{id}_r{n}`) or its parent round's (a sub-agent's). */
export function roundOf(sessionId: string, taskId: string): number | undefined {
  const own = `task_${taskId}_r`;
  if (sessionId.startsWith(own) && /^\d+$/.test(sessionId.slice(own.length)))
    return Number(sessionId.slice(own.length));
  const parent = subagentParent(sessionId);
  const prefix = `${taskWorkflowId(taskId)}-r`;
  if (!parent?.startsWith(prefix)) return undefined;
  const match = /^(\d+)(?:-sub-\d+)*$/.exec(parent.slice(prefix.length));
  return match ? Number(match[1]) : undefined;
}

/** A sub-agent session's parent workflow id (`sub_{parentWorkflowId}_{n}`, subagent-contract.ts). */
function subagentParent(sessionId: string): string | undefined {
  if (!sessionId.startsWith('sub_')) return undefined;
  const cut = sessionId.lastIndexOf('_');
  return cut > 4 && /^\d+$/.test(sessionId.slice(cut + 1)) ? sessionId.slice(4, cut) : undefined;
}

/** A sub-agent session's workflow id (`{parentWorkflowId}-sub-{n}`). */
function subagentWorkflow(sessionId: string): string | undefined {
  const parent = subagentParent(sessionId);
  return parent ? `${parent}-sub-${sessionId.slice(sessionId.lastIndexOf('_') + 1)}` : undefined;
}

function sessionView(
  sessionId: string,
  taskId: string,
  records: Pick<RunRecords, 'ledger' | 'storedResults' | 'approvals' | 'truncations'>,
  replies: readonly ReplyRecord[],
  llmCalls: readonly LlmCallRecord[],
  finished: boolean,
): SessionView {
  const steps = stepsOf(sessionId, records, replies, llmCalls, finished);
  const isRound = roundOf(sessionId, taskId) !== undefined && !sessionId.startsWith('sub_');
  const workflowId = isRound ? roundWorkflowId(taskId, roundOf(sessionId, taskId)!) : subagentWorkflow(sessionId);
  return {
    sessionId,
    kind: isRound ? 'round' : sessionId.startsWith('sub_') ? 'sub-agent' : 'other',
    ...(workflowId ? { workflowId } : {}),
    steps,
    costUsd: sum(llmCalls.map((c) => c.costUsd)),
  };
}

/**
 * A session's steps in order: one per reply (its main LLM call, the auxiliary calls under its key, its
 * tool calls), and one per key that has LLM calls but no reply (a call whose reply was not stored).
 */
function stepsOf(
  sessionId: string,
  records: Pick<RunRecords, 'ledger' | 'storedResults' | 'approvals' | 'truncations'>,
  allReplies: readonly ReplyRecord[],
  llmCalls: readonly LlmCallRecord[],
  finished: boolean,
): StepView[] {
  const replies = allReplies.filter((r) => r.sessionId === sessionId);
  const ledger = new Map(records.ledger.filter((l) => l.sessionId === sessionId).map((l) => [l.toolCallId, l]));
  const stored = new Map(records.storedResults.filter((r) => r.sessionId === sessionId).map((r) => [r.toolCallId, r]));
  const approvals = new Map(records.approvals.map((a) => [a.requestId, a]));
  const stepKeyOf = (c: LlmCallRecord): string => {
    const key = c.key ?? '';
    const reply = replies.find((r) => key === r.key || key.startsWith(`${r.key}${AUXILIARY_KEY_SEPARATOR}`));
    return reply?.key ?? key.split(AUXILIARY_KEY_SEPARATOR)[0]!;
  };
  const callsByStep = groupBy(llmCalls, stepKeyOf);
  const keys = [...new Set([...replies.map((r) => r.key), ...callsByStep.keys()])];
  const firstAt = (key: string): number => {
    const times = [
      ...(callsByStep.get(key) ?? []).map((c) => c.at.getTime()),
      ...replies.filter((r) => r.key === key).map((r) => r.at.getTime()),
    ];
    return Math.min(...times);
  };
  const order = new Map(replies.map((r, i) => [r.key, i]));
  // Replies keep the conversation's order; a step without a reply goes where its time puts it.
  keys.sort((a, b) => {
    const oa = order.get(a);
    const ob = order.get(b);
    return oa !== undefined && ob !== undefined ? oa - ob : firstAt(a) - firstAt(b);
  });
  const lastReply = replies.at(-1)?.key;
  return keys.map((key) => {
    const reply = replies.find((r) => r.key === key);
    const calls = (callsByStep.get(key) ?? [])
      .map((c) => llmCallView(c, key))
      .sort((a, b) => (a.purpose === 'step' ? 1 : 0) - (b.purpose === 'step' ? 1 : 0) || Number(a.id) - Number(b.id));
    const uses = (reply?.content ?? []).filter((b): b is ToolUseBlock => b.type === 'tool_use');
    return {
      key,
      label: stepLabel(key),
      copied: key.startsWith(COPIED_KEY_PREFIX),
      text: replyText(reply?.content ?? []),
      llmCalls: calls,
      tools: uses.map((use) =>
        toolCallView(
          use,
          ledger.get(use.id),
          stored.get(use.id),
          approvals.get(`${sessionId}:${use.id}`),
          key === lastReply && !finished,
          key.startsWith(COPIED_KEY_PREFIX),
        ),
      ),
      truncations: records.truncations.filter((t) => t.sessionId === sessionId && t.key === key),
    };
  });
}

function llmCallView(c: LlmCallRecord, stepKey: string): LlmCallView {
  const key = c.key ?? '';
  return {
    ...c,
    promptTokens: c.inputTokens + c.cacheReadTokens + c.cacheWriteTokens,
    purpose:
      key === stepKey
        ? 'step'
        : key.startsWith(`${stepKey}${AUXILIARY_KEY_SEPARATOR}`)
          ? key.slice(stepKey.length + 1)
          : key,
  };
}

/** `assistant-a1-t3` → `attempt 1 · turn 3`; a copied step says so. */
function stepLabel(key: string): string {
  const copied = key.startsWith(COPIED_KEY_PREFIX);
  const own = copied ? key.slice(COPIED_KEY_PREFIX.length) : key;
  const match = /^assistant-a(\d+)-t(\d+)$/.exec(own);
  const label = match ? `attempt ${match[1]} · turn ${match[2]}` : own;
  return copied ? `${label} (copied from the source)` : label;
}

function replyText(content: readonly ContentBlock[]): string {
  const text = content
    .flatMap((b) => (b.type === 'text' ? [b.text] : []))
    .join('\n')
    .trim();
  return clip(safeLine(text), REPLY_TEXT_SHOWN_CHARS);
}

export function toolCallView(
  use: ToolUseBlock,
  ledger: LedgerRecord | undefined,
  stored: StoredResultRecord | undefined,
  approval: ApprovalRecord | undefined,
  newestOfRunningTask: boolean,
  /** The call is in a fork's copy of a source step. */
  copied = false,
): ToolCallView {
  const rawArgs = ledger ? JSON.stringify(ledger.args ?? null) : JSON.stringify(use.input ?? null);
  const args = redactSecrets(rawArgs ?? 'null').text;
  const resultText = ledger?.result ?? stored?.text ?? '';
  const { text: result } = safeToolText(resultText);
  const [ledgerState, ledgerNote] = ledgerOf(use.name, ledger, stored, resultText, newestOfRunningTask, copied);
  return {
    toolCallId: use.id,
    tool: use.name,
    args,
    ledger: ledgerState,
    ledgerNote,
    isError: ledger?.isError ?? stored?.isError ?? false,
    result,
    resultChars: ledger?.resultChars ?? resultText.length,
    redactions: ledger?.redactions ?? 0,
    sandbox: use.name === 'shell_execute' ? sandboxSteps(resultText) : [],
    ...(approval ? { approval } : {}),
  };
}

function ledgerOf(
  tool: string,
  ledger: LedgerRecord | undefined,
  stored: StoredResultRecord | undefined,
  result: string,
  newestOfRunningTask: boolean,
  copied: boolean,
): [LedgerState, string] {
  if (!ledger) {
    if (stored && copied) return ['not run', "copied from the source with the source's result"];
    if (stored) return ['not run', 'no ledger row: its attempt ended before it started'];
    return newestOfRunningTask
      ? ['waiting', 'not started yet (a decision or the next activity)']
      : ['not run', 'no ledger row and no result'];
  }
  if (ledger.status === 'started')
    return newestOfRunningTask
      ? ['running', `started ${ledger.startedAt.toISOString()}`]
      : ['interrupted', 'started, never finished: its outcome is unknown'];
  if (result.startsWith(interruptedToolCallText(tool)))
    return ['interrupted', 'its run was cut off: outcome unknown, not run again'];
  if (result === notRunToolCallText(tool) || result === notLandedToolCallText(tool))
    return ['not run', 'its attempt ended before its effect landed'];
  if (ledger.executions === 0) return ['not run', 'answered without running (refused, denied, rejected or replayed)'];
  return ['committed', ledger.executions === 1 ? 'ran once' : `ran ${ledger.executions} times (no side effects)`];
}

/** A shell result's status lines: `$ cmd` then `[exit code 0, 12 ms, output truncated]`. */
export function sandboxSteps(result: string): SandboxStep[] {
  const lines = result.split('\n');
  const steps: SandboxStep[] = [];
  for (let i = 0; i + 1 < lines.length; i++) {
    if (!lines[i]!.startsWith('$ ')) continue;
    const status = /^\[(.+), (\d+) ms(, output truncated)?\]$/.exec(lines[i + 1]!);
    if (!status) continue;
    const text = status[1]!;
    const truncated = status[3] !== undefined;
    const limit = /timed out|cancelled/.test(text)
      ? text
      : text.includes(';')
        ? text.split(';')[0]!
        : truncated
          ? 'output truncated'
          : undefined;
    steps.push({
      command: lines[i]!.slice(2),
      status: text,
      durationMs: Number(status[2]),
      truncated,
      ...(limit ? { limit } : {}),
    });
  }
  return steps;
}

// ---- spend ---------------------------------------------------------------------------------------

function spendView(records: RunRecords, budget?: BudgetFacts): SpendView {
  const root = records.task.id;
  const parentOf = new Map(records.tree.map((t) => [t.id, t.budgetParentId]));
  /** The direct child of the root a task's subtree hangs from (the root for its own calls). */
  const branchOf = (taskId: string): string => {
    let id = taskId;
    for (let depth = 0; depth < records.tree.length; depth++) {
      const parent = parentOf.get(id);
      if (!parent || parent === root || id === root) return id;
      id = parent;
    }
    return id;
  };
  const caps = new Map((budget?.nodes ?? []).map((n) => [n.workflowId, n.limitUsd]));
  const seriesKey = (s: SpendRecord): string => {
    const branch = branchOf(s.taskId);
    if (branch !== root) return `task:${branch}`;
    const sub = s.sessionId ? subagentWorkflow(s.sessionId) : undefined;
    return sub ? `sub:${sub}` : 'own';
  };
  const grouped = groupBy(records.spend, seriesKey);
  const series: SpendSeries[] = [...grouped.entries()].map(([key, rows]) => {
    let total = 0;
    const points = rows.map((r) => ({ at: r.at, totalUsd: (total += r.costUsd) }));
    const [kind, id] = [key.slice(0, key.indexOf(':')), key.slice(key.indexOf(':') + 1)];
    const task = records.tree.find((t) => t.id === id);
    return {
      label:
        key === 'own'
          ? 'this task (its rounds)'
          : kind === 'sub'
            ? `sub-agent ${id.slice(taskWorkflowId(root).length + 1)}`
            : `subtask ${task?.title ?? id} (${id})`,
      points,
      spentUsd: total,
      limitUsd: kind === 'sub' ? (caps.get(id) ?? null) : kind === 'task' ? (task?.grantedUsd ?? null) : null,
    };
  });
  series.sort((a, b) => (a.label.startsWith('this task') ? -1 : b.label.startsWith('this task') ? 1 : 0));
  let total = 0;
  const all = records.spend.map((r) => ({ at: r.at, totalUsd: (total += r.costUsd) }));
  return {
    limitUsd: budget?.limitUsd ?? records.task.cost_budget_usd ?? null,
    spentUsd: total,
    series,
    total: all,
  };
}

// ---- forks ---------------------------------------------------------------------------------------

function forkView(records: RunRecords, finished: boolean): ForkView {
  const fork = records.fork!;
  const forkSession = roundSessionId(records.task.id, 1);
  const source = fork.source;
  const sourceSteps = stepsOf(
    fork.sourceSessionId,
    { ...source, approvals: [], truncations: [] },
    source.replies,
    source.llmCalls.filter((c) => c.sessionId === fork.sourceSessionId),
    true,
  );
  const forkSteps = stepsOf(
    forkSession,
    records,
    records.replies,
    records.llmCalls.filter((c) => c.sessionId === forkSession),
    finished,
  );
  const stepFacts = (s: StepView | undefined) => {
    if (!s) return undefined;
    const main = s.llmCalls.find((c) => c.purpose === 'step');
    return {
      model: main?.model ?? (s.copied ? '(copied)' : '-'),
      costUsd: sum(s.llmCalls.map((c) => c.costUsd)),
      tokens: sum(s.llmCalls.map((c) => c.promptTokens + c.outputTokens)),
      stopReason: main?.stopReason ?? null,
      tools: s.tools.map((t) => t.tool),
      calls: s.tools.map((t) => `${t.tool}${canonicalArgs(t.args)}`).join('\n'),
      copied: s.copied,
    };
  };
  const steps: ForkStepRow[] = [];
  for (let i = 0; i < Math.max(sourceSteps.length, forkSteps.length); i++) {
    const s = stepFacts(sourceSteps[i]);
    const f = stepFacts(forkSteps[i]);
    steps.push({
      step: i + 1,
      ...(s
        ? { source: { model: s.model, costUsd: s.costUsd, tokens: s.tokens, stopReason: s.stopReason, tools: s.tools } }
        : {}),
      ...(f
        ? {
            fork: {
              model: f.model,
              costUsd: f.costUsd,
              tokens: f.tokens,
              stopReason: f.stopReason,
              tools: f.tools,
              copied: f.copied,
            },
          }
        : {}),
      verdict: !f
        ? 'the fork ended before this step'
        : f.copied
          ? 'copied'
          : !s
            ? 'the source ended before this step'
            : [s.model !== f.model ? `model ${s.model} → ${f.model}` : '', s.calls !== f.calls ? 'other calls' : '']
                .filter(Boolean)
                .join('; ') || 'same model and calls',
    });
  }
  const sourceCalls = sourceSteps.flatMap((s) => s.tools);
  const forkCalls = forkSteps.flatMap((s) => s.tools.map((t) => ({ call: t, copied: s.copied })));
  const reports = new Map(fork.calls.map((c) => [c.toolCallId, c]));
  const sourceInputs = new Map(
    source.replies
      .flatMap((r) => r.content.filter((b): b is ToolUseBlock => b.type === 'tool_use'))
      .map((b) => [b.id, b.input]),
  );
  const forkInputs = new Map(
    records.replies
      .filter((r) => r.sessionId === forkSession)
      .flatMap((r) => r.content.filter((b): b is ToolUseBlock => b.type === 'tool_use'))
      .map((b) => [b.id, b.input]),
  );
  const calls: ForkCallRow[] = [];
  for (let i = 0; i < Math.max(sourceCalls.length, forkCalls.length); i++) {
    const s = sourceCalls[i];
    const f = forkCalls[i];
    const report = f ? reports.get(f.call.toolCallId) : undefined;
    const sameCall =
      s &&
      f &&
      s.tool === f.call.tool &&
      canonicalJson(sourceInputs.get(s.toolCallId)) === canonicalJson(forkInputs.get(f.call.toolCallId));
    const sameResult = s && f && s.result === f.call.result && s.isError === f.call.isError;
    calls.push({
      position: i,
      ...(s ? { source: s } : {}),
      ...(f ? { fork: f.call } : {}),
      ...(f
        ? {
            outcome: f.copied
              ? 'copied'
              : (report?.outcome ?? (f.call.tool === 'task_submit_review' ? 'executed' : '-')),
          }
        : {}),
      ...(report?.note ? { note: report.note } : {}),
      verdict: !f
        ? 'the fork made no call here'
        : !s
          ? 'the source made no call here'
          : !sameCall
            ? 'another call'
            : sameResult
              ? 'same call, same result'
              : 'same call, another result',
    });
  }
  return {
    sourceTaskId: fork.sourceTaskId,
    atStep: fork.atStep,
    overrides: fork.overrides,
    allowTools: fork.allowTools,
    workspaceNote: fork.workspaceNote,
    steps,
    calls,
  };
}

// ---- helpers -------------------------------------------------------------------------------------

function groupBy<T>(items: readonly T[], keyOf: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    const group = groups.get(key);
    if (group) group.push(item);
    else groups.set(key, [item]);
  }
  return groups;
}

function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

/** Arguments shown as JSON, in canonical form (keys sorted) to compare two calls'. */
function canonicalArgs(args: string): string {
  try {
    return canonicalJson(JSON.parse(args));
  } catch {
    return args;
  }
}

/** The text cut to `max` characters with an ellipsis. */
export function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
