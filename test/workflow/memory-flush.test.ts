import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { compactionIsNear, MEMORY_FLUSH_LEAD_MESSAGES, MEMORY_FLUSH_MESSAGE_KEY } from '../../activities/memory/flush';
import { STAGE1_TRIGGER_MESSAGES, SUMMARY_MESSAGE_PREFIX } from '../../activities/context/limits';
import { MEMORY_FLUSH_MIN_MESSAGES } from '../../workflows/rules/memory-limits';
import { submitTurn, toolTurn } from '../support/harness';
import { bodyText, useScriptedHarness } from './task-support';

const FLUSH_MARKER = '[MEMORY FLUSH — System Request]';

/**
 * Memory flush before compaction, on the real Temporal server and PostgreSQL with
 * the fake provider: a long task is asked once, before compression folds any message, to save what
 * matters; its memory_save lands in memory; the request is never repeated.
 */
describe('memory flush before compaction', () => {
  const { h, agents } = useScriptedHarness();
  beforeAll(() => {
    writeFileSync(path.join(h.workspaceDir, 'notes.txt'), 'the build needs node 24');
  });

  test('a long task is asked once to save memory, before any message is folded, and saves it', async () => {
    const agentId = await h.createAgent();
    let flushedAt = -1;
    const taskId = agents.task(({ text, index }) => {
      if (flushedAt < 0 && text.includes(FLUSH_MARKER)) {
        flushedAt = index;
        return toolTurn('memory_save', { content: 'The build needs node 24.' });
      }
      if (flushedAt >= 0 && index > flushedAt + 1) return submitTurn('read the notes');
      return toolTurn('file_read', { path: 'notes.txt' });
    });
    await h.client.startTask({ agentId, taskId, title: 'Long read', description: 'Read the notes many times.' });
    await h.waitForStatus(taskId, (s) => s.state === 'review', 120_000);

    const requests = agents.requests(taskId);
    expect(flushedAt).toBeGreaterThan(0);
    // Not before the session is long and compaction near; then in every later request (it is history).
    expect(bodyText(requests[flushedAt - 1]!)).not.toContain(FLUSH_MARKER);
    const sessionId = `task_${taskId}_r1`;
    const stored = await h.db.db
      .selectFrom('messages')
      .select(['idem_key', 'id'])
      .where('session_id', '=', sessionId)
      .orderBy('id')
      .execute();
    const flushIndex = stored.findIndex((m) => m.idem_key === MEMORY_FLUSH_MESSAGE_KEY);
    expect(stored.filter((m) => m.idem_key === MEMORY_FLUSH_MESSAGE_KEY)).toHaveLength(1);
    expect(flushIndex).toBeGreaterThanOrEqual(
      Math.max(MEMORY_FLUSH_MIN_MESSAGES, STAGE1_TRIGGER_MESSAGES - MEMORY_FLUSH_LEAD_MESSAGES) - 1,
    );
    // The request that carried it still had every message verbatim: nothing was folded yet.
    const flushRequest = requests[flushedAt]!;
    expect(bodyText(flushRequest)).not.toContain(SUMMARY_MESSAGE_PREFIX);
    expect(bodyText(flushRequest).split('the build needs node 24').length - 1).toBe(flushedAt);
    expect(bodyText(flushRequest).split(FLUSH_MARKER)).toHaveLength(2);
    const saved = await h.db.db
      .selectFrom('memory_observations')
      .select('content')
      .where('agent_id', '=', agentId)
      .execute();
    expect(saved.map((o) => o.content)).toEqual(['The build needs node 24.']);
  }, 150_000);

  test('a short task is never asked', async () => {
    const agentId = await h.createAgent();
    const taskId = agents.task([toolTurn('file_read', { path: 'notes.txt' }), submitTurn('read')]);
    await h.client.startTask({ agentId, taskId, title: 'Short read', description: 'Read the notes once.' });
    await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);
    expect(agents.requests(taskId).some((r) => bodyText(r).includes(FLUSH_MARKER))).toBe(false);
  }, 60_000);

  test('compaction is near by count (before stage 1) or by size (75% of the budget)', () => {
    const near = STAGE1_TRIGGER_MESSAGES - MEMORY_FLUSH_LEAD_MESSAGES;
    expect(compactionIsNear({ messageCount: near - 1, messageTokens: 100, messageBudget: 1_000 })).toBe(false);
    expect(compactionIsNear({ messageCount: near, messageTokens: 100, messageBudget: 1_000 })).toBe(true);
    expect(compactionIsNear({ messageCount: 35, messageTokens: 749, messageBudget: 1_000 })).toBe(false);
    expect(compactionIsNear({ messageCount: 35, messageTokens: 750, messageBudget: 1_000 })).toBe(true);
    expect(compactionIsNear({ messageCount: 35, messageTokens: 750, messageBudget: 0 })).toBe(false);
  });
});
