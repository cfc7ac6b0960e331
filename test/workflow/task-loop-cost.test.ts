import { randomUUID } from 'node:crypto';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { Database } from '../../schema/database';
import { defaultPayloadConverter } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { roundWorkflowId, taskWorkflowId } from '../../workflows/contract';
import { BASELINE_0_9_0_PATCH, LOCAL_STEP_BOUNDS_5S_PATCH, ROUND_LAST_CALLS_PATCH } from '../../workflows/patches';
import { LOCAL_STEP_MAX_MS } from '../../workflows/rules/step-placement';
import { appendMessage, ensureSession, SessionMessageCache } from '../../activities/store/sessions';
import { LlmRouter } from '../../activities/llm/router';
import { createProvider } from '../../activities/llm/providers';
import { runStepWithTools } from '../../activities/step/with-tools';
import { eventually } from '../support/eventually';
import { useHarness, submitTurn, toolTurn } from '../support/harness';
import { historiesOfAllRuns, stepSummaries, toolCallSummaries } from './task-support';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

/** The patch ids a `core_patch` marker carries (its details are JSON payloads). */
function markerPatchIds(event: HistoryEvent): string[] {
  const details = event.markerRecordedEventAttributes?.details ?? {};
  return Object.values(details).flatMap((payloads) =>
    (payloads.payloads ?? []).map((p) => JSON.stringify(defaultPayloadConverter.fromPayload(p as never))),
  );
}

/** Auto-allowed tool iterations before the submission. */
const ITERATIONS = 6;

