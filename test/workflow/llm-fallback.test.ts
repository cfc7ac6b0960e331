import { CIRCUIT_OPEN_AFTER_FAILURES } from '../../activities/llm/circuit-breaker';
import type { ProviderConfig } from '../../activities/llm/types';
import { useHarness, submitTurn, toolTurn } from '../support/harness';

describe('circuit breaker and fallback across providers (seed D1 F7, F9)', () => {
  const h = useHarness();
  beforeAll(async () => {
    // Both providers on the same fake server: Anthropic first, OpenAI as the fallback of every tier.
    const providers: ProviderConfig[] = [
      { name: 'anthropic', kind: 'anthropic', apiKey: 'test-key', baseURL: h.llm.url },
      { name: 'openai', kind: 'openai', apiKey: 'test-key', baseURL: `${h.llm.url}/v1` },
    ];
    await h.startWorker(providers);
  });

  test('a primary failing twice trips its breaker: each failure falls back at once, and the next call goes straight to the fallback', async () => {
    expect(CIRCUIT_OPEN_AFTER_FAILURES).toBe(2);
    h.llm.enqueue(
      { kind: 'error', status: 500, message: 'primary down (1)' },
      toolTurn('file_write', { path: 'a.md', content: 'a' }),
      { kind: 'error', status: 503, message: 'primary down (2)' },
      toolTurn('file_write', { path: 'b.md', content: 'b' }),
      submitTurn('done on the fallback'),
    );
    const agentId = await h.createAgent();
    const { taskId } = await h.client.startTask({ agentId, title: 'Fallback', description: 'Write a.md and b.md' });
    const status = await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(status.submission).toBe('done on the fallback');

    // Call 1: anthropic fails → openai answers. Call 2: the same; the second consecutive failure opens
    // anthropic's circuit. Call 3: anthropic is skipped without a request.
    expect(h.llm.requests.map((r) => r.protocol)).toEqual(['anthropic', 'openai', 'anthropic', 'openai', 'openai']);
    expect(h.llm.requests.map((r) => r.body.model)).toEqual([
      'claude-sonnet-5-5',
      'gpt-5.4',
      'claude-sonnet-5-5',
      'gpt-5.4',
      'gpt-5.4',
    ]);

    // Each call is recorded once, with the provider and model that answered.
    const calls = await h.db.db
      .selectFrom('llm_calls')
      .select(['provider', 'model', 'agent_id'])
      .where('task_id', '=', taskId)
      .orderBy('id')
      .execute();
    expect(calls).toEqual(
      Array.from({ length: 3 }, () => ({ provider: 'openai', model: 'gpt-5.4', agent_id: agentId })),
    );
    // The conversation carried over: the fallback saw the first tool's result in OpenAI's format.
    expect(JSON.stringify(h.llm.requests[3]!.body)).toContain('"role":"tool"');
  });
});
