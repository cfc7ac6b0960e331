import { createHarness, type Harness } from '../support/harness';

describe('cancellation', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness();
    await h.startWorker();
  });
  afterAll(async () => h.close());

  test('handle.cancel() during a streaming LLM call stops the stream and leaves the task cancelled within 5 s', async () => {
    h.llm.enqueue({ kind: 'hang' });
    const agentId = await h.createAgent();
    const { taskId, handle } = await h.client.startTask({ agentId, title: 'Long think', description: 'never finishes' });
    const deadline = Date.now() + 20_000;
    while (h.llm.requests.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(h.llm.requests).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 500));

    const cancelledAt = Date.now();
    await handle.cancel();
    await h.llm.waitForAbortedRequests(1, 5_000);
    const streamStoppedMs = Date.now() - cancelledAt;
    for (;;) {
      const row = await h.client.getTaskRow(taskId);
      if (row.state === 'cancelled') break;
      if (Date.now() - cancelledAt > 5_000) throw new Error(`task still ${row.state} 5 s after cancel`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const cancelledMs = Date.now() - cancelledAt;
    expect(streamStoppedMs).toBeLessThan(5_000);
    expect(cancelledMs).toBeLessThan(5_000);
    const description = await handle.describe();
    expect(description.status.name).toBe('CANCELLED');
    expect(description.searchAttributes.TaskState).toEqual(['cancelled']);
  });
});