describe('what a loop iteration costs', () => {
  const h = useHarness({ worker: true });
  const rowState = async (taskId: string) =>
    (await h.db.db.selectFrom('tasks').select('state').where('id', '=', taskId).executeTakeFirst())?.state;
  /**
   * Waits on the task's row, not on the status query: a query that reaches a workflow while its local
   * activities run makes the worker complete that workflow task at once and take their results in
   * another, one workflow task more than the loop itself costs (a CI run of this file counted five).
   */
  const reviewed = (taskId: string) =>
    eventually(async () => (await rowState(taskId)) === 'review', `task ${taskId} to reach review`);

  test('the first step is an activity and the quick ones after it run locally in one workflow task; every LLM and tool call named in history; no signals to the task workflow', async () => {
    h.llm.enqueue(
      ...Array.from({ length: ITERATIONS }, (_, i) =>
        toolTurn('file_write', { path: `cost/${i}.txt`, content: `part ${i}` }),
      ),
      submitTurn('wrote the parts'),
    );
    const agentId = await h.createAgent();
    const { taskId } = await h.client.startTask({
      agentId,
      title: 'Write parts',
      description: 'Write the parts, then submit.',
    });
    await reviewed(taskId);

    const [round] = await historiesOfAllRuns(h.temporal.workflow.getHandle(roundWorkflowId(taskId, 1)));
    const calls = ITERATIONS + 1;
    const steps = stepSummaries(round!);
    // The run's first step is regular; each quick one after it runs locally (the fake answers at once).
    expect(steps.map((s) => s.kind)).toEqual(['regular', ...Array(ITERATIONS).fill('local')]);
    expect(round!.filter((e) => e.activityTaskScheduledEventAttributes)).toHaveLength(1);
    expect(
      steps.every((s, i) => s.summary.startsWith(`llm `) && s.summary.includes(`+ tools · round 1 turn ${i}`)),
    ).toBe(true);
    expect(steps.slice(1).every((s) => s.summary.includes(' · local ◂ turn '))).toBe(true);
    expect(steps.every((s) => typeof s.result.elapsedMs === 'number' && s.result.elapsedMs < LOCAL_STEP_MAX_MS)).toBe(
      true,
    );
    expect(toolCallSummaries(round!)).toEqual([
      ...Array.from({ length: ITERATIONS }, (_, i) => `file_write cost/${i}.txt (${`part ${i}`.length} chars)`),
      'task_submit_review: wrote the parts',
    ]);
    // The start, the first step's completion (which runs every local step after it), and now and then
    // one more when the task workflow's events arrive between them; eight when every step was an activity.
    const workflowTasks = round!.filter((e) => e.workflowTaskCompletedEventAttributes).length;
    expect(workflowTasks).toBeLessThanOrEqual(3);
    // The run carries three patch markers: the release baseline, which stands for every earlier patch
    // ('The release baseline' in patches.ts), and the ones added since (the 5 s step bounds, the last
    // calls' line), so a later change of the loop can tell its history apart. All are written in the run's
    // first workflow task, before the first step.
    const firstStep = round!.find((e) => e.activityTaskScheduledEventAttributes);
    const patches = round!
      .filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch')
      .map((e) => ({ ids: markerPatchIds(e).join(), eventId: Number(e.eventId) }));
    expect(patches.map((p) => (JSON.parse(p.ids) as { id: string }).id)).toEqual([
      BASELINE_0_9_0_PATCH,
      LOCAL_STEP_BOUNDS_5S_PATCH,
      ROUND_LAST_CALLS_PATCH,
    ]);
    expect(patches.every((p) => p.eventId < Number(firstStep!.eventId))).toBe(true);

    // A fresh round does not signal its task workflow at all: no start report, no per-iteration reports.
    const task = (await h.temporal.workflow.getHandle(taskWorkflowId(taskId)).fetchHistory()).events ?? [];
    expect(task.filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'roundProgress')).toHaveLength(
      0,
    );
    // Exactly once: one ledger row per call, each run once.
    const ledger = await h.db.db
      .selectFrom('tool_calls')
      .select(['tool', 'executions'])
      .where('task_id', '=', taskId)
      .execute();
    expect(ledger).toHaveLength(calls);
    expect(ledger.every((l) => l.executions === 1)).toBe(true);
  });

  test('a slow step sends the next one back to a regular activity, and a chain of local steps ends after its time', async () => {
    const slow = {
      ...toolTurn('file_write', { path: 'slow/0.txt', content: 'slow' }),
      chunkDelayMs: LOCAL_STEP_MAX_MS / 4,
    };
    h.llm.enqueue(
      toolTurn('file_write', { path: 'slow/a.txt', content: 'a' }),
      slow, // local (after a quick one), and slow: more than a second in all
      toolTurn('file_write', { path: 'slow/b.txt', content: 'b' }),
      submitTurn('wrote them'),
    );
    const agentId = await h.createAgent();
    const { taskId } = await h.client.startTask({ agentId, title: 'Slow', description: 'Write, slowly.' });
    await reviewed(taskId);
    const [round] = await historiesOfAllRuns(h.temporal.workflow.getHandle(roundWorkflowId(taskId, 1)));
    const steps = stepSummaries(round!);
    expect(steps[1]!.result.elapsedMs).toBeGreaterThanOrEqual(LOCAL_STEP_MAX_MS);
    expect(steps.map((s) => s.kind)).toEqual(['regular', 'local', 'regular', 'local']);
  });

  test("the task workflow's own writes (opening, the move to review) run as local activities: no activity task, no workflow task of their own", async () => {
    h.llm.enqueue(submitTurn('done at once'));
    const agentId = await h.createAgent();
    const { taskId } = await h.client.startTask({ agentId, title: 'Submit', description: 'Submit at once.' });
    await reviewed(taskId);
    // The row says review while the move's local activity is still running: its marker is written when
    // its workflow task completes, a moment later.
    const markersOf = (events: HistoryEvent[]) =>
      events.flatMap((e) => (e.markerRecordedEventAttributes ? [e.markerRecordedEventAttributes] : []));
    const task = await eventually(async () => {
      const events = (await h.temporal.workflow.getHandle(taskWorkflowId(taskId)).fetchHistory()).events ?? [];
      return markersOf(events).filter((m) => m.markerName === 'core_local_activity').length >= 2 ? events : undefined;
    }, "the move to review's marker");
    expect(task.filter((e) => e.activityTaskScheduledEventAttributes)).toHaveLength(0);
    const markers = markersOf(task);
    const localActivities = markers.filter((m) => m.markerName === 'core_local_activity');
    expect(localActivities).toHaveLength(2);
    // One patch marker: the release baseline, which takes TASK_STORE_LOCAL_PATCH (and every earlier
    // patch) without asking it.
    expect(
      markers
        .filter((m) => m.markerName === 'core_patch')
        .flatMap((m) => markerPatchIds({ markerRecordedEventAttributes: m }))
        .map((ids) => (JSON.parse(ids) as { id: string }).id),
    ).toEqual([BASELINE_0_9_0_PATCH]);
    // Start (records itself, starts the round), the round's start, its end (the move to review): three,
    // now and then four when events arrive between them; six when these writes were activities.
    expect(task.filter((e) => e.workflowTaskCompletedEventAttributes).length).toBeLessThanOrEqual(4);
    expect(await rowState(taskId)).toBe('review');
    const events = await h.db.db.selectFrom('task_events').select('type').where('task_id', '=', taskId).execute();
    expect(events.filter((e) => e.type === 'state-changed')).toHaveLength(2);
  });

  test('the session cache reads only new rows, keeps message objects, and finds a row that committed late with a lower id', async () => {
    const agentId = await h.createAgent();
    const sessionId = `cache-${agentId}`;
    await ensureSession(h.db.db, { id: sessionId, agentId, kind: 'task' });
    const cache = new SessionMessageCache();
    await appendMessage(h.db.db, sessionId, 'm1', { role: 'user', content: [{ type: 'text', text: 'one' }] });
    const first = await cache.load(h.db.db, sessionId);
    await appendMessage(h.db.db, sessionId, 'm2', { role: 'assistant', content: [{ type: 'text', text: 'two' }] });
    const second = await cache.load(h.db.db, sessionId);
    expect(second.map((m) => (m.content[0] as { text: string }).text)).toEqual(['one', 'two']);
    expect(second[0]).toBe(first[0]);

    // A transaction that took its id first but commits after a later row: the late row is still read.
    await h.db.db.transaction().execute(async (slow) => {
      await appendMessage(slow, sessionId, 'm3-late', { role: 'user', content: [{ type: 'text', text: 'late' }] });
      await appendMessage(h.db.db, sessionId, 'm4', { role: 'user', content: [{ type: 'text', text: 'four' }] });
      expect((await cache.load(h.db.db, sessionId)).map((m) => (m.content[0] as { text: string }).text)).toEqual([
        'one',
        'two',
        'four',
      ]);
    });
    const after = await cache.load(h.db.db, sessionId);
    expect(after.map((m) => (m.content[0] as { text: string }).text)).toEqual(['one', 'two', 'late', 'four']);
    expect(after[1]).toBe(second[1]);
    // A message is found by its key among the loaded ones, the late one included; a key not stored is not.
    expect(cache.findLoaded(sessionId, 'm3-late')).toBe(after[2]);
    expect(cache.findLoaded(sessionId, 'm4')).toBe(after[3]);
    expect(cache.findLoaded(sessionId, 'm5')).toBeUndefined();
    expect(cache.findLoaded(`${sessionId}-other`, 'm1')).toBeUndefined();
  });

  /** An agent with a task in progress and a router to the fake, for running the fused step directly. */
  async function directStep() {
    const agentId = await h.createAgent();
    const { id: taskId } = await h.db.db
      .insertInto('tasks')
      .values({
        id: randomUUID(),
        agent_id: agentId,
        title: 'Write',
        description: 'Write it.',
        state: 'in_progress',
        priority: 'medium',
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    const router = LlmRouter.fromConfig(
      [{ name: 'anthropic', kind: 'anthropic', apiKey: 'test-key', baseURL: h.llm.url }],
      createProvider,
    );
    h.llm.reset();
    return { agentId, taskId, router };
  }

  test('a step retried on the worker that stored its reply finds the reply among the session’s loaded messages and runs nothing again', async () => {
    const { agentId, taskId, router } = await directStep();
    h.llm.enqueue(toolTurn('file_write', { path: 'once.txt', content: 'once' }));
    const input = { agentId, taskId, sessionId: `retry-${agentId}`, scenario: 'task' as const, attempt: 1, turn: 0 };
    const first = await runStepWithTools(h.db.db, router, { ...input, opening: {} });
    const again = await runStepWithTools(h.db.db, router, input);
    expect(first.replayed).toBe(false);
    expect(again.replayed).toBe(true);
    expect(again.toolCalls).toEqual(first.toolCalls);
    expect(again.toolResults.map((r) => r.result.replayed)).toEqual([true]);
    expect(h.llm.requests).toHaveLength(1);
    const ledger = await h.db.db.selectFrom('tool_calls').select('executions').where('task_id', '=', taskId).execute();
    expect(ledger).toEqual([{ executions: 1 }]);
  });

  test('a first call that runs as it is has its ledger row written by the reply’s own statement; one that needs a decision does not', async () => {
    const { agentId, taskId, router } = await directStep();
    h.llm.enqueue(
      toolTurn('file_write', { path: 'merged.txt', content: 'merged' }),
      toolTurn('shell_execute', { command: 'echo governed' }),
    );
    const sessionId = `merged-${agentId}`;
    const input = { agentId, taskId, sessionId, scenario: 'task' as const, attempt: 1 };
    await runStepWithTools(h.db.db, router, { ...input, turn: 0, opening: {} });
    await runStepWithTools(h.db.db, router, { ...input, turn: 1 });
    // One statement is one transaction, so its rows share now(): the write's ledger row was stored with
    // its reply; the shell call (governed, so decided first) got its own statement after the reply.
    const rows = await h.db.db
      .selectFrom('tool_calls')
      .innerJoin('messages', (j) =>
        j.onRef('messages.session_id', '=', 'tool_calls.session_id').on('messages.role', '=', 'assistant'),
      )
      .select(['tool_calls.tool', 'tool_calls.status', 'tool_calls.executions'])
      .select((eb) => eb('tool_calls.started_at', '=', eb.ref('messages.created_at')).as('with_reply'))
      .where('tool_calls.session_id', '=', sessionId)
      .where((eb) =>
        eb(eb.fn('jsonb_path_exists', ['messages.content', sql.lit('$[*] ? (@.type == "tool_use")')]), '=', true),
      )
      .execute();
    const byTool = (tool: string) => rows.filter((r) => r.tool === tool).map((r) => r.with_reply);
    expect(byTool('file_write')).toContain(true);
    expect(byTool('shell_execute')).not.toContain(true);
    expect(rows.every((r) => r.executions === 1)).toBe(true);
  });

  test('a step reads the agent, the task and the activations again only when their versions changed since its session’s last step here, and then sees the change', async () => {
    const { agentId, taskId, router } = await directStep();
    // The same database through a client that lists every statement.
    const statements: string[] = [];
    const pool = new pg.Pool({ connectionString: h.db.url, max: 4 });
    const db = new Kysely<Database>({
      dialect: new PostgresDialect({ pool }),
      log: (event) => void statements.push(event.query.sql),
    });
    const rowReads = () =>
      statements.filter((q) => /xmin::text as "row_version"|^select "kind", "name" from "skill_activations"/.test(q));
    try {
      h.llm.enqueue(
        ...Array.from({ length: 3 }, (_, i) => toolTurn('file_write', { path: `versions/${i}.txt`, content: `${i}` })),
        submitTurn('wrote them'),
      );
      const input = { agentId, taskId, sessionId: `versions-${agentId}`, scenario: 'task' as const, attempt: 1 };
      // The session is new to this worker: its rows are read, with their versions.
      await runStepWithTools(db, router, { ...input, turn: 0, opening: {} });
      expect(rowReads()).toHaveLength(3);
      // Unchanged: the prompt's statement reports the same versions, and nothing else is read.
      statements.length = 0;
      await runStepWithTools(db, router, { ...input, turn: 1 });
      expect(rowReads()).toEqual([]);
      // The agent row changes (an operator's edit): the next step reads the rows again and shows it.
      await h.db.db
        .updateTable('agents')
        .set({ soul_md: 'A soul edited between two steps.' })
        .where('id', '=', agentId)
        .execute();
      statements.length = 0;
      await runStepWithTools(db, router, { ...input, turn: 2 });
      expect(rowReads()).toHaveLength(3);
      expect(JSON.stringify(h.llm.requests.at(-1)!.body)).toContain('A soul edited between two steps.');
      // The task row changes (an update that leaves every value as it was still writes a new version).
      await h.db.db.updateTable('tasks').set({ priority: 'medium' }).where('id', '=', taskId).execute();
      statements.length = 0;
      await runStepWithTools(db, router, { ...input, turn: 3 });
      expect(rowReads()).toHaveLength(3);
    } finally {
      await db.destroy();
    }
  });
});
