import { DEFAULT_ORG } from '../../activities/store/tenancy';
import { randomUUID } from 'node:crypto';
import { countObservations, saveObservation, upsertNotebookEntry } from '../../activities/memory/store';
import { appendMessage, ensureSession } from '../../activities/store/sessions';
import { assistantMessageKey, executeToolCall, type ExecuteToolResult } from '../../activities/tools/execute';
import { toolsForScenario } from '../../activities/tools/registry';
import {
  KNOWLEDGE_PROMPT_MAX_CHARS,
  KNOWLEDGE_SECTION_MAX_CHARS,
  NOTEBOOK_MAX_AGENT_ENTRIES,
  NOTEBOOK_MAX_CHARS_PER_ENTRY,
  OBSERVATIONS_MAX,
} from '../../workflows/rules/memory-limits';
import { useHarness } from '../support/harness';
import { loadMemoryForPrompt } from '../../activities/memory/knowledge-store';

/**
 * Every memory limit, enforced by the real tools through the real tool ledger (`executeToolCall`)
 * against the real database: the call is written as an assistant message, as the LLM step would.
 */
describe('memory limits', () => {
  const h = useHarness();

  let turn = 0;
  /** Writes the call as the LLM step would (an assistant message), then runs it through the ledger. */
  async function call(
    agentId: string,
    name: string,
    input: unknown,
    sessionId = `s-${randomUUID()}`,
  ): Promise<{ result: ExecuteToolResult; text: string; isError: boolean }> {
    const db = h.db.db;
    const toolCallId = `call_${randomUUID().slice(0, 8)}`;
    turn += 1;
    await ensureSession(db, { id: sessionId, agentId, kind: 'chat' });
    await appendMessage(db, sessionId, assistantMessageKey(1, turn), {
      role: 'assistant',
      content: [{ type: 'tool_use', id: toolCallId, name, input }],
    });
    const result = await executeToolCall(
      { agentId, sessionId, attempt: 1, turn, toolCallId },
      toolsForScenario('chat'),
      {
        db,
        agentId,
        sessionId,
        workspaceDir: h.workspaceDir,
        signal: new AbortController().signal,
        agentConfig: {},
        org: DEFAULT_ORG,
        heartbeat: () => undefined,
      },
    );
    const row = await db
      .selectFrom('tool_calls')
      .select(['result', 'is_error'])
      .where('session_id', '=', sessionId)
      .where('tool_call_id', '=', toolCallId)
      .executeTakeFirstOrThrow();
    return { result, text: row.result ?? '', isError: row.is_error };
  }

  async function notebookKeys(agentId: string): Promise<string[]> {
    const rows = await h.db.db
      .selectFrom('memory_notebook')
      .select('key')
      .where('agent_id', '=', agentId)
      .where('tag', '=', 'agent')
      .orderBy('key')
      .execute();
    return rows.map((r) => r.key);
  }

  test('notebook: at most 15 agent entries (least recently updated evicted), 6,000 characters each', async () => {
    const agentId = await h.createAgent();
    for (let i = 0; i < NOTEBOOK_MAX_AGENT_ENTRIES; i++) {
      expect(
        (await call(agentId, 'update_notebook', { key: `k${String(i).padStart(2, '0')}`, content: `note ${i}` }))
          .isError,
      ).toBe(false);
    }
    // Touch k00 so k01 becomes the oldest, then add a 16th entry.
    await call(agentId, 'update_notebook', { key: 'k00', content: 'refreshed' });
    const sixteenth = await call(agentId, 'update_notebook', { key: 'k15', content: 'one too many' });
    expect(sixteenth.text).toContain('evicted the oldest: k01');
    const keys = await notebookKeys(agentId);
    expect(keys).toHaveLength(NOTEBOOK_MAX_AGENT_ENTRIES);
    expect(keys).not.toContain('k01');
    expect(keys).toContain('k00');

    const tooLong = await call(agentId, 'update_notebook', {
      key: 'essay',
      content: 'x'.repeat(NOTEBOOK_MAX_CHARS_PER_ENTRY + 1),
    });
    expect(tooLong.isError).toBe(true);
    expect(tooLong.text).toMatch(/6000/);
    expect(await notebookKeys(agentId)).not.toContain('essay');
    expect(
      (await call(agentId, 'update_notebook', { key: 'exact', content: 'x'.repeat(NOTEBOOK_MAX_CHARS_PER_ENTRY) }))
        .isError,
    ).toBe(false);
  });

  test('notebook: runtime entries are unbounded, not evicted, not cleared and not overwritten by the agent', async () => {
    const agentId = await h.createAgent();
    await upsertNotebookEntry(h.db.db, agentId, {
      key: 'relevant-context',
      content: 'r'.repeat(NOTEBOOK_MAX_CHARS_PER_ENTRY * 2),
      tag: 'system',
    });
    await upsertNotebookEntry(h.db.db, agentId, { key: 'cognitive-context', content: 'c', tag: 'cpp' });
    for (let i = 0; i < NOTEBOOK_MAX_AGENT_ENTRIES + 2; i++)
      await call(agentId, 'update_working_memory', { key: `k${i}`, content: 'n' });
    const overwrite = await call(agentId, 'update_notebook', { key: 'relevant-context', content: 'mine now' });
    expect(overwrite.isError).toBe(true);
    expect(overwrite.text).toContain('managed by the system runtime');

    expect((await call(agentId, 'clear_notebook', { key: 'k16' })).text).toContain('k16');
    expect((await call(agentId, 'clear_notebook', { key: 'nope' })).isError).toBe(true);
    await call(agentId, 'clear_working_memory', {});
    const left = await h.db.db
      .selectFrom('memory_notebook')
      .select(['key', 'tag', 'content'])
      .where('agent_id', '=', agentId)
      .orderBy('key')
      .execute();
    expect(left.map((r) => [r.key, r.tag])).toEqual([
      ['cognitive-context', 'cpp'],
      ['relevant-context', 'system'],
    ]);
    expect(left[1]!.content).toHaveLength(NOTEBOOK_MAX_CHARS_PER_ENTRY * 2);
  });

  test('observations: at most 500, the oldest trimmed; never injected into prompts', async () => {
    const agentId = await h.createAgent();
    for (let i = 0; i < OBSERVATIONS_MAX - 1; i++)
      await saveObservation(h.db.db, agentId, {
        id: `obs_seed_${agentId}_${i}`,
        type: 'fact',
        content: `seed fact ${i}`,
      });
    expect(
      (await call(agentId, 'memory_save', { content: 'the 500th', type: 'insight', tags: ['insight'] })).text,
    ).toMatch(/^Saved observation obs_/);
    expect(await countObservations(h.db.db, agentId)).toBe(OBSERVATIONS_MAX);
    const more = await call(agentId, 'memory_save', { content: 'the 501st' });
    expect(more.text).toContain('trimmed the 1 oldest');
    await call(agentId, 'memory_save', { content: 'the 502nd' });
    expect(await countObservations(h.db.db, agentId)).toBe(OBSERVATIONS_MAX);
    const oldest = await h.db.db
      .selectFrom('memory_observations')
      .select('id')
      .where('agent_id', '=', agentId)
      .where('id', 'in', [`obs_seed_${agentId}_0`, `obs_seed_${agentId}_1`, `obs_seed_${agentId}_2`])
      .execute();
    expect(oldest.map((r) => r.id)).toEqual([`obs_seed_${agentId}_2`]);

    const prompt = await loadMemoryForPrompt(h.db.db, agentId);
    expect(JSON.stringify(prompt)).not.toContain('seed fact');
    expect(prompt.knowledge).toEqual([]);
  });

  test('knowledge: 3,000 characters per section, 15,000 in all, 8,000 injected', async () => {
    const agentId = await h.createAgent();
    const tooBig = await call(agentId, 'memory_update', {
      mode: 'replace',
      section: 'Huge',
      content: 'x'.repeat(KNOWLEDGE_SECTION_MAX_CHARS + 1),
    });
    expect(tooBig.isError).toBe(true);
    for (let i = 0; i < 5; i++) {
      const r = await call(agentId, 'memory_update', {
        mode: 'replace',
        section: `Section ${i}`,
        content: `${i}`.repeat(KNOWLEDGE_SECTION_MAX_CHARS),
      });
      expect(r.isError).toBe(false);
    }
    const overTotal = await call(agentId, 'memory_update_longterm', {
      mode: 'replace',
      section: 'One more',
      content: 'y',
    });
    expect(overTotal.isError).toBe(true);
    expect(overTotal.text).toMatch(/total 15001 characters; the limit is 15000/);
    // Replacing a section counts its new size, not old + new.
    expect(
      (await call(agentId, 'memory_update', { mode: 'replace', section: 'Section 4', content: 'short' })).isError,
    ).toBe(false);
    expect(
      (
        await call(agentId, 'memory_update', {
          mode: 'patch',
          section: 'Section 4',
          old_text: 'short',
          new_text: 'longer text',
        })
      ).isError,
    ).toBe(false);
    const growPast = await call(agentId, 'memory_update', {
      mode: 'patch',
      section: 'Section 3',
      old_text: '333',
      new_text: '3333',
    });
    expect(growPast.isError).toBe(true);
    expect(
      (await call(agentId, 'memory_update', { mode: 'patch', section: 'Section 4', old_text: 'absent', new_text: 'x' }))
        .isError,
    ).toBe(true);

    const { knowledge } = await loadMemoryForPrompt(h.db.db, agentId);
    const injected = knowledge.reduce((n, s) => n + s.title.length + s.content.length, 0);
    expect(injected).toBeLessThanOrEqual(KNOWLEDGE_PROMPT_MAX_CHARS);
    expect(knowledge.map((s) => s.title)).toEqual(['Section 0', 'Section 1', 'Section 2']);
    const section4 = await h.db.db
      .selectFrom('memory_knowledge')
      .select('content')
      .where('agent_id', '=', agentId)
      .where('title', '=', 'Section 4')
      .executeTakeFirstOrThrow();
    expect(section4.content).toBe('longer text');

    expect((await call(agentId, 'memory_update', { mode: 'delete', section: 'Section 0' })).isError).toBe(false);
    expect((await loadMemoryForPrompt(h.db.db, agentId)).knowledge[0]!.title).toBe('Section 1');
  });

  test('search: full text with stemming, tags, knowledge, recent list; delete by id; legacy aliases', async () => {
    const agentId = await h.createAgent();
    const saved = await call(agentId, 'memory_save', {
      content: 'Deployments to staging need the VPN to be connected first',
      type: 'fact',
      tags: ['domain:infra'],
    });
    const id = saved.text.match(/obs_[0-9a-f]+/)![0];
    await call(agentId, 'memory_save', {
      content: 'The billing service owner is Dana',
      type: 'fact',
      tags: ['domain:billing'],
    });
    await call(agentId, 'memory_update', {
      mode: 'replace',
      section: 'Release procedure',
      content: 'Tag the release, then deploy to staging.',
    });

    const stemmed = await call(agentId, 'memory_search', { query: 'deploying staging' });
    expect(stemmed.text).toContain(id);
    expect(stemmed.text).toContain('[knowledge § Release procedure]');
    expect(stemmed.text).not.toContain('Dana');
    expect((await call(agentId, 'memory_search', { query: 'domain:billing' })).text).toContain('Dana');
    expect((await call(agentId, 'memory_search_longterm', { query: 'release', scope: 'knowledge' })).text).toContain(
      'Release procedure',
    );
    expect((await call(agentId, 'memory_search', { query: 'kubernetes' })).text).toBe(
      'No memory entries for "kubernetes".',
    );

    const recent = await call(agentId, 'memory_search', { query: '' });
    expect(recent.text.indexOf('Dana')).toBeLessThan(recent.text.indexOf(id));
    expect((await call(agentId, 'memory_list', { limit: 1 })).text).toContain('Dana');

    expect((await call(agentId, 'memory_delete', { ids: [id] })).text).toContain(`Deleted 1 observation(s): ${id}`);
    expect((await call(agentId, 'memory_update', { mode: 'delete', ids: [id] })).isError).toBe(true);
    expect(await countObservations(h.db.db, agentId)).toBe(1);

    // Another agent's memory is invisible.
    const other = await h.createAgent();
    expect((await call(other, 'memory_search', { query: 'Dana' })).text).toMatch(/^No memory entries/);
  });

  test('arguments are validated before anything is written', async () => {
    const agentId = await h.createAgent();
    const bad = await call(agentId, 'memory_save', { content: 'x', type: 'gossip' });
    expect(bad.isError).toBe(true);
    expect(bad.text).toContain('Invalid arguments for memory_save');
    const extra = await call(agentId, 'update_notebook', { key: 'k', content: 'c', tag: 'system' });
    expect(extra.isError).toBe(true);
    expect(await countObservations(h.db.db, agentId)).toBe(0);
    expect(await notebookKeys(agentId)).toEqual([]);
  });
});
