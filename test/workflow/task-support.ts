/**
 * Helpers shared by the task workflow tests: a fake agent that answers each task's requests from its
 * own script (several tasks, reflections and the context summariser can share one fake LLM server),
 * and readers for what Temporal recorded (history events, activity summaries, current details).
 */
import { randomUUID } from 'node:crypto';
import { defaultPayloadConverter, type WorkflowHandle } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import type { FakeLlmServer, RecordedRequest, ScriptedResponse } from '../fake-llm';
import { eventually } from '../support/eventually';
import { lateBound, textTurn, useHarness, type Harness, type UseHarnessOptions } from '../support/harness';

/** What a script sees: the request, its text, and how many requests this task made before it. */
export interface AgentTurn {
  request: RecordedRequest;
  /** The request body as JSON text, for `includes` checks. */
  text: string;
  /** 0-based index among this task's tool-offering requests. */
  index: number;
}

export type AgentScript = ScriptedResponse[] | ((turn: AgentTurn) => ScriptedResponse);

const TASK_ID_PATTERN = /\[TASK EXECUTION — Task ID: ([^\]\s]+)\]/;

/** True for requests that offer tools: the task harness; the context summariser sends none. */
export const offersTools = (r: RecordedRequest): boolean =>
  Array.isArray(r.body.tools) && (r.body.tools as unknown[]).length > 0;
export const bodyText = (r: RecordedRequest): string => JSON.stringify(r.body);
export const isReflection = (r: RecordedRequest): boolean => bodyText(r).includes('[POST-TASK REFLECTION');

/**
 * Routes each request of the fake LLM server by the task id in its task prompt (the first user message,
 * which compression never drops) to that task's script. Requests without tools (the summariser) and
 * post-task reflections get a short text answer.
 */
export class ScriptedAgents {
  private readonly scripts = new Map<string, AgentScript>();
  private readonly seen = new Map<string, RecordedRequest[]>();

  constructor(private readonly llm: FakeLlmServer) {
    llm.setResponder((request) => this.respond(request));
  }

  /** A fresh task id with its script; pass the id to `startTask({ taskId })`. */
  task(script: AgentScript): string {
    const taskId = randomUUID();
    this.scripts.set(taskId, Array.isArray(script) ? [...script] : script);
    return taskId;
  }

  /** The tool-offering requests a task made, in order. */
  requests(taskId: string): RecordedRequest[] {
    return this.seen.get(taskId) ?? [];
  }

  /** Resolves once the task has made `count` tool-offering requests. */
  async waitForRequests(taskId: string, count: number, timeoutMs = 30_000): Promise<RecordedRequest[]> {
    return eventually(
      () => this.requests(taskId).length >= count && this.requests(taskId),
      `task ${taskId} to make ${count} requests`,
      timeoutMs,
      25,
    );
  }

  private respond(request: RecordedRequest): ScriptedResponse {
    if (isReflection(request)) return textTurn('Nothing new worth saving from this task.');
    if (!offersTools(request)) return textTurn('Summary: the agent has been working through its task with tools.');
    const text = bodyText(request);
    const taskId = TASK_ID_PATTERN.exec(JSON.stringify(request.body.messages ?? ''))?.[1];
    const script = taskId ? this.scripts.get(taskId) : undefined;
    if (!taskId || !script)
      return { kind: 'error', status: 400, message: `no script for this request (task ${taskId ?? 'unknown'})` };
    const seen = this.seen.get(taskId) ?? [];
    seen.push(request);
    this.seen.set(taskId, seen);
    if (typeof script === 'function') return script({ request, text, index: seen.length - 1 });
    const next = script.shift();
    if (!next) return { kind: 'error', status: 400, message: `script for task ${taskId} exhausted` };
    return next;
  }
}

export type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

/** Every event of every run of a workflow id, oldest run first (follows continue-as-new). */
export async function historiesOfAllRuns(handle: WorkflowHandle): Promise<HistoryEvent[][]> {
  const runs: HistoryEvent[][] = [];
  const firstRunId = (await handle.describe()).raw.workflowExecutionInfo?.firstRunId ?? undefined;
  let runId: string | undefined = firstRunId;
  const client = handle.client;
  for (;;) {
    const history = await client.getHandle(handle.workflowId, runId).fetchHistory();
    const events = history.events ?? [];
    runs.push(events);
    const last = events.at(-1);
    const next = last?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId;
    if (!next) return runs;
    runId = next;
  }
}

/** The human-readable summaries of the activities a history scheduled, in order. */
export function activitySummaries(events: HistoryEvent[]): string[] {
  return events
    .filter((e) => e.activityTaskScheduledEventAttributes)
    .map((e) =>
      e.userMetadata?.summary ? String(defaultPayloadConverter.fromPayload(e.userMetadata.summary as never)) : '',
    );
}

/** A local activity's marker, read: its type, its recorded result and the summary it was given. */
export interface LocalActivityMarker {
  eventId: string;
  activityType: string;
  result: unknown;
  summary: string;
}

