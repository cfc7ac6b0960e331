import type { AgentsClient, TaskEvent } from './index';
import type { TaskStatus } from '../workflows/contract';

/** Temporal Web UI links for a task (the dev server's UI by default). */
export function uiLinks(
  taskId: string,
  agentId: string,
  uiBase = process.env.TEMPORAL_UI_URL ?? 'http://localhost:8233',
  namespace = 'default',
) {
  const base = `${uiBase}/namespaces/${encodeURIComponent(namespace)}/workflows`;
  return {
    task: `${base}/task-${encodeURIComponent(taskId)}`,
    agentRuns: `${base}?query=${encodeURIComponent(`AgentId="${agentId}"`)}`,
  };
}

/** One human-readable line per task event. */
export function describeEvent(event: TaskEvent): string {
  const d = event.data as Record<string, unknown>;
  switch (event.type) {
    case 'task-created':
      return `task created: ${String(d.title)}`;
    case 'state-changed':
      return `state → ${String(d.state)} (round ${String(d.round)})${d.error ? `: ${String(d.error)}` : ''}`;
    case 'llm-call-finished':
      return `llm ${String(d.model)} · ${String(d.inputTokens)} in / ${String(d.outputTokens)} out · ${String(d.stopReason)}`;
    case 'approval-requested':
      return `approval needed [${String(d.requestId)}]: ${String(d.summary)} — ${String(d.reason)}`;
    case 'approval-decided':
      return `approval ${String(d.status)}${d.decidedBy ? ` by ${String(d.decidedBy)}` : ''} [${String(d.requestId)}]`;
    case 'review-submitted':
      return `submitted for review: ${String(d.summary)}`;
    case 'review-decided':
      return `review: ${String(d.decision)}${d.decidedBy ? ` by ${String(d.decidedBy)}` : ''}${d.feedback ? `: ${String(d.feedback)}` : ''}`;
    case 'comment-added':
      return `comment from ${String(d.from)}: ${String(d.text)}`;
    case 'note-added':
      return `note: ${String(d.note)}`;
    case 'user-notified':
      return `notification: ${String(d.message)}`;
    case 'round-stop-requested':
      return `${d.reason === 'pause' ? 'pause' : 'cancel'} requested: stopping round ${String(d.round)} (attempt ${String(d.attempt)})`;
    case 'budget-exceeded':
      return `budget exceeded: ${String(d.message)}`;
    default:
      return `${event.type} ${JSON.stringify(d).slice(0, 160)}`;
  }
}

export function describeStatus(s: TaskStatus): string {
  const approvals = s.pendingApprovals.length ? ` · ${s.pendingApprovals.length} approval(s) pending` : '';
  return `[${s.state}] round ${s.round} · iteration ${s.iteration} · ${s.phase}${approvals} · ${s.usage.inputTokens} in / ${s.usage.outputTokens} out · $${s.usage.costUsd.toFixed(4)}`;
}

/** Prints a task's progress until it reaches one of `until`; returns the final status. */
export async function printProgress(
  client: AgentsClient,
  taskId: string,
  options: { until?: TaskStatus['state'][]; write?: (line: string) => void } = {},
): Promise<TaskStatus | undefined> {
  const write = options.write ?? ((line: string) => console.log(line));
  let last: TaskStatus | undefined;
  for await (const item of client.follow(taskId, { until: options.until })) {
    if (item.kind === 'event') write(`  · ${describeEvent(item.event)}`);
    else {
      last = item.status;
      write(`  ${describeStatus(item.status)}`);
    }
  }
  return last;
}
