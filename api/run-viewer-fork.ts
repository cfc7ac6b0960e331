/**
 * A fork beside its source, call by call: each LLM step (copied, or the fork's own with its model and
 * calls) and each tool call by position (the position the fork's policy matched calls by), with the
 * fork's outcome (copied, replayed, executed, refused) and what differs. Pure.
 */
import { canonicalJson } from '../activities/fork/tool-calls';
import type { ToolUseBlock } from '../activities/llm/types';
import type { RunRecords } from '../activities/store/run-records';
import { roundSessionId } from '../workflows/contract';
import { stepsOf, sum, type StepView, type ToolCallView } from './run-viewer-calls';

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

export function forkView(records: RunRecords, finished: boolean): ForkView {
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

/** Arguments shown as JSON, in canonical form (keys sorted) to compare two calls'. */
function canonicalArgs(args: string): string {
  try {
    return canonicalJson(JSON.parse(args));
  } catch {
    return args;
  }
}
