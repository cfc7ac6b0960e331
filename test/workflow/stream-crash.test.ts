import type { ChildProcess } from 'node:child_process';
import { applyStreamEvent, emptyTranscript, tailStream, transcriptText, type StreamEvent } from '../../client/streams';
import { agentWorkflowId, ConversationClient, type ChatEvent } from '../../client/chat';
import { useHarness } from '../support/harness';
import { killWorkerProcess, spawnWorkerProcess } from '../support/spawn-worker';

const ANSWER = Array.from({ length: 12 }, (_, i) => `Sentence ${i + 1} of the answer, streamed slowly.`).join(' ');
/** ~12 characters per streamed chunk: the answer takes a few seconds, so the kill lands mid-stream. */
const CHUNK_DELAY_MS = 40;
/** Deltas the follower must have seen before the worker is killed. */
const DELTAS_BEFORE_KILL = 3;

describe('a worker SIGKILLed while an LLM call streams', () => {
  const h = useHarness({
    beforeClose: async () => {
      for (const w of workers) await killWorkerProcess(w);
    },
  });
  const workers: ChildProcess[] = [];
  beforeAll(async () => {
    // A chat gets the answer as plain text; a task gets it with its submission.
    h.llm.setResponder((r) => ({
      kind: 'message',
      content: JSON.stringify(r.body.messages).includes('tell me a long story')
        ? [{ type: 'text', text: ANSWER }]
        : [
            { type: 'text', text: ANSWER },
            { type: 'tool_use', name: 'task_submit_review', input: { summary: 'answered' } },
          ],
      stopReason: JSON.stringify(r.body.messages).includes('tell me a long story') ? 'end_turn' : 'tool_use',
      usage: { inputTokens: 100, outputTokens: 80 },
      chunkDelayMs: CHUNK_DELAY_MS,
    }));
  });

  test('the follower gets a rewind for the cut-off text, resumes from its last sequence number, and the transcript holds the answer once', async () => {
    workers.push(await spawnWorkerProcess({ taskQueue: h.taskQueue, fakeLlmUrl: h.llm.url }));
    const agentId = await h.createAgent();
    const { taskId, workflowId } = await h.client.startTask({
      agentId,
      title: 'Answer slowly',
      description: 'stream a long answer',
    });
    const source = { db: h.db.db, connectionString: h.db.url };
    const seen: StreamEvent[] = [];

    // First follower: reads until the worker has streamed a few deltas, then the worker dies and the
    // follower disconnects too (a client restart).
    for await (const e of tailStream(source, workflowId)) {
      seen.push(e);
      if (seen.filter((x) => x.kind === 'delta').length >= DELTAS_BEFORE_KILL) break;
    }
    await killWorkerProcess(workers[0]!);
    workers.push(await spawnWorkerProcess({ taskQueue: h.taskQueue, fakeLlmUrl: h.llm.url }));

    // Second follower: resumes after the last sequence number it saw, until the retried step ends.
    const resumeAfter = seen.at(-1)!.seq;
    for await (const e of tailStream(source, workflowId, {
      afterSeq: resumeAfter,
      until: (x) => x.kind === 'step-end',
    }))
      seen.push(e);

    expect(seen.map((e) => e.seq)).toEqual(seen.map((_, i) => i + 1));
    const cutOff = seen
      .filter((e) => e.kind === 'delta' && e.attempt === 1)
      .map((e) => e.text)
      .join('');
    expect(cutOff.length).toBeGreaterThan(0);
    expect(ANSWER.startsWith(cutOff) && cutOff.length < ANSWER.length).toBe(true);
    const rewinds = seen.filter((e) => e.kind === 'rewind');
    expect(rewinds).toHaveLength(1);
    expect(rewinds[0]).toMatchObject({
      attempt: 2,
      stepKey: `task_${taskId}_r1/assistant-a1-t0`,
      data: { supersededChars: cutOff.length },
    });
    const retried = seen.filter((e) => e.kind === 'delta' && e.attempt === 2);
    expect(retried.every((e) => e.seq > rewinds[0]!.seq)).toBe(true);
    expect(retried.map((e) => e.text).join('')).toBe(ANSWER);

    // Without the rewind the raw deltas would repeat the opening; folded, the answer appears once.
    const transcript = seen.reduce(applyStreamEvent, emptyTranscript());
    expect(transcriptText(transcript)).toBe(ANSWER);
    expect(transcriptText(transcript).split('Sentence 1 of').length - 1).toBe(1);
    const status = await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);
    expect(status.submission).toBe('answered');
  }, 120_000);

  test('a chat answer cut off by SIGKILL: chat() yields a rewind, then the whole answer; applied, the text holds it once', async () => {
    for (const w of workers) await killWorkerProcess(w);
    workers.push(await spawnWorkerProcess({ taskQueue: h.taskQueue, fakeLlmUrl: h.llm.url }));
    const agentId = await h.createAgent();
    const conv = new ConversationClient(h.client, { connectionString: h.db.url });
    const events: ChatEvent[] = [];
    let text = '';
    let killed = false;
    for await (const e of conv.chat(agentId, 'tell me a long story', { from: { type: 'human', id: 'ann' } })) {
      events.push(e);
      // What a terminal does: append deltas, erase what a rewind supersedes.
      if (e.type === 'delta') text += e.text;
      if (e.type === 'rewind') text = text.slice(0, text.length - e.chars);
      // One kill: the retry's rewind can arrive in the same write as its first text, while the count of
      // deltas still reads the same, and a second kill would cut the retry off as well.
      if (!killed && events.filter((x) => x.type === 'delta').length === DELTAS_BEFORE_KILL) {
        killed = true;
        await killWorkerProcess(workers.at(-1)!);
        workers.push(await spawnWorkerProcess({ taskQueue: h.taskQueue, fakeLlmUrl: h.llm.url }));
      }
    }
    const rewinds = events.filter((e): e is Extract<ChatEvent, { type: 'rewind' }> => e.type === 'rewind');
    expect(rewinds).toHaveLength(1);
    expect(rewinds[0]!.chars).toBeGreaterThan(0);
    expect(events.at(-1)).toMatchObject({ type: 'end', stoppedBy: 'answer' });
    expect(text).toBe(ANSWER);
    await h.temporal.workflow.getHandle(agentWorkflowId(agentId)).terminate('test finished');
  }, 120_000);
});
