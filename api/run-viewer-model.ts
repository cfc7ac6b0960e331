/**
 * The run viewer's reading of a task's records (activities/store/run-records.ts): its rounds, each
 * with its own session and its sub-agents' (run-viewer-calls.ts), the other runs made for it, the spend
 * of its budget tree (run-viewer-spend.ts) and, for a fork, its calls beside its source's
 * (run-viewer-fork.ts). Pure: the page (run-viewer-page.ts) renders it.
 */
import type { LlmCallRecord, ReplyRecord, RunRecords } from '../activities/store/run-records';
import { roundWorkflowId, taskWorkflowId } from '../workflows/contract';
import { isTerminal, type TaskState } from '../workflows/rules/task-state';
import { groupBy, llmCallView, roundOf, stepsOf, subagentWorkflow, sum, type StepView } from './run-viewer-calls';
import { forkView, type ForkView } from './run-viewer-fork';
import { spendView, type BudgetFacts, type SpendView } from './run-viewer-spend';

export type { BudgetFacts } from './run-viewer-spend';

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