/** Every local activity a history recorded (`core_local_activity` markers), in order. */
export function localActivityMarkers(events: HistoryEvent[]): LocalActivityMarker[] {
  return events.flatMap((e) => {
    const marker = e.markerRecordedEventAttributes;
    if (marker?.markerName !== 'core_local_activity') return [];
    const read = (name: string): unknown => {
      const payload = marker.details?.[name]?.payloads?.[0];
      return payload ? defaultPayloadConverter.fromPayload(payload as never) : undefined;
    };
    const data = read('data') as { activity_type: string };
    const summary = e.userMetadata?.summary
      ? String(defaultPayloadConverter.fromPayload(e.userMetadata.summary as never))
      : '';
    return [{ eventId: String(e.eventId), activityType: data.activity_type, result: read('result'), summary }];
  });
}

/** A fused step a round ran: where (regular or local), its summary, its recorded result, the event that ended it. */
export interface StepRecord {
  kind: 'regular' | 'local';
  summary: string;
  result: { toolResults: Array<{ summary: string }>; elapsedMs?: number };
  eventId: number;
}

/** Each fused step a round's history recorded, in order. */
export function stepSummaries(events: HistoryEvent[]): StepRecord[] {
  const scheduled = new Map<string, HistoryEvent>();
  for (const e of events) if (e.activityTaskScheduledEventAttributes) scheduled.set(String(e.eventId), e);
  const regular = events.flatMap((e): StepRecord[] => {
    const completed = e.activityTaskCompletedEventAttributes;
    const schedule = completed ? scheduled.get(String(completed.scheduledEventId)) : undefined;
    if (!completed || schedule?.activityTaskScheduledEventAttributes?.activityType?.name !== 'llmStepWithTools')
      return [];
    const result = defaultPayloadConverter.fromPayload(completed.result!.payloads![0] as never) as StepRecord['result'];
    return [{ kind: 'regular', summary: activitySummaries([schedule])[0]!, result, eventId: Number(e.eventId) }];
  });
  const local = localActivityMarkers(events)
    .filter((m) => m.activityType === 'llmStepWithTools' && m.result !== undefined)
    .map((m): StepRecord => ({
      kind: 'local',
      summary: m.summary,
      result: m.result as never,
      eventId: Number(m.eventId),
    }));
  return [...regular, ...local].sort((x, y) => x.eventId - y.eventId);
}

/**
 * The summaries of every tool call a round's history shows: calls run as their own activity (their
 * activity summary) and calls the fused LLM step ran, regular or local (listed with their summary in
 * its recorded result).
 */
export function toolCallSummaries(events: HistoryEvent[]): string[] {
  const own = events
    .filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'executeTool')
    .map((e) => ({ eventId: Number(e.eventId), summaries: activitySummaries([e]) }));
  const fused = stepSummaries(events).map((s) => ({
    eventId: s.eventId,
    summaries: s.result.toolResults.map((r) => r.summary),
  }));
  return [...own, ...fused].sort((x, y) => x.eventId - y.eventId).flatMap((x) => x.summaries);
}

/** The workflow's current details (`setCurrentDetails`), as the Temporal UI shows them. */
export async function currentDetails(handle: WorkflowHandle): Promise<string> {
  const metadata = (await handle.query('__temporal_workflow_metadata')) as { currentDetails?: string };
  return metadata.currentDetails ?? '';
}

/** The tool results in the newest user message of an (Anthropic) request: what the model was just told. */
export function lastToolResults(request: RecordedRequest): Array<{ text: string; isError: boolean }> {
  const messages = (request.body.messages ?? []) as Array<{ role: string; content: unknown }>;
  for (let i = messages.length - 1; i >= 0; i--) {
    const content = messages[i]!.content;
    if (messages[i]!.role !== 'user' || !Array.isArray(content)) continue;
    const results = content.filter((b: { type?: string }) => b.type === 'tool_result') as Array<{
      content: unknown;
      is_error?: boolean;
    }>;
    if (results.length === 0) continue;
    return results.map((r) => ({
      text:
        typeof r.content === 'string'
          ? r.content
          : (r.content as Array<{ text?: string }>).map((b) => b.text ?? '').join(''),
      isError: r.is_error === true,
    }));
  }
  return [];
}

/** The message of the failure behind a rejected update (the validator's words). */
export async function updateRejection(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    const cause = (error as { cause?: { message?: string } }).cause;
    return cause?.message ?? (error as Error).message;
  }
  throw new Error('the update was accepted');
}

/**
 * `useHarness({ worker: true })` with scripted agents on its fake provider, for a whole test file:
 * `const { h, agents } = useScriptedHarness();`.
 */
export function useScriptedHarness(options: UseHarnessOptions = {}): { h: Harness; agents: ScriptedAgents } {
  const h = useHarness({ ...options, worker: true });
  let agents: ScriptedAgents | undefined;
  beforeAll(() => {
    agents = new ScriptedAgents(h.llm);
  });
  return { h, agents: lateBound(() => agents, 'the scripted agents of useScriptedHarness()') };
}
