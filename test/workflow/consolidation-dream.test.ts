import { randomUUID } from 'node:crypto';
import { saveObservation } from '../../activities/memory/store';
import type { RecordedRequest } from '../fake-llm';
import type { ConsolidationWorkflowResult } from '../../workflows/contract';
import { DREAM_MAX_ENTRIES } from '../../workflows/rules/memory-limits';
import { useHarness, textTurn } from '../support/harness';

const REPORT =
  'Today I finished the login fix and reviewed two pull requests. Nothing blocks me. Next I will start the billing export.';

/** memoryConsolidationWorkflow: daily report, then the dream's plan validated and applied (or not). */
describe('memory consolidation', () => {
  const h = useHarness({ worker: true });
  beforeEach(() => h.llm.reset());

  const isDream = (r: RecordedRequest) => JSON.stringify(r.body).includes('[MEMORY CONSOLIDATION — Dream Cycle]');
  /** Answers the daily report with REPORT and the dream with `plan`. */
  function respond(plan: string): void {
    h.llm.setResponder((r) => textTurn(isDream(r) ? plan : REPORT));
  }

  async function consolidate(agentId: string): Promise<ConsolidationWorkflowResult> {
    return h.temporal.workflow.execute('memoryConsolidationWorkflow', {
      workflowId: `consolidation-${agentId}-test-${randomUUID().slice(0, 8)}`,
      taskQueue: h.taskQueue,
      args: [{ agentId }],
    });
  }

  /** An agent with `n` observations obs_<agent>_0 … (0 is the oldest) and one knowledge section. */
  async function agentWithMemory(n: number): Promise<{ agentId: string; id: (i: number) => string }> {
    const agentId = await h.createAgent();
    const id = (i: number) => `obs_${agentId}_${i}`;
    for (let i = 0; i < n; i++) {
      await saveObservation(h.db.db, agentId, {
        id: id(i),
        type: i % 2 ? 'fact' : 'note',
        tags: i < 10 ? ['domain:deploy'] : [],
        content: `observation number ${i}`,
      });
    }
    await h.db.db
      .insertInto('memory_knowledge')
      .values({ agent_id: agentId, title: 'Deploys', content: 'Deploy on weekdays only.' })
      .execute();
    return { agentId, id };
  }

  async function snapshot(agentId: string) {
    const observations = await h.db.db
      .selectFrom('memory_observations')
      .select(['id', 'content', 'tags', 'type'])
      .where('agent_id', '=', agentId)
      .orderBy('id')
      .execute();
    const knowledge = await h.db.db
      .selectFrom('memory_knowledge')
      .select(['title', 'content'])
      .where('agent_id', '=', agentId)
      .orderBy('title')
      .execute();
    return { observations, knowledge };
  }

  test('writes the daily report, then applies a valid plan exactly, in one go', async () => {
    const { agentId, id } = await agentWithMemory(60);
    const plan = {
      remove: [id(20), id(21)],
      merge: [
        { removeIds: [id(30), id(31)], mergedContent: 'observations 30 and 31 say the same thing', tags: ['merged'] },
      ],
      promote: [
        { sourceIds: [id(0), id(2), id(4)], section: 'Deploys', content: 'Always run the smoke test after a deploy.' },
      ],
    };
    respond(`Here is the plan:\n${JSON.stringify(plan)}`);
    const result = await consolidate(agentId);
    expect(result).toEqual({ agentId, dailyReport: 'written', dream: 'applied', removed: 2, merged: 1, promoted: 1 });

    // Daily report: one tool-less call, its text in today's log.
    const reportRequest = h.llm.requests.find((r) => !isDream(r))!;
    expect(JSON.stringify(reportRequest.body)).toContain('[DAILY REPORT REQUEST]');
    expect(JSON.stringify(reportRequest.body)).toContain('3-5 sentences');
    expect(reportRequest.body.tools ?? []).toEqual([]);
    const log = await h.db.db
      .selectFrom('memory_daily_logs')
      .selectAll()
      .where('agent_id', '=', agentId)
      .executeTakeFirstOrThrow();
    expect(log.kind).toBe('daily-report');
    expect(log.content).toContain(REPORT);

    // Dream: tool-less, shown the entries as id|timestamp|type|tags|content.
    const dreamRequest = h.llm.requests.find(isDream)!;
    expect(dreamRequest.body.tools ?? []).toEqual([]);
    expect(JSON.stringify(dreamRequest.body)).toContain(`${id(59)}|`);

    const after = await snapshot(agentId);
    const ids = after.observations.map((o) => o.id);
    expect(after.observations).toHaveLength(60 - 2 - 2 + 1 - 3);
    for (const gone of [20, 21, 30, 31, 0, 2, 4]) expect(ids).not.toContain(id(gone));
    const merged = after.observations.filter((o) => o.content === 'observations 30 and 31 say the same thing');
    expect(merged).toHaveLength(1);
    expect(merged[0]).toMatchObject({ tags: ['merged'], type: 'note' });
    expect(after.knowledge).toEqual([
      { title: 'Deploys', content: 'Deploy on weekdays only.\n\nAlways run the smoke test after a deploy.' },
    ]);
    const record = await h.db.db
      .selectFrom('memory_consolidations')
      .selectAll()
      .where('agent_id', '=', agentId)
      .executeTakeFirstOrThrow();
    expect(record).toMatchObject({ status: 'applied', removed: 2, merged: 1, promoted: 1, entries_offered: 60 });

    // Once a day: a second run the same day neither reports nor dreams again.
    const requestsSoFar = h.llm.requests.length;
    expect(await consolidate(agentId)).toMatchObject({ dailyReport: 'exists', dream: 'already-ran' });
    expect(h.llm.requests).toHaveLength(requestsSoFar);
  });

  test.each([
    ['a malformed plan', () => '{"remove": ["obs_1", }', /not valid JSON/],
    [
      '60 removals',
      (id: (i: number) => string) => JSON.stringify({ remove: Array.from({ length: 60 }, (_, i) => id(i)) }),
      /60 removals exceed the cap of 50/,
    ],
    ['an id it was not shown', () => JSON.stringify({ remove: ['obs_made_up'] }), /unknown entry id/],
    [
      'a promotion from two entries',
      (id: (i: number) => string) =>
        JSON.stringify({ promote: [{ sourceIds: [id(1), id(3)], section: 'X', content: 'y' }] }),
      /at least 3/,
    ],
    [
      'a promotion that would overflow the knowledge section',
      (id: (i: number) => string) =>
        JSON.stringify({
          remove: [id(9)],
          promote: [{ sourceIds: [id(1), id(3), id(5)], section: 'Deploys', content: 'z'.repeat(2_990) }],
        }),
      /at most 3000/,
    ],
  ])('%s changes nothing and is recorded', async (_name, plan, reason) => {
    const { agentId, id } = await agentWithMemory(60);
    const before = await snapshot(agentId);
    respond(plan(id));
    const result = await consolidate(agentId);
    expect(result).toMatchObject({ dailyReport: 'written', dream: 'rejected', removed: 0, merged: 0, promoted: 0 });
    expect(result.reason).toMatch(reason);
    expect(await snapshot(agentId)).toEqual(before);
    const record = await h.db.db
      .selectFrom('memory_consolidations')
      .selectAll()
      .where('agent_id', '=', agentId)
      .executeTakeFirstOrThrow();
    expect(record.status).toBe('rejected');
    expect(record.reason).toMatch(reason);
    expect(JSON.stringify(record.plan)).toContain('raw');
  });

  test('no dream below 50 observations; the prompt shows at most the 200 most recent', async () => {
    const few = await agentWithMemory(49);
    respond('{}');
    expect(await consolidate(few.agentId)).toMatchObject({ dailyReport: 'written', dream: 'too-few' });
    expect(h.llm.requests.some(isDream)).toBe(false);

    h.llm.reset();
    const many = await agentWithMemory(DREAM_MAX_ENTRIES + 20);
    respond('{"remove": []}');
    expect(await consolidate(many.agentId)).toMatchObject({ dream: 'applied', removed: 0 });
    const prompt = JSON.stringify(h.llm.requests.find(isDream)!.body);
    expect(prompt).toContain(`${many.id(DREAM_MAX_ENTRIES + 19)}|`);
    expect(prompt).toContain(`${many.id(20)}|`);
    expect(prompt).not.toContain(`${many.id(19)}|`);
    expect(prompt).toContain(`(${DREAM_MAX_ENTRIES} most recent of ${DREAM_MAX_ENTRIES + 20})`);
  });
});
