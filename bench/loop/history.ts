/**
 * Reads what Temporal recorded for a task (its workflow and its round's) and derives the cost of an
 * iteration: events, workflow tasks and their latency, activities and the time spent inside them.
 */
import { defaultPayloadConverter, type Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { roundWorkflowId, taskWorkflowId } from '../../workflows/contract';

type Event = temporal.api.history.v1.IHistoryEvent;

export interface HistoryFigures {
  events: number;
  workflowTasks: number;
  /** Sums in ms. */
  wftScheduleToStart: number;
  wftStartToComplete: number;
  activities: number;
  activityScheduleToStart: number;
  activityStartToClose: number;
  /** Local activities (their markers). */
  localActivities: number;
  /** Loop steps (regular or local) whose result says how long they ran, and the sum of that (`elapsedMs`). */
  steps: number;
  stepElapsed: number;
}

const ZERO: HistoryFigures = {
  events: 0,
  workflowTasks: 0,
  wftScheduleToStart: 0,
  wftStartToComplete: 0,
  activities: 0,
  activityScheduleToStart: 0,
  activityStartToClose: 0,
  localActivities: 0,
  steps: 0,
  stepElapsed: 0,
};

/** The marker Core records for a local activity: its data (type, attempt) and its result. */
const LOCAL_ACTIVITY_MARKER = 'core_local_activity';

/** The step's own measure of the time inside it, from its result payload (absent from other activities). */
function stepElapsed(payload: unknown): number | undefined {
  try {
    const result = defaultPayloadConverter.fromPayload(payload as never) as { elapsedMs?: unknown } | undefined;
    return typeof result?.elapsedMs === 'number' ? result.elapsedMs : undefined;
  } catch {
    return undefined;
  }
}

function ms(event: Event | undefined): number {
  const t = event?.eventTime;
  return t ? Number(t.seconds ?? 0) * 1_000 + (t.nanos ?? 0) / 1e6 : 0;
}

export function analyse(events: readonly Event[]): HistoryFigures {
  const byId = new Map<number, Event>();
  for (const e of events) byId.set(Number(e.eventId), e);
  const out = { ...ZERO, events: events.length };
  const countStep = (payload: unknown): void => {
    const elapsed = stepElapsed(payload);
    if (elapsed === undefined) return;
    out.steps += 1;
    out.stepElapsed += elapsed;
  };
  for (const e of events) {
    if (e.workflowTaskStartedEventAttributes) {
      out.workflowTasks += 1;
      out.wftScheduleToStart += ms(e) - ms(byId.get(Number(e.workflowTaskStartedEventAttributes.scheduledEventId)));
    } else if (e.workflowTaskCompletedEventAttributes) {
      out.wftStartToComplete += ms(e) - ms(byId.get(Number(e.workflowTaskCompletedEventAttributes.startedEventId)));
    } else if (e.activityTaskStartedEventAttributes) {
      out.activities += 1;
      out.activityScheduleToStart +=
        ms(e) - ms(byId.get(Number(e.activityTaskStartedEventAttributes.scheduledEventId)));
    } else if (e.activityTaskCompletedEventAttributes) {
      out.activityStartToClose += ms(e) - ms(byId.get(Number(e.activityTaskCompletedEventAttributes.startedEventId)));
      countStep(e.activityTaskCompletedEventAttributes.result?.payloads?.[0]);
    } else if (e.markerRecordedEventAttributes?.markerName === LOCAL_ACTIVITY_MARKER) {
      out.localActivities += 1;
      countStep(e.markerRecordedEventAttributes.details?.result?.payloads?.[0]);
    }
  }
  return out;
}

export function sum(a: HistoryFigures, b: HistoryFigures): HistoryFigures {
  return Object.fromEntries(
    Object.keys(ZERO).map((k) => [k, a[k as keyof HistoryFigures] + b[k as keyof HistoryFigures]]),
  ) as unknown as HistoryFigures;
}

/** Figures of the task workflow plus its first round (every run of it: follows continue-as-new). */
export async function taskFigures(
  client: Client,
  taskId: string,
): Promise<{ task: HistoryFigures; round: HistoryFigures }> {
  const task = analyse((await client.workflow.getHandle(taskWorkflowId(taskId)).fetchHistory()).events ?? []);
  let round = ZERO;
  let runId: string | undefined;
  for (;;) {
    const history = await client.workflow.getHandle(roundWorkflowId(taskId, 1), runId).fetchHistory();
    const events = history.events ?? [];
    round = sum(round, analyse(events));
    const next = events.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId;
    if (!next) break;
    runId = next;
  }
  return { task, round };
}

export { ZERO as ZERO_FIGURES };
