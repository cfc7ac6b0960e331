import { randomUUID } from 'node:crypto';
import { ANNOUNCEMENT_MAX_CHARS, ORG_DOCUMENT_MAX_CHARS, ORG_USERS_MAX } from '../../activities/store/organisations';
import { SKILL_BODY_MAX_CHARS } from '../../activities/store/skills';
import { eventually } from '../support/eventually';
import { useHarness } from '../support/harness';
import { startTestApi, type TestApi } from './api-support';

/**
 * Organisations, skills and system announcements over HTTP, against real PostgreSQL: an organisation
 * PUT replaces its users and skills, shared skills are listed, an agent of the organisation sees its
 * organisation's and the shared skills with the bound ones marked, announcements expire and are
 * filtered by organisation, bad input answers 400/404 naming the problem and writes nothing, and a
 * read token may read but not write.
 *
 * The database is shared with the other test files running at the same time: every name here is
 * unique, no live announcement for everyone is posted (it would enter every running agent's prompt),
 * and the one shared skill sorts last by name and is deleted afterwards.
 */
describe('HTTP API: organisations, skills and announcements', () => {
  const h = useHarness({
    beforeClose: async () => {
      await h.db.db.deleteFrom('skills').where('scope', '=', 'shared').where('name', '=', sharedSkill).execute();
      await api.close();
    },
  });
  let api: TestApi;
  const suffix = randomUUID().slice(0, 8);
  const org = `acme-${suffix}`;
  const otherOrg = `globex-${suffix}`;
  // "zz-" sorts after other tests' skills in a name-ordered catalogue, so it never displaces theirs.
  const sharedSkill = `zz-digest-${suffix}`;
  const agentBody = (config: Record<string, unknown>) => ({
    name: 'Analyst',
    files: { soul: 'You analyse.', agents: '', heartbeat: '', tools: '' },
    config,
  });
  const expectError = (response: { status: number; body: any }, status: number, code: string, message: RegExp) => {
    expect([response.status, response.body]).toEqual([
      status,
      { error: { code, message: expect.stringMatching(message) } },
    ]);
  };

  /** This file manages several organisations: the platform's token by default, a read token of `org` to read. */
  let readToken: string;
  const call: TestApi['call'] = (method, path, options = {}) =>
    api.call(method, path, { token: api.platformToken, ...options });

  beforeAll(async () => {
    api = await startTestApi(h);
    readToken = await api.orgToken(org, 'read');
  });

  test('PUT then GET an organisation; a second PUT replaces its users and skills', async () => {
    const put = await call('PUT', `/v1/organisations/${org}`, {
      body: {
        context: '  Acme builds data pipelines.  ',
        announcements: 'Code freeze on Fridays.',
        users: [
          { handle: 'hana', profile: '# Hana Ito\nPrefers numbers.' },
          { handle: 'bo', name: 'Bo Berg', profile: 'Runs the warehouse.' },
        ],
        skills: [
          {
            name: 'csv-import',
            description: 'Import CSV files safely',
            category: 'data',
            body: 'Check the header first.',
          },
          { name: 'pdf-report', description: 'Write PDF reports', body: 'Use the template.' },
        ],
      },
    });
    expect(put.status).toBe(200);
    const expected = {
      name: org,
      context: 'Acme builds data pipelines.',
      announcements: 'Code freeze on Fridays.',
      users: [
        { handle: 'bo', name: 'Bo Berg' },
        { handle: 'hana', name: 'Hana Ito' },
      ],
      skills: [
        { name: 'csv-import', description: 'Import CSV files safely', category: 'data' },
        { name: 'pdf-report', description: 'Write PDF reports', category: '' },
      ],
      updatedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    };
    expect(put.body).toEqual(expected);
    const get = await call('GET', `/v1/organisations/${org}`, { token: readToken });
    expect([get.status, get.body]).toEqual([200, expected]);
    // What the prompt reads: the profile text is stored as given.
    const profile = await h.db.db
      .selectFrom('user_profiles')
      .select('profile_md')
      .where('org', '=', org)
      .where('handle', '=', 'hana')
      .executeTakeFirstOrThrow();
    expect(profile.profile_md).toBe('# Hana Ito\nPrefers numbers.');

    const replaced = await call('PUT', `/v1/organisations/${org}`, {
      body: {
        context: 'Acme builds data pipelines.',
        users: [{ handle: 'cy', profile: 'New here.' }],
        skills: [{ name: 'csv-import', description: 'Import CSV files', category: 'data', body: 'v2' }],
      },
    });
    expect(replaced.status).toBe(200);
    expect(replaced.body).toMatchObject({
      announcements: '',
      users: [{ handle: 'cy', name: 'cy' }],
      skills: [{ name: 'csv-import', description: 'Import CSV files', category: 'data' }],
    });
    const rows = await h.db.db.selectFrom('user_profiles').select('handle').where('org', '=', org).execute();
    expect(rows.map((r) => r.handle)).toEqual(['cy']);
    const skillRows = await h.db.db
      .selectFrom('skills')
      .select(['name', 'body'])
      .where('scope', '=', `org:${org}`)
      .execute();
    expect(skillRows).toEqual([{ name: 'csv-import', body: 'v2' }]);
  });

  test("a shared skill is listed; ?org= adds the organisation's; an agent of the organisation sees both, bound ones marked", async () => {
    const put = await call('PUT', `/v1/skills/${sharedSkill}`, {
      body: {
        description: 'Summarise meeting notes for the weekly digest',
        category: 'writing',
        body: 'Lead with decisions.',
      },
    });
    expect([put.status, put.body]).toEqual([
      200,
      {
        name: sharedSkill,
        description: 'Summarise meeting notes for the weekly digest',
        category: 'writing',
        scope: 'shared',
      },
    ]);
    await call('PUT', `/v1/organisations/${org}`, {
      body: {
        skills: [
          { name: 'csv-import', description: 'Import CSV files', body: 'Check the header.' },
          { name: 'etl-checks', description: 'Check ETL runs', body: 'Count rows.' },
        ],
      },
    });

    const shared = await call('GET', '/v1/skills', { token: readToken });
    expect(shared.status).toBe(200);
    expect(shared.body.skills).toContainEqual({
      name: sharedSkill,
      description: 'Summarise meeting notes for the weekly digest',
      category: 'writing',
      scope: 'shared',
    });
    expect(shared.body.skills.filter((s: { scope: string }) => s.scope !== 'shared')).toEqual([]);
    expect(JSON.stringify(shared.body)).not.toContain('Lead with decisions.');
    const withOrg = await call('GET', `/v1/skills?org=${org}`, { token: readToken });
    expect(withOrg.body.skills).toEqual(
      expect.arrayContaining([
        { name: 'csv-import', description: 'Import CSV files', category: '', scope: `org:${org}` },
        { name: 'etl-checks', description: 'Check ETL runs', category: '', scope: `org:${org}` },
        expect.objectContaining({ name: sharedSkill, scope: 'shared' }),
      ]),
    );
    expect(withOrg.body.skills.filter((s: { scope: string }) => s.scope !== 'shared')).toHaveLength(2);

    // An agent joins the organisation and binds one organisation skill and the shared one.
    const agentId = `analyst-${suffix}`;
    const agent = await call('PUT', `/v1/agents/${agentId}`, {
      body: agentBody({ org, skills: ['csv-import', sharedSkill] }),
    });
    expect([agent.status, agent.body.config]).toEqual([200, { org, skills: ['csv-import', sharedSkill] }]);
    const visible = await call('GET', `/v1/agents/${agentId}/skills`, { token: readToken });
    expect(visible.status).toBe(200);
    const mine = visible.body.skills.filter((s: { name: string }) =>
      ['csv-import', 'etl-checks', sharedSkill].includes(s.name),
    );
    expect(mine).toEqual([
      { name: 'csv-import', description: 'Import CSV files', category: '', scope: `org:${org}`, bound: true },
      { name: 'etl-checks', description: 'Check ETL runs', category: '', scope: `org:${org}`, bound: false },
      {
        name: sharedSkill,
        description: 'Summarise meeting notes for the weekly digest',
        category: 'writing',
        scope: 'shared',
        bound: true,
      },
    ]);
    expect(visible.body.skills.every((s: Record<string, unknown>) => !('body' in s))).toBe(true);
    // Another organisation's skills stay out of this agent's view.
    await call('PUT', `/v1/organisations/${otherOrg}`, {
      body: { skills: [{ name: `rival-${suffix}`, description: 'Rival skill', body: 'x' }] },
    });
    const again = await call('GET', `/v1/agents/${agentId}/skills`, { token: readToken });
    expect(again.body.skills.map((s: { name: string }) => s.name)).not.toContain(`rival-${suffix}`);

    // Binding a skill the agent cannot see is refused with the store's message, not a 500.
    const unseen = await call('PUT', `/v1/agents/${agentId}`, {
      body: agentBody({ org, skills: [`rival-${suffix}`] }),
    });
    expectError(
      unseen,
      400,
      'invalid_request',
      new RegExp(`config.skills: no skill visible to this agent named "rival-${suffix}"`),
    );
  });

  test('announcements: posted per organisation, listed newest first, filtered by organisation, gone once expired', async () => {
    await call('PUT', `/v1/organisations/${org}`, { body: { context: 'Acme.' } });
    await call('PUT', `/v1/organisations/${otherOrg}`, { body: { context: 'Globex.' } });
    const post = (body: Record<string, unknown>) => call('POST', '/v1/announcements', { body });
    const first = await post({ text: 'Maintenance tonight.', org });
    expect([first.status, first.body]).toEqual([201, { id: expect.stringMatching(/^\d+$/) }]);
    const expiresAt = new Date(Date.now() + 5_000).toISOString();
    const soon = await post({ text: 'Deploy in progress.', org, expiresAt });
    const expired = await post({
      text: 'Yesterday’s outage.',
      org,
      expiresAt: new Date(Date.now() - 60_000).toISOString(),
    });
    const other = await post({ text: 'Globex offsite.', org: otherOrg });
    // Everyone's announcements expired long ago: the one for everyone is listed for no organisation.
    const expiredForAll = await post({ text: 'Old news for everyone.', expiresAt: '2020-01-01T00:00:00Z' });
    for (const r of [soon, expired, other, expiredForAll]) expect(r.status).toBe(201);

    const mineOnly = (body: { announcements: Array<{ id: string }> }, ids: string[]) =>
      body.announcements.filter((a) => ids.includes(a.id));
    const ids = [first, soon, expired, other, expiredForAll].map((r) => r.body.id as string);
    const forOrg = await call('GET', `/v1/announcements?org=${org}`, { token: readToken });
    expect(forOrg.status).toBe(200);
    expect(mineOnly(forOrg.body, ids)).toEqual([
      {
        id: soon.body.id,
        text: 'Deploy in progress.',
        org,
        createdAt: expect.any(String),
        expiresAt: new Date(expiresAt).toISOString(),
      },
      { id: first.body.id, text: 'Maintenance tonight.', org, createdAt: expect.any(String), expiresAt: null },
    ]);
    // The platform sees every organisation's.
    const all = await call('GET', '/v1/announcements');
    expect(mineOnly(all.body, ids).map((a) => a.id)).toEqual([other.body.id, soon.body.id, first.body.id]);

    await eventually(
      async () => {
        const now = await call('GET', `/v1/announcements?org=${org}`, { token: readToken });
        return (
          mineOnly(now.body, ids)
            .map((a) => a.id)
            .join() === first.body.id
        );
      },
      'the announcement to expire',
      20_000,
    );
  });

  test('bad input answers 400/404 naming the problem, and writes nothing', async () => {
    const fresh = `fresh-${suffix}`;
    expectError(
      await call('PUT', '/v1/organisations/Bad%20Name', { body: {} }),
      400,
      'invalid_request',
      /^path\.org: an organisation name is 1-63 lowercase/,
    );
    expectError(
      await call('PUT', `/v1/organisations/${fresh}`, {
        body: { context: 'x'.repeat(ORG_DOCUMENT_MAX_CHARS + 1) },
      }),
      400,
      'invalid_request',
      new RegExp(`context \\(CONTEXT.md\\) is longer than ${ORG_DOCUMENT_MAX_CHARS} characters`),
    );
    const many = await call('PUT', `/v1/organisations/${fresh}`, {
      body: {
        users: [
          ...Array.from({ length: ORG_USERS_MAX }, (_, i) => ({ handle: `u${i}`, profile: 'p' })),
          { handle: 'no spaces', profile: 'p' },
          { handle: 'u1', profile: 'p' },
        ],
        skills: [{ name: 'Bad Name', description: '', body: 'x'.repeat(SKILL_BODY_MAX_CHARS + 1) }],
      },
    });
    expectError(many, 400, 'invalid_request', /^invalid organisation "fresh-/);
    for (const problem of [
      `${ORG_USERS_MAX + 2} user profiles; at most ${ORG_USERS_MAX}`,
      'user "no spaces": a handle is 1-63 letters',
      'user "u1": listed twice',
      `skill "Bad Name": name: "Bad Name" must be 1-64 lowercase letters`,
      'skill "Bad Name": description: missing',
      `skill "Bad Name": body: longer than ${SKILL_BODY_MAX_CHARS} characters`,
    ]) {
      expect(many.body.error.message).toContain(problem);
    }
    expectError(
      await call('PUT', `/v1/organisations/${fresh}`, { body: { users: [{ handle: 'x' }] } }),
      400,
      'invalid_request',
      /^body\.users\.0\.profile: /,
    );
    // Nothing of the refused requests was written.
    expectError(
      await call('GET', `/v1/organisations/${fresh}`, { token: readToken }),
      404,
      'organisation_not_found',
      new RegExp(`no organisation "${fresh}"`),
    );
    expect(
      await h.db.db.selectFrom('organisations').select('name').where('name', '=', fresh).executeTakeFirst(),
    ).toBeUndefined();

    expectError(
      await call('PUT', '/v1/skills/Bad_Name', { body: { description: 'd', body: 'b' } }),
      400,
      'invalid_request',
      /^path\.name: a skill name is 1-64 lowercase/,
    );
    const blank = `blank-${suffix}`;
    expectError(
      await call('PUT', `/v1/skills/${blank}`, { body: { description: '  ', body: 'b' } }),
      400,
      'invalid_request',
      new RegExp(`invalid skill "${blank}" \\(shared\\): description: missing`),
    );
    expect(
      await h.db.db.selectFrom('skills').select('name').where('name', '=', blank).executeTakeFirst(),
    ).toBeUndefined();
    expectError(
      await call('GET', `/v1/skills?org=${fresh}`, { token: readToken }),
      404,
      'organisation_not_found',
      /no organisation/,
    );

    expectError(
      await call('POST', '/v1/announcements', { body: { text: 'Hello', org: fresh } }),
      404,
      'organisation_not_found',
      new RegExp(`unknown organisation "${fresh}": load it first`),
    );
    expectError(
      await call('POST', '/v1/announcements', { body: { text: '   ', org } }),
      400,
      'invalid_request',
      /^an announcement needs text$/,
    );
    expectError(
      await call('POST', '/v1/announcements', { body: { text: 'x'.repeat(ANNOUNCEMENT_MAX_CHARS + 1), org } }),
      400,
      'invalid_request',
      new RegExp(`^an announcement is at most ${ANNOUNCEMENT_MAX_CHARS} characters$`),
    );
    expectError(
      await call('POST', '/v1/announcements', { body: { text: 'Hi', org, expiresAt: 'tomorrow' } }),
      400,
      'invalid_request',
      /^body\.expiresAt: expiresAt must be an ISO 8601 date-time/,
    );
    expectError(
      await call('GET', `/v1/announcements?org=${fresh}`, { token: readToken }),
      404,
      'organisation_not_found',
      /unknown organisation/,
    );

    expectError(
      await call('GET', `/v1/agents/no-such-agent-${suffix}/skills`, { token: readToken }),
      404,
      'agent_not_found',
      /no agent "no-such-agent-/,
    );
  });

  test('a read token reads but cannot write (403); the OpenAPI document lists the routes', async () => {
    await call('PUT', `/v1/organisations/${org}`, { body: { context: 'Acme.' } });
    for (const [method, path, body] of [
      ['PUT', `/v1/organisations/${org}`, {}],
      ['PUT', `/v1/skills/${sharedSkill}`, { description: 'd', body: 'b' }],
      ['POST', '/v1/announcements', { text: 'Hi', org }],
    ] as const) {
      const refused = await call(method, path, { token: readToken, body });
      expectError(refused, 403, 'forbidden', /this needs a token with scope "operator"/);
      expectError(await call(method, path, { token: api.tokens.service, body }), 403, 'forbidden', /scope "operator"/);
    }
    expect((await call('GET', `/v1/organisations/${org}`, { token: readToken })).body.context).toBe('Acme.');

    const { body } = await call('GET', '/v1/openapi.json', { token: readToken });
    for (const [path, methods] of [
      ['/v1/organisations/{org}', ['get', 'put']],
      ['/v1/skills/{name}', ['put']],
      ['/v1/skills', ['get']],
      ['/v1/agents/{agentId}/skills', ['get']],
      ['/v1/announcements', ['get', 'post']],
    ] as const) {
      expect([path, Object.keys(body.paths[path] ?? {}).sort()]).toEqual([path, [...methods]]);
    }
    expect(body.paths['/v1/announcements'].post.responses['201']).toBeDefined();
    expect(body.paths['/v1/skills/{name}'].put.requestBody.content['application/json'].schema.required).toEqual([
      'description',
      'body',
    ]);
  });
});
