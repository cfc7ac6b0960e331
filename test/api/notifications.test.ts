import { randomUUID } from 'node:crypto';
import { storeNotification } from '../../activities/store/notifications';
import { useHarness } from '../support/harness';
import { startTestApi, type TestApi } from './api-support';

/**
 * The notification inbox over HTTP: list (newest first, per agent, unread only) with a read token,
 * mark read with a service token (readBy = the token's name; a second mark changes nothing), and a
 * read token may not mark.
 */
describe('HTTP API: notifications', () => {
  const h = useHarness({
    beforeClose: async () => {
      await api.close();
    },
  });
  let api: TestApi;

  beforeAll(async () => {
    api = await startTestApi(h);
  });

  test('list per agent and unread only; mark read records the token name; read scope cannot mark', async () => {
    const [agentA, agentB] = [await h.createAgent(), await h.createAgent()];
    const id = (n: string) => `ntf_${n}_${randomUUID().slice(0, 8)}`;
    const older = await storeNotification(h.db.db, id('older'), {
      agentId: agentA,
      kind: 'notification',
      body: 'Build finished\nall green',
      priority: 'low',
    });
    await new Promise((r) => setTimeout(r, 20));
    const newer = await storeNotification(h.db.db, id('newer'), {
      agentId: agentA,
      kind: 'approval_request',
      title: 'Deploy?',
      body: 'May I deploy?',
      options: ['yes', 'no'],
      priority: 'high',
    });
    const other = await storeNotification(h.db.db, id('other'), {
      agentId: agentB,
      kind: 'notification',
      body: 'Hello from B',
    });

    const listA = await api.call('GET', `/v1/notifications?agentId=${agentA}`, { token: api.tokens.read });
    expect(listA.status).toBe(200);
    expect(listA.body.notifications).toEqual([
      expect.objectContaining({
        id: newer.id,
        agentId: agentA,
        kind: 'approval_request',
        title: 'Deploy?',
        body: 'May I deploy?',
        options: ['yes', 'no'],
        priority: 'high',
        readAt: null,
        readBy: null,
      }),
      expect.objectContaining({ id: older.id, title: 'Build finished', priority: 'low', options: null, taskId: null }),
    ]);
    const all = await api.call('GET', '/v1/notifications', { token: api.tokens.read });
    expect(all.body.notifications.map((n: { id: string }) => n.id)).toEqual(
      expect.arrayContaining([newer.id, older.id, other.id]),
    );

    expect(
      (await api.call('POST', '/v1/notifications/read', { token: api.tokens.read, body: { ids: [older.id] } })).status,
    ).toBe(403);
    const marked = await api.call('POST', '/v1/notifications/read', {
      token: api.tokens.service,
      body: { ids: [older.id, older.id] },
    });
    expect(marked).toMatchObject({ status: 200, body: { marked: 1 } });
    expect(
      (await api.call('POST', '/v1/notifications/read', { token: api.tokens.operator, body: { ids: [older.id] } }))
        .body,
    ).toEqual({ marked: 0 });

    const unread = await api.call('GET', `/v1/notifications?agentId=${agentA}&unread=true`, { token: api.tokens.read });
    expect(unread.body.notifications.map((n: { id: string }) => n.id)).toEqual([newer.id]);
    const read = (
      await api.call('GET', `/v1/notifications?agentId=${agentA}&unread=false`, { token: api.tokens.read })
    ).body.notifications.find((n: { id: string }) => n.id === older.id);
    const serviceName = (
      await h.db.db
        .selectFrom('api_tokens')
        .select('name')
        .where('scope', '=', 'service')
        .orderBy('created_at', 'desc')
        .executeTakeFirstOrThrow()
    ).name;
    expect(read).toMatchObject({ readBy: serviceName, readAt: expect.any(String) });
  });
});
