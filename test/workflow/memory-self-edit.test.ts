import { DEFAULT_ORG } from '../../activities/store/tenancy';
import { randomUUID } from 'node:crypto';
import { AGENT_FILE_DIFF_MAX_BYTES, AGENT_FILE_MAX_BYTES } from '../../activities/memory/self-edit';
import { identityContentHash } from '../../activities/store/agents';
import { appendMessage, ensureSession } from '../../activities/store/sessions';
import { assistantMessageKey, executeToolCall } from '../../activities/tools/execute';
import { toolsForScenario } from '../../activities/tools/registry';
import { useHarness } from '../support/harness';

/**
 * The self-editing rules, each fed a call it must refuse, then checked for the harmful side
 * effect not having happened (the agent row and its content hash unchanged, no audit row).
 */
describe('edit_agent_file', () => {
  const h = useHarness();

  let turn = 0;
  async function edit(
    agentId: string,
    input: Record<string, unknown>,
    runId = `run-${randomUUID()}`,
  ): Promise<{ text: string; isError: boolean }> {
    const db = h.db.db;
    const toolCallId = `call_${randomUUID().slice(0, 8)}`;
    turn += 1;
    await ensureSession(db, { id: runId, agentId, kind: 'heartbeat' });
    await appendMessage(db, runId, assistantMessageKey(1, turn), {
      role: 'assistant',
      content: [{ type: 'tool_use', id: toolCallId, name: 'edit_agent_file', input }],
    });
    await executeToolCall({ agentId, sessionId: runId, attempt: 1, turn, toolCallId }, toolsForScenario('heartbeat'), {
      db,
      agentId,
      sessionId: runId,
      workspaceDir: h.workspaceDir,
      signal: new AbortController().signal,
      agentConfig: {},
      org: DEFAULT_ORG,
      heartbeat: () => undefined,
    });
    const row = await db
      .selectFrom('tool_calls')
      .select(['result', 'is_error'])
      .where('session_id', '=', runId)
      .where('tool_call_id', '=', toolCallId)
      .executeTakeFirstOrThrow();
    return { text: row.result ?? '', isError: row.is_error };
  }

  async function agentRow(agentId: string) {
    return h.db.db.selectFrom('agents').selectAll().where('id', '=', agentId).executeTakeFirstOrThrow();
  }

  async function expectUnchanged(agentId: string, before: Awaited<ReturnType<typeof agentRow>>): Promise<void> {
    const after = await agentRow(agentId);
    expect(after.content_hash).toBe(before.content_hash);
    expect([after.soul_md, after.agents_md, after.heartbeat_md, after.tools_md]).toEqual([
      before.soul_md,
      before.agents_md,
      before.heartbeat_md,
      before.tools_md,
    ]);
    const edits = await h.db.db.selectFrom('agent_file_edits').select('id').where('agent_id', '=', agentId).execute();
    expect(edits).toHaveLength(0);
  }

  test('writes the file, updates the content hash and records the audit event with the diff', async () => {
    const agentId = await h.createAgent({ canEditOwnFiles: true });
    const before = await agentRow(agentId);
    const body = '- check tasks\n- review open pull requests every morning';
    const runId = `run-${randomUUID()}`;
    const result = await edit(agentId, { name: 'HEARTBEAT.md', body, etag: before.content_hash }, runId);
    expect(result.isError).toBe(false);
    const after = await agentRow(agentId);
    expect(after.heartbeat_md).toBe(body);
    expect(after.content_hash).toBe(
      identityContentHash({ soul: after.soul_md, agents: after.agents_md, heartbeat: body, tools: after.tools_md }),
    );
    expect(result.text).toContain(`New etag: ${after.content_hash}`);
    const audit = await h.db.db.selectFrom('agent_file_edits').selectAll().where('agent_id', '=', agentId).execute();
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({
      run_id: runId,
      file: 'HEARTBEAT.md',
      before_hash: before.content_hash,
      after_hash: after.content_hash,
    });
    expect(audit[0]!.diff).toContain('+- review open pull requests every morning');
  });

  test('refuses without the canEditOwnFiles permission', async () => {
    const agentId = await h.createAgent();
    const before = await agentRow(agentId);
    const result = await edit(agentId, { name: 'SOUL.md', body: 'I am someone else now.' });
    expect(result).toMatchObject({ isError: true, text: expect.stringContaining('permission') });
    await expectUnchanged(agentId, before);
  });

  test.each<[string, { name: string; body: string; agent_id?: string }, RegExp]>([
    ['a file outside the four identity files', { name: 'agent.yml', body: 'x' }, /not editable/],
    ['a path to another agent', { name: '../other-agent/SOUL.md', body: 'x' }, /not editable/],
    ['another agent by id', { name: 'SOUL.md', body: 'x', agent_id: 'someone-else' }, /only edit your own files/],
  ])('refuses %s', async (_name, input, message) => {
    const agentId = await h.createAgent({ canEditOwnFiles: true });
    const other = await h.createAgent({ canEditOwnFiles: true });
    const otherBefore = await agentRow(other);
    const before = await agentRow(agentId);
    const result = await edit(agentId, input.agent_id ? { ...input, agent_id: other } : input);
    expect(result.isError).toBe(true);
    expect(result.text).toMatch(message);
    await expectUnchanged(agentId, before);
    await expectUnchanged(other, otherBefore);
  });

  test.each([
    ['sk-', 'api key: sk-ant-api03-abcdefghijklmnopqrstuv'],
    ['xoxb-', 'slack: xoxb-123456789012-abcdefghij'],
    ['AKIA', 'aws: AKIAIOSFODNN7EXAMPLE'],
    ['ghp_', 'github: ghp_abcdefghijklmnopqrstuvwxyz0123456789'],
    ['glpat-', 'gitlab: glpat-abcdefghij0123456789'],
  ])('refuses a body with a %s credential', async (_prefix, secret) => {
    const agentId = await h.createAgent({ canEditOwnFiles: true });
    const before = await agentRow(agentId);
    const result = await edit(agentId, { name: 'TOOLS.md', body: `Use the deploy tool.\n${secret}\n` });
    expect(result).toMatchObject({ isError: true, text: expect.stringContaining('credential') });
    await expectUnchanged(agentId, before);
  });

  test('refuses a body over 64 KB and accepts one of exactly 64 KB', async () => {
    const agentId = await h.createAgent({ canEditOwnFiles: true });
    const before = await agentRow(agentId);
    const tooBig = await edit(agentId, { name: 'AGENTS.md', body: 'a'.repeat(AGENT_FILE_MAX_BYTES + 1) });
    expect(tooBig).toMatchObject({ isError: true, text: expect.stringContaining('65537 bytes') });
    await expectUnchanged(agentId, before);
    const exact = await edit(agentId, { name: 'AGENTS.md', body: 'a'.repeat(AGENT_FILE_MAX_BYTES) });
    expect(exact.isError).toBe(false);
    const audit = await h.db.db
      .selectFrom('agent_file_edits')
      .select('diff')
      .where('agent_id', '=', agentId)
      .executeTakeFirstOrThrow();
    expect(Buffer.byteLength(audit.diff)).toBeLessThanOrEqual(AGENT_FILE_DIFF_MAX_BYTES);
    expect(audit.diff).toContain('[… diff truncated]');
  });

  test('at most one edit per file per run', async () => {
    const agentId = await h.createAgent({ canEditOwnFiles: true });
    const [run1, run2] = [`run-${randomUUID()}`, `run-${randomUUID()}`];
    expect((await edit(agentId, { name: 'SOUL.md', body: 'first' }, run1)).isError).toBe(false);
    const second = await edit(agentId, { name: 'SOUL.md', body: 'second' }, run1);
    expect(second).toMatchObject({
      isError: true,
      text: expect.stringContaining('already edited SOUL.md in this run'),
    });
    expect((await agentRow(agentId)).soul_md).toBe('first');
    expect((await edit(agentId, { name: 'TOOLS.md', body: 'other file, same run' }, run1)).isError).toBe(false);
    expect((await edit(agentId, { name: 'SOUL.md', body: 'next run' }, run2)).isError).toBe(false);
    expect((await agentRow(agentId)).soul_md).toBe('next run');
  });

  test('refuses a stale etag', async () => {
    const agentId = await h.createAgent({ canEditOwnFiles: true });
    const before = await agentRow(agentId);
    const stale = await edit(agentId, { name: 'SOUL.md', body: 'x', etag: 'not-the-hash' });
    expect(stale).toMatchObject({
      isError: true,
      text: expect.stringContaining(`current etag ${before.content_hash}`),
    });
    await expectUnchanged(agentId, before);
  });
});
