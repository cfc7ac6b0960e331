import { randomUUID } from 'node:crypto';
import { roundSessionId, roundWorkflowId } from '../../workflows/contract';
import { appendMessage, ensureSession } from '../../activities/store/sessions';
import { assistantMessageKey } from '../../activities/tools/execute';
import { toolResultKey } from '../../activities/tools/ledger-writes';
import { auxiliaryCallKey } from '../../activities/llm/usage';
import { recordedRoundProgress } from '../../activities/store/round-progress';
import { eventually } from '../support/eventually';
import { useHarness, submitTurn, toolTurn } from '../support/harness';
import { historiesOfAllRuns, stepSummaries } from './task-support';

/** Quick tool iterations before the slow one. */
const QUICK = 5;

/**
 * A round in a chain of local steps holds its workflow task open, and a query waits for it; the status
 * reads what the steps recorded instead of waiting for the chain.
 */
describe('status while a round runs local steps', () => {
  const h = useHarness({ worker: true });

  test("getStatus during a chain of local steps answers from the steps' rows: the iteration and usage they recorded", async () => {
    const slow = { ...toolTurn('file_write', { path: 'steps/slow.txt', content: 'slow' }), chunkDelayMs: 300 };
    h.llm.enqueue(
      ...Array.from({ length: QUICK }, (_, i) => toolTurn('file_write', { path: `steps/${i}.txt`, content: `${i}` })),
      slow,
      submitTurn('wrote them'),
    );
    const agentId = await h.createAgent();
    const before = h.llm.requests.length;
    const { taskId } = await h.client.startTask({ agentId, title: 'Steps', description: 'Write, then submit.' });
    // The slow step has been asked for: the quick ones before it are done and their rows written.
    await eventually(async () => h.llm.requests.length - before > QUICK, 'the slow step to start');
    const status = await h.client.getStatus(taskId);
    expect(status).toMatchObject({ state: 'in_progress', round: 1, iteration: QUICK, phase: 'thinking' });
    // toolTurn's usage: 100 in, 20 out, 50 cache reads, 10 cache writes per call.
    expect(status.usage).toMatchObject({
      inputTokens: 100 * QUICK,
      outputTokens: 20 * QUICK,
      cacheReadTokens: 50 * QUICK,
      cacheWriteTokens: 10 * QUICK,
    });

    await h.waitForStatus(taskId, (s) => s.state === 'review', 30_000);
    // The premise: the slow step ran locally after the quick ones, in the workflow task that ran them.
    const [round] = await historiesOfAllRuns(h.temporal.workflow.getHandle(roundWorkflowId(taskId, 1)));
    expect(stepSummaries(round!).map((s) => s.kind)).toEqual(['regular', ...Array(QUICK + 1).fill('local')]);
  }, 60_000);

  test("recorded progress counts the latest attempt's iterations whose every call has a result, and its calls' spend", async () => {
    const agentId = await h.createAgent();
    const sessionId = roundSessionId(`progress-${randomUUID()}`, 1);
    await ensureSession(h.db.db, { id: sessionId, agentId, kind: 'task' });
    expect(await recordedRoundProgress(h.db.db, sessionId)).toBeUndefined();

    const step = async (attempt: number, turn: number, calls: string[], answered: string[]) => {
      const key = assistantMessageKey(attempt, turn);
      await appendMessage(h.db.db, sessionId, key, {
        role: 'assistant',
        content: [
          { type: 'text', text: 'working' },
          ...calls.map((id) => ({ type: 'tool_use' as const, id, name: 'file_write', input: {} })),
        ],
      });
      for (const id of answered)
        await appendMessage(h.db.db, sessionId, toolResultKey(id), {
          role: 'user',
          content: [{ type: 'tool_result', toolUseId: id, content: 'ok' }],
        });
      for (const idemKey of [key, auxiliaryCallKey(key, 'summary')])
        await h.db.db
          .insertInto('llm_calls')
          .values({
            agent_id: agentId,
            session_id: sessionId,
            idem_key: idemKey,
            provider: 'anthropic',
            model: 'fake',
            input_tokens: attempt * 1000 + turn,
            output_tokens: 1,
            cache_read_tokens: 2,
            cache_write_tokens: 3,
            cost_usd: '0.5',
            duration_ms: 1,
          })
          .execute();
    };
    // Attempt 1: two finished iterations. Attempt 2: a finished one (two calls), one with a call still
    // running, and a turn without calls.
    await step(1, 0, ['a1'], ['a1']);
    await step(1, 1, ['a2'], ['a2']);
    await step(2, 0, ['b1', 'b2'], ['b1', 'b2']);
    await step(2, 1, ['c1', 'c2'], ['c1']);
    await step(2, 2, [], []);

    const recorded = await recordedRoundProgress(h.db.db, sessionId);
    expect(recorded).toEqual({
      attempt: 2,
      iteration: 1,
      usage: {
        inputTokens: 2 * (2000 + 2001 + 2002),
        outputTokens: 6,
        cacheReadTokens: 12,
        cacheWriteTokens: 18,
        costUsd: 3,
      },
    });
    // The call's result lands: its iteration counts.
    await appendMessage(h.db.db, sessionId, toolResultKey('c2'), {
      role: 'user',
      content: [{ type: 'tool_result', toolUseId: 'c2', content: 'ok' }],
    });
    expect((await recordedRoundProgress(h.db.db, sessionId))?.iteration).toBe(2);
  });
});
