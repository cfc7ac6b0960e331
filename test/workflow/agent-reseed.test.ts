import { DEFAULT_ORG } from '../../activities/store/tenancy';
import { randomUUID } from 'node:crypto';
import type { AgentDefinition } from '../../activities/store/agents';
import { appendMessage, ensureSession } from '../../activities/store/sessions';
import { assistantMessageKey, executeToolCall } from '../../activities/tools/execute';
import { toolsForScenario } from '../../activities/tools/registry';
import { useHarness } from '../support/harness';

/**
 * "The folder seeds an agent once; later edits win unless forced": a re-upsert (what `npm start` and
 * `agent upsert` do) keeps identity files the agent rewrote with edit_agent_file, still applies the
 * rest of the definition, and overwrites them only when forced. The content hash (the etag) says which
 * files are current.
 */
describe('re-upserting an agent keeps its self-edits', () => {
  const h = useHarness();

  async function selfEdit(agentId: string, input: Record<string, unknown>): Promise<void> {
    const db = h.db.db;
    const runId = `run-${randomUUID()}`;
    const toolCallId = `call_${randomUUID().slice(0, 8)}`;
    await ensureSession(db, { id: runId, agentId, kind: 'heartbeat' });
    await appendMessage(db, runId, assistantMessageKey(1, 0), {
      role: 'assistant',
      content: [{ type: 'tool_use', id: toolCallId, name: 'edit_agent_file', input }],
    });
    const result = await executeToolCall(
      { agentId, sessionId: runId, attempt: 1, turn: 0, toolCallId },
      toolsForScenario('heartbeat'),
      {
        db,
        agentId,
        sessionId: runId,
        workspaceDir: h.workspaceDir,
        signal: new AbortController().signal,
        agentConfig: {},
        org: DEFAULT_ORG,
        heartbeat: () => undefined,
      },
    );
    expect(result).toMatchObject({ kind: 'done', isError: false });
  }

  test('self-edited files survive a re-upsert, the rest of the definition applies, and force overwrites', async () => {
    const id = `agent-${randomUUID().slice(0, 8)}`;
    const definition: AgentDefinition = {
      id,
      name: 'Scribe',
      files: { soul: 'You write clearly.', agents: 'You keep the changelog.', heartbeat: '- check tasks', tools: '' },
      config: { canEditOwnFiles: true },
      workspaceDir: h.workspaceDir,
    };
    const seeded = await h.client.upsertAgent(definition);
    // Before any self-edit the folder wins: a changed folder file is applied.
    const refolded = await h.client.upsertAgent({
      ...definition,
      files: { ...definition.files, agents: 'You keep the changelog and the release notes.' },
    });
    expect(refolded.contentHash).not.toBe(seeded.contentHash);

    await selfEdit(id, {
      name: 'SOUL.md',
      body: 'You write clearly and cite your sources.',
      etag: refolded.contentHash,
    });
    const edited = await h.db.db.selectFrom('agents').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

    const again = await h.client.upsertAgent({
      ...definition,
      name: 'Scribe v2',
      config: { canEditOwnFiles: true, timezone: 'Europe/Berlin' },
    });
    expect(again.contentHash).toBe(edited.content_hash);
    const kept = await h.db.db.selectFrom('agents').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    expect(kept.soul_md).toBe('You write clearly and cite your sources.');
    expect(kept.agents_md).toBe('You keep the changelog and the release notes.');
    expect([kept.name, kept.config]).toEqual(['Scribe v2', { canEditOwnFiles: true, timezone: 'Europe/Berlin' }]);

    const forced = await h.client.upsertAgent(definition, { force: true });
    const overwritten = await h.db.db.selectFrom('agents').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    expect([overwritten.soul_md, overwritten.agents_md, forced.contentHash]).toEqual([
      'You write clearly.',
      'You keep the changelog.',
      seeded.contentHash,
    ]);
    // After a forced upsert the folder is current again: the next plain re-upsert follows the folder.
    const next = await h.client.upsertAgent({
      ...definition,
      files: { ...definition.files, soul: 'You write tersely.' },
    });
    expect(next.contentHash).not.toBe(seeded.contentHash);
    expect(
      (await h.db.db.selectFrom('agents').select('soul_md').where('id', '=', id).executeTakeFirstOrThrow()).soul_md,
    ).toBe('You write tersely.');
  });
});
