/**
 * A session's steps as the run viewer shows them: in the order the model took them, each with its LLM
 * calls (the step's own and the auxiliary ones under its key) and its tool calls, each with what the
 * ledger says of it, its sandbox status and its approval trail. Pure.
 *
 * Secrets: what the worker stored was redacted there; every argument, result and reply text shown is
 * passed through the same helpers again (`redactSecrets`, `safeToolText`, `safeLine`) with this
 * process's secret values, so a secret the API holds and the worker did not is cut out too.
 */
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
  StoredResultRecord,
  TruncationRecord,
} from '../activities/store/run-records';
import { interruptedToolCallText, notLandedToolCallText, notRunToolCallText } from '../prompts/task';
import { taskWorkflowId } from '../workflows/contract';

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
export function subagentWorkflow(sessionId: string): string | undefined {
  const parent = subagentParent(sessionId);
  return parent ? `${parent}-sub-${sessionId.slice(sessionId.lastIndexOf('_') + 1)}` : undefined;
}

/**
 * A session's steps in order: one per reply (its main LLM call, the auxiliary calls under its key, its
 * tool calls), and one per key that has LLM calls but no reply (a call whose reply was not stored).
 */
export function stepsOf(
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
  const replyTimes = replies.map((r) => firstAt(r.key));
  // Replies keep the conversation's order; a step without a reply goes after the last reply begun before it.
  const position = (key: string): number => {
    const index = order.get(key);
    if (index !== undefined) return index;
    const at = firstAt(key);
    return replyTimes.reduce((before, time, i) => (time <= at ? i : before), -1) + 0.5;
  };
  keys.sort((a, b) => position(a) - position(b) || firstAt(a) - firstAt(b));
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

export function llmCallView(c: LlmCallRecord, stepKey: string): LlmCallView {
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

// ---- helpers -------------------------------------------------------------------------------------

export function groupBy<T>(items: readonly T[], keyOf: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    const group = groups.get(key);
    if (group) group.push(item);
    else groups.set(key, [item]);
  }
  return groups;
}

export function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

/** The text cut to `max` characters with an ellipsis. */
export function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
