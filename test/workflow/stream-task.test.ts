import { readTranscript, tailStream, transcriptText, type StreamEvent } from '../../client/streams';
import { appendStreamEvents, readStreamEvents } from '../../activities/streams/store';
import { ensureStreamPruneSchedule, streamPruneScheduleId } from '../../worker/stream-prune-schedule';
import { createHarness, useHarness, type Harness } from '../support/harness';

const ANSWER = 'Streaming works: every delta is numbered, stored and announced, in order.';

describe.each(['anthropic', 'openai'] as const)('a task’s live stream on %s', (provider) => {
  const h = useHarness({ worker: true, provider });

  test('a follower sees step-start, the text deltas in order and step-end, under the task’s stream id', async () => {
    h.llm.enqueue({
      kind: 'message',
      content: [
        { type: 'text', text: ANSWER },
        { type: 'tool_use', name: 'task_submit_review', input: { summary: 'streamed' } },
      ],
      stopReason: 'tool_use',
      usage: { inputTokens: 100, outputTokens: 20 },
      chunkDelayMs: 20,
    });
    const agentId = await h.createAgent();
    const { taskId, workflowId } = await h.client.startTask({ agentId, title: 'Stream', description: 'say something' });
    const seen: StreamEvent[] = [];
    for await (const e of tailStream({ db: h.db.db, connectionString: h.db.url }, workflowId, {
      until: (ev) => ev.kind === 'step-end',
    }))
      seen.push(e);

    expect(seen.map((e) => e.seq)).toEqual(seen.map((_, i) => i + 1));
    expect(seen[0]).toMatchObject({ kind: 'step-start', stepKey: `task_${taskId}_r1/assistant-a1-t0`, attempt: 1 });
    const deltas = seen.filter((e) => e.kind === 'delta');
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.map((d) => d.text).join('')).toBe(ANSWER);
    expect(seen.at(-1)).toMatchObject({
      kind: 'step-end',
      data: { stopReason: 'tool_use', toolCalls: ['task_submit_review'] },
    });
    expect(seen.every((e) => e.kind !== 'rewind')).toBe(true);
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(transcriptText(await readTranscript(h.db.db, workflowId))).toBe(ANSWER);
  });
});

describe('stream pruning on a schedule', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness();
    await h.startWorker();
  });
  afterAll(async () => h.close());

  test('the worker’s schedule is created once (idempotent) and its workflow deletes rows past retention', async () => {
    const options = { address: process.env.TEMPORAL_ADDRESS!, namespace: 'default', taskQueue: h.taskQueue };
    await ensureStreamPruneSchedule(options);
    await ensureStreamPruneSchedule(options);
    const schedule = h.temporal.schedule.getHandle(streamPruneScheduleId(h.taskQueue));
    try {
      const description = await schedule.describe();
      expect(description.action).toMatchObject({
        type: 'startWorkflow',
        workflowType: 'streamPruneWorkflow',
        taskQueue: h.taskQueue,
      });
    } finally {
      await schedule.delete();
    }

    const streamId = `prune-${h.taskQueue}`;
    await appendStreamEvents(h.db.db, { streamId }, [{ kind: 'event', data: {} }]);
    const result = await h.temporal.workflow.execute('streamPruneWorkflow', {
      taskQueue: h.taskQueue,
      workflowId: `prune-${h.taskQueue}`,
      args: [{ retentionMs: 0 }],
    });
    expect((result as { events: number }).events).toBeGreaterThanOrEqual(1);
    expect(await readStreamEvents(h.db.db, streamId)).toEqual([]);
  });
});
