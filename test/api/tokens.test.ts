import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { useHarness } from '../support/harness';
import { startTestApi, tokenSecret, type TestApi } from './api-support';

const run = promisify(execFile);

/**
 * Tokens are created, listed and revoked with the CLI (`agents token …`), stored only as hashes, and a
 * revoked token is refused at once.
 */
describe('agents token create | list | revoke', () => {
  const h = useHarness({
    beforeClose: async () => {
      await api.close();
    },
  });
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi(h);
  });

  const cli = async (...args: string[]) => {
    const { stdout } = await run(process.execPath, [require.resolve('tsx/cli'), 'client/cli.ts', ...args], {
      env: { ...process.env, DATABASE_URL: h.db.url },
    });
    return stdout;
  };

  test('a CLI-made token works with its scope, is listed without its secret, stored hashed, and stops working when revoked', async () => {
    const name = `ci-bot-${Date.now()}`;
    const created = await cli('token', 'create', name, '--scope', 'service');
    const token = /^(da_[0-9a-f]{12}_[A-Za-z0-9_-]{43})$/m.exec(created)?.[1];
    expect(token).toBeDefined();
    expect((await api.call('GET', '/v1/agents', { token })).status).toBe(200);
    expect((await api.call('PUT', '/v1/agents/x', { token, body: {} })).status).toBe(403);

    const listed = await cli('token', 'list');
    // A token acts for the default organisation unless created for another; the list says which.
    expect(listed).toMatch(new RegExp(`service\\s+default\\s+${name}`));
    expect(listed).not.toContain(tokenSecret(token!));
    const row = await h.db.db.selectFrom('api_tokens').selectAll().where('name', '=', name).executeTakeFirstOrThrow();
    expect(JSON.stringify(row)).not.toContain(tokenSecret(token!));
    expect(row.token_hash).toMatch(/^[0-9a-f]{64}$/);

    await expect(cli('token', 'create', name, '--scope', 'read')).rejects.toThrow(/already exists/);
    await expect(cli('token', 'create', 'x', '--scope', 'admin')).rejects.toThrow(/invalid scope "admin"/);
    expect(await cli('token', 'revoke', name)).toContain(`revoked ${name}`);
    const refused = await api.call('GET', '/v1/agents', { token });
    expect(refused).toMatchObject({
      status: 401,
      body: { error: { code: 'unauthorized', message: 'that token is unknown or revoked' } },
    });
    await expect(cli('token', 'revoke', name)).rejects.toThrow(/no live token/);
  });

  test('--org makes a token of that organisation (it reaches none of another), --platform one that spans', async () => {
    const stamp = Date.now();
    const org = `tok-org-${stamp}`;
    const agentOfDefault = await h.createAgent();
    const created = await cli('token', 'create', `acme-bot-${stamp}`, '--scope', 'service', '--org', org);
    expect(created).toContain(`organisation ${org}`);
    const token = /^(da_[0-9a-f]{12}_[A-Za-z0-9_-]{43})$/m.exec(created)![1];
    expect((await api.call('GET', `/v1/agents/${agentOfDefault}`, { token })).status).toBe(404);
    const platform = await cli('token', 'create', `platform-${stamp}`, '--scope', 'operator', '--platform');
    expect(platform).toContain('every organisation');
    const spanning = /^(da_[0-9a-f]{12}_[A-Za-z0-9_-]{43})$/m.exec(platform)![1];
    expect((await api.call('GET', `/v1/agents/${agentOfDefault}`, { token: spanning })).status).toBe(200);
    await expect(cli('token', 'create', `platform-read-${stamp}`, '--scope', 'read', '--platform')).rejects.toThrow(
      /must have scope "operator"/,
    );
    const listed = await cli('token', 'list');
    expect(listed).toMatch(new RegExp(`service\\s+${org}\\s+acme-bot-${stamp}`));
    expect(listed).toMatch(new RegExp(`operator\\s+\\*platform\\*\\s+platform-${stamp}`));
    for (const name of [`acme-bot-${stamp}`, `platform-${stamp}`]) await cli('token', 'revoke', name);
  });
});
