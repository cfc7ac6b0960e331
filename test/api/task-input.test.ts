import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { eventually } from '../support/eventually';
import { useHarness } from '../support/harness';
import { startTestApi, type TestApi } from './api-support';

/** The README and the pages of docs/, where the API's messages are quoted. */
const DOCS = [
  'README.md',
  ...readdirSync(path.join(__dirname, '../../docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
]
  .map((f) => readFileSync(path.join(__dirname, '../..', f), 'utf8'))
  .join('\n');

/**
 * `POST /v1/tasks` takes everything `startTask` takes (cost budget, priority, parent, dependencies …),
 * and the validation messages the docs quote are the ones the API answers.
 */
describe('the HTTP API takes the whole task input, with the messages the docs show', () => {
  const h = useHarness({
    worker: true,
    beforeClose: async () => {
      await api.close();
    },
  });
  let api: TestApi;
  let agentId: string;
  beforeAll(async () => {
    api = await startTestApi(h);
    agentId = await h.createAgent();
  });

  test('costBudgetUsd, priority, parentTaskId and dependsOn over HTTP reach the task', async () => {
    const parent = await api.call('POST', '/v1/tasks', { body: { agentId, title: 'The parent' } });
    expect(parent.status).toBe(201);
    // The parent's workflow writes its row with its first activity, a moment after the 201.
    await eventually(
      () => h.db.db.selectFrom('tasks').select('id').where('id', '=', parent.body.taskId).executeTakeFirst(),
      'the parent task row',
    );
    const started = await api.call('POST', '/v1/tasks', {
      body: {
        agentId,
        title: 'Budgeted child',
        priority: 'high',
        costBudgetUsd: 2.5,
        parentTaskId: parent.body.taskId,
        dependsOn: [parent.body.taskId],
        approvalTimeoutMs: 60_000,
      },
    });
    expect([started.status, started.body.error]).toEqual([201, undefined]);
    const taskId = started.body.taskId as string;
    const row = await h.db.db.selectFrom('tasks').selectAll().where('id', '=', taskId).executeTakeFirstOrThrow();
    expect([row.priority, row.parent_task_id, row.created_by]).toEqual([
      'high',
      parent.body.taskId,
      api.tokenNames.operator,
    ]);
    const dependencies = await h.db.db
      .selectFrom('task_dependencies')
      .select('depends_on')
      .where('task_id', '=', taskId)
      .execute();
    expect(dependencies.map((d) => d.depends_on)).toEqual([parent.body.taskId]);
    const budget = await api.call('GET', `/v1/tasks/${taskId}/budget`, { token: api.tokens.read });
    expect(budget.body).toMatchObject({ limitUsd: 2.5 });
    const unknownDependency = await api.call('POST', '/v1/tasks', {
      body: { agentId, title: 'Orphan', dependsOn: ['no-such-task'] },
    });
    expect([unknownDependency.status, unknownDependency.body.error.code]).toEqual([400, 'invalid_request']);
    expect(unknownDependency.body.error.message).toMatch(/no-such-task/);
    for (const id of [taskId, parent.body.taskId])
      await h.client
        .handle(id)
        .terminate('test finished')
        .catch(() => undefined);
  }, 60_000);

  /** Each message the docs quote for a 400, and a request that must get it. */
  const quoted: Record<string, { method: string; path: string; body?: unknown }> = {
    'body.title: a task needs a title': { method: 'POST', path: '/v1/tasks', body: { agentId: 'writer', title: '  ' } },
    'body.costBudgetUsd: costBudgetUsd must be a positive number of US dollars': {
      method: 'POST',
      path: '/v1/tasks',
      body: { agentId: 'writer', title: 'T', costBudgetUsd: -1 },
    },
    'body: unknown field "budget"; this route takes agentId, title, …': {
      method: 'POST',
      path: '/v1/tasks',
      body: { agentId: 'writer', title: 'T', budget: 1 },
    },
    'body.text: a chat message needs text': { method: 'POST', path: '/v1/agents/writer/chat', body: { text: '' } },
    'query.unread: unread must be true or false': { method: 'GET', path: '/v1/notifications?unread=maybe' },
    'body.ids: name at least one notification id': {
      method: 'POST',
      path: '/v1/notifications/read',
      body: { ids: [] },
    },
  };

  test('every `body.…: …` / `query.…: …` message the docs quote is what the API answers', async () => {
    const inReadme = [...DOCS.matchAll(/`((?:body|query)(?:\.[A-Za-z]+)*: [^`]+)`/g)].map((m) => m[1]!);
    expect(inReadme.length).toBeGreaterThan(0);
    // A message quoted in the docs without a request here is untested: add it to `quoted`.
    expect(inReadme.filter((m) => !(m in quoted))).toEqual([]);
    for (const message of inReadme) {
      const { method, path: url, body } = quoted[message]!;
      const response = await api.call(method, url, { body });
      expect([message, response.status, response.body.error?.code]).toEqual([message, 400, 'invalid_request']);
      // "…" in the docs stands for the rest of the list.
      const [head, tail] = message.split('…');
      expect(response.body.error.message).toContain(head!.trimEnd().replace(/,$/, ''));
      if (tail) expect(response.body.error.message.endsWith(tail)).toBe(true);
    }
  });

  test('a missing title and an unknown field say so in words, not in zod terms', async () => {
    const missing = await api.call('POST', '/v1/tasks', { body: { agentId } });
    expect(missing.body.error.message).toBe('body.title: a task needs a title');
    const unknown = await api.call('POST', '/v1/tasks', { body: { agentId, title: 'T', costBudget: 1 } });
    expect(unknown.body.error.message).toBe(
      'body: unknown field "costBudget"; this route takes agentId, title, description, taskId, priority, approvalTimeoutMs, costBudgetUsd, parentTaskId, dependsOn',
    );
  });
});
