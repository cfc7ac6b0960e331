import { applyStreamEvent, emptyTranscript, tailStream, transcriptText, type StreamEvent } from '../../client/streams';
import { useHarness } from '../support/harness';

/** Set small here through the variable a deployment sets; the default is two minutes. */
const IDLE_MS = 1_000;
const ANSWER = Array.from({ length: 6 }, (_, i) => `Part ${i + 1} of the answer.`).join(' ');

/**
 * The provider opens the step's stream, sends a little text, then falls silent (a stalled provider).
 * The adapter cuts the stream after LLM_STREAM_IDLE_TIMEOUT_MS, the step fails with a retryable
 * timeout, and its retry gets the whole answer: in seconds, not after the HTTP client's 300-second
 * body timeout. A follower sees the cut-off text rewound, and the answer once.
 */
describe.each(['anthropic', 'openai'] as const)('a stalled %s stream', (provider) => {
  const h = useHarness({ provider });
  let previous: string | undefined;
  beforeAll(async () => {
    previous = process.env.LLM_STREAM_IDLE_TIMEOUT_MS;
    process.env.LLM_STREAM_IDLE_TIMEOUT_MS = String(IDLE_MS);
    await h.startWorker();
  });
  afterAll(() => {
    if (previous === undefined) delete process.env.LLM_STREAM_IDLE_TIMEOUT_MS;
    else process.env.LLM_STREAM_IDLE_TIMEOUT_MS = previous;
  });

  test('is cut after the idle time and retried; the answer arrives once', async () => {
    const reply = {
      kind: 'message' as const,
      content: [
        { type: 'text' as const, text: ANSWER },
        { type: 'tool_use' as const, name: 'task_submit_review', input: { summary: 'answered' } },
      ],
      stopReason: 'tool_use' as const,
      usage: { inputTokens: 100, outputTokens: 40 },
      chunkDelayMs: 10,
    };
    // The first call stalls after a few text deltas; the retry answers whole.
    h.llm.enqueue({ ...reply, stallAfterEvents: 6 }, reply);
    const agentId = await h.createAgent();
    const started = Date.now();
    const { taskId, workflowId } = await h.client.startTask({ agentId, title: 'Answer', description: 'say it' });
    const seen: StreamEvent[] = [];
    for await (const e of tailStream({ db: h.db.db, connectionString: h.db.url }, workflowId, {
      until: (x) => x.kind === 'step-end',
    }))
      seen.push(e);
    const answeredAfterMs = Date.now() - started;

    const cutOff = seen
      .filter((e) => e.kind === 'delta' && e.attempt === 1)
      .map((e) => e.text)
      .join('');
    expect(cutOff.length).toBeGreaterThan(0);
    expect(ANSWER.startsWith(cutOff) && cutOff.length < ANSWER.length).toBe(true);
    expect(seen.filter((e) => e.kind === 'rewind')).toMatchObject([
      { attempt: 2, data: { supersededChars: cutOff.length } },
    ]);
    expect(
      seen
        .filter((e) => e.kind === 'delta' && e.attempt === 2)
        .map((e) => e.text)
        .join(''),
    ).toBe(ANSWER);
    // Folded as a follower shows it: the answer once, the cut-off opening not repeated.
    expect(transcriptText(seen.reduce(applyStreamEvent, emptyTranscript()))).toBe(ANSWER);

    // The stalled call was cut by the idle timer and sent again once; the step's retry waits 2 s first.
    expect(h.llm.requests).toHaveLength(2);
    expect(h.llm.requests[0]!.aborted).toBe(true);
    expect(h.llm.requests[0]!.abortedAt! - h.llm.requests[0]!.receivedAt).toBeGreaterThanOrEqual(IDLE_MS);
    expect(answeredAfterMs).toBeLessThan(15_000);
    const status = await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(status.submission).toBe('answered');
    const calls = await h.db.db.selectFrom('llm_calls').select('id').where('task_id', '=', taskId).execute();
    expect(calls).toHaveLength(1);
  }, 60_000);
});
