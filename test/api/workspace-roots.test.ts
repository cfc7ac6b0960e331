import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { InvalidAgentError } from '../../client';
import { PRODUCT_CHECKOUT } from '../../activities/store/workspace-roots';
import { PLATFORM } from '../../activities/store/tenancy';
import { createToken } from '../../api/tokens';
import { eventually } from '../support/eventually';
import { textTurn, toolTurn, useHarness } from '../support/harness';
import { lastToolResults, ScriptedAgents } from '../workflow/task-support';
import { startTestApi, type TestApi } from './api-support';

const run = promisify(execFile);

/**
 * The roots this file's processes run with (set before the harness starts, so its worker, its client
 * and the CLI processes it starts all read them): AGENTS_WORKSPACE_ROOT, a root of its own for globex,
 * one allowed root, and a data folder inside that allowed root (the data folder rule must still win).
 */
const scratch = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'da-ws-roots-')));
const base = path.join(scratch, 'ws');
const globexRoot = path.join(scratch, 'globex');
const shared = path.join(scratch, 'shared');
const dataDir = path.join(shared, 'data');
process.env.AGENTS_WORKSPACE_ROOT = base;
process.env.AGENTS_WORKSPACE_ROOTS = `globex=${globexRoot}`;
process.env.AGENTS_WORKSPACE_ALLOWED_ROOTS = shared;
process.env.DATA_DIR = dataDir;

/** Unique per run: the database outlives a test run. */
const suffix = Date.now().toString(36);
const files = { soul: 's', agents: 'a', heartbeat: '', tools: '' };
/** What must lie where, for an agent of acme (workspace-roots.ts). */
const ACME_MUST_LIE = `a workspace of organisation acme must lie under ${base}/acme (the workspace root of organisation acme) or under an allowed root (${shared})`;

/**
 * Workspaces stay where the operator allows: every path in (HTTP API, CLI, client library) refuses a
 * folder outside the agent's organisation's root and the allowed roots, and the folders no root can
 * open, with the reason and where it must lie, writing nothing; the worker refuses to run a tool in a
 * forbidden folder written straight into the database.
 */
describe('workspace roots', () => {
  const h = useHarness({ beforeClose: async () => api.close() });
  let api: TestApi;
  /** A platform operator's token: it may put agents in any organisation. */
  let platformToken: string;
  /** Each forbidden folder as given, with the reason it is refused. */
  let forbidden: Array<[string, string, RegExp]>;
  beforeAll(async () => {
    api = await startTestApi(h, { workspaceRoot: base });
    platformToken = (await createToken(h.db.db, `platform-${suffix}`, 'operator', { org: PLATFORM })).token;
    mkdirSync(path.join(base, 'acme'), { recursive: true });
    mkdirSync(dataDir, { recursive: true });
    symlinkSync('/etc', path.join(base, 'acme', 'to-etc'));
    forbidden = [
      ['/etc', '/etc', /it is \/etc, a folder of the operating system/],
      ['/root/.ssh', '/root/.ssh', /it is \/root\/.ssh, a dot-folder of the home \/root/],
      ['/home/x/.config', '/home/x/.config', /it is \/home\/x\/.config, a dot-folder of the home \/home\/x/],
      ['the data folder', dataDir, /it is the data folder \(DATA_DIR\), which holds the embedded database/],
      ['the checkout', PRODUCT_CHECKOUT, /it is the product's checkout \(its source code\)/],
      ['/', '/', /it is the filesystem root/],
      [
        'a link under the root to /etc',
        path.join(base, 'acme', 'to-etc', 'ws'),
        /to-etc is a symbolic link into \/etc, so it is \/etc\/ws, and is under \/etc, a folder of the operating system/,
      ],
      [`root/../../etc`, `${base}/acme/${'../'.repeat(30)}etc`, /it is \/etc, a folder of the operating system/],
    ];
  });
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  const put = (agentId: string, body: Record<string, unknown>) =>
    api.call('PUT', `/v1/agents/${agentId}`, { token: platformToken, body: { name: 'Acme agent', files, ...body } });
  const row = (agentId: string) =>
    h.db.db.selectFrom('agents').selectAll().where('id', '=', agentId).executeTakeFirst();

  test('PUT /v1/agents: each forbidden folder → 400 naming the folder, the reason and where it must lie; nothing written', async () => {
    const existing = `acme-kept-${suffix}`;
    const created = await put(existing, { config: { org: 'acme' } });
    expect([created.status, created.body.error]).toEqual([200, undefined]);
    expect(created.body.workspaceDir).toBe(path.join(base, 'acme', existing));
    const before = await row(existing);
    for (const [label, folder, reason] of forbidden) {
      const ghost = `acme-ghost-${suffix}`;
      for (const agentId of [ghost, existing]) {
        const response = await put(agentId, { name: 'Changed', config: { org: 'acme' }, workspaceDir: folder });
        expect([label, response.status, response.body.error?.code]).toEqual([label, 400, 'invalid_request']);
        expect(response.body.error.message).toMatch(
          new RegExp(`^invalid agent "${agentId}": workspaceDir: ".*" cannot be a workspace folder: `),
        );
        expect(response.body.error.message).toMatch(reason);
        // The filesystem root is refused before the roots are consulted; every other refusal says where to go.
        if (folder !== '/') expect(response.body.error.message).toContain(ACME_MUST_LIE);
      }
      expect(await row(ghost)).toBeUndefined();
      expect(await row(existing)).toEqual(before);
    }
    expect(existsSync('/etc/ws')).toBe(false);
  });

  test("folders under the organisation's root and under an allowed root are accepted; another organisation's root is not", async () => {
    const own = `acme-own-${suffix}`;
    const ownDir = path.join(base, 'acme', 'projects', own);
    expect((await put(own, { config: { org: 'acme' }, workspaceDir: ownDir })).body.workspaceDir).toBe(ownDir);
    expect(existsSync(ownDir)).toBe(true);

    const sharedAgent = `acme-shared-${suffix}`;
    const sharedDir = path.join(shared, sharedAgent);
    expect((await put(sharedAgent, { config: { org: 'acme' }, workspaceDir: sharedDir })).body.workspaceDir).toBe(
      sharedDir,
    );

    const intruder = `acme-intruder-${suffix}`;
    const refused = await put(intruder, { config: { org: 'acme' }, workspaceDir: path.join(globexRoot, 'stolen') });
    expect(refused.status).toBe(400);
    expect(refused.body.error.message).toContain(
      `it lies under ${globexRoot}, the workspace root of organisation globex, not of acme; ${ACME_MUST_LIE}`,
    );
    expect(await row(intruder)).toBeUndefined();
    expect(existsSync(path.join(globexRoot, 'stolen'))).toBe(false);

    // globex's own agents get their root, not <base>/globex.
    const globex = `globex-agent-${suffix}`;
    expect((await put(globex, { config: { org: 'globex' } })).body.workspaceDir).toBe(path.join(globexRoot, globex));
  });

  test('a new default-organisation agent gets <root>/default/<id>; one already at the pre-organisation <root>/<id> keeps it', async () => {
    const fresh = `plain-${suffix}`;
    expect((await put(fresh, {})).body.workspaceDir).toBe(path.join(base, 'default', fresh));
    const legacy = `legacy-${suffix}`;
    await put(legacy, {});
    // As an agent defined before organisations has it.
    await h.db.db
      .updateTable('agents')
      .set({ workspace_dir: path.join(base, legacy) })
      .where('id', '=', legacy)
      .execute();
    const again = await put(legacy, { name: 'Legacy, re-upserted' });
    expect([again.status, again.body.workspaceDir]).toEqual([200, path.join(base, legacy)]);
    // It is that agent's own folder: another agent cannot take it.
    const squatter = await put(`squatter-${suffix}`, { workspaceDir: path.join(base, legacy) });
    expect(squatter.body.error.message).toMatch(/lies under .*, another organisation's root or another agent's folder/);
  });

  test('the client library refuses the same folders with InvalidAgentError', async () => {
    for (const [, folder, reason] of forbidden) {
      const attempt = h.client.upsertAgent({
        id: `lib-ghost-${suffix}`,
        name: 'Ghost',
        files,
        config: { org: 'acme' },
        workspaceDir: folder,
      });
      await expect(attempt).rejects.toThrow(InvalidAgentError);
      await expect(
        h.client.upsertAgent({
          id: `lib-ghost-${suffix}`,
          name: 'Ghost',
          files,
          config: { org: 'acme' },
          workspaceDir: folder,
        }),
      ).rejects.toThrow(reason);
    }
    expect(await row(`lib-ghost-${suffix}`)).toBeUndefined();
    const folder = path.join(scratch, 'acme-folder');
    mkdirSync(folder);
    writeFileSync(path.join(folder, 'SOUL.md'), 'You are tidy.');
    writeFileSync(path.join(folder, 'agent.json'), JSON.stringify({ config: { org: 'acme' } }));
    await expect(
      h.client.upsertAgentFromFolder(folder, { id: `lib-folder-${suffix}`, workspaceDir: path.join(globexRoot, 'x') }),
    ).rejects.toThrow(/the workspace root of organisation globex, not of acme/);
    const made = await h.client.upsertAgentFromFolder(folder, { id: `lib-folder-${suffix}` });
    expect(made.workspaceDir).toBe(path.join(base, 'acme', `lib-folder-${suffix}`));
  });

  test('the CLI refuses each forbidden folder: exit code 1 and the reason on stderr, no agent written', async () => {
    const folder = path.join(scratch, 'cli-agent');
    mkdirSync(folder);
    writeFileSync(path.join(folder, 'SOUL.md'), 'You are tidy.');
    writeFileSync(path.join(folder, 'agent.json'), JSON.stringify({ config: { org: 'acme' } }));
    const agentId = `cli-ghost-${suffix}`;
    for (const [label, workspace, reason] of forbidden) {
      const failure = (await run(
        process.execPath,
        [
          require.resolve('tsx/cli'),
          'client/cli.ts',
          'agent',
          'upsert',
          folder,
          '--id',
          agentId,
          '--workspace',
          workspace,
        ],
        { env: { ...process.env, DATABASE_URL: h.db.url }, timeout: 60_000 },
      ).then(
        () => undefined,
        (error: unknown) => error,
      )) as { code?: number; stderr?: string } | undefined;
      expect([label, failure?.code]).toEqual([label, 1]);
      expect(failure?.stderr).toMatch(new RegExp(`error: invalid agent "${agentId}": workspaceDir: `));
      expect(failure?.stderr).toMatch(reason);
    }
    expect(await row(agentId)).toBeUndefined();
  }, 600_000);

  test('the worker refuses every tool call while the stored folder is forbidden, and nothing runs there', async () => {
    await h.startWorker();
    const agents = new ScriptedAgents(h.llm);
    const agentId = `acme-worker-${suffix}`;
    await put(agentId, { config: { org: 'acme' } });
    // Written straight into the database, as a row from before this rule (or around the API) could be:
    // a link inside the organisation's root that leads to a folder outside every root.
    const victim = path.join(scratch, 'victim');
    mkdirSync(victim);
    symlinkSync(victim, path.join(base, 'acme', 'to-victim'));
    await h.db.db
      .updateTable('agents')
      .set({ workspace_dir: path.join(base, 'acme', 'to-victim') })
      .where('id', '=', agentId)
      .execute();
    const taskId = agents.task(({ index }) =>
      index === 0
        ? toolTurn('file_write', { path: 'planted.txt', content: 'should never land' })
        : textTurn('Stopping.'),
    );
    await h.client.startTask({ agentId, taskId, title: 'Write', description: 'write a file' });
    const [, second] = await agents.waitForRequests(taskId, 2, 60_000);
    const [result] = lastToolResults(second!);
    expect(result?.isError).toBe(true);
    expect(result?.text).toMatch(
      /^Denied by policy: the agent's workspace folder is refused, so no tool runs until an operator moves it \(invalid agent ".*": workspaceDir: ".*to-victim" cannot be a workspace folder: .*to-victim is a symbolic link into .*victim, so it is .*victim, and is outside every workspace root; a workspace of organisation acme must lie under /,
    );
    expect(existsSync(path.join(victim, 'planted.txt'))).toBe(false);
    const ledger = await eventually(
      () =>
        h.db.db
          .selectFrom('tool_calls')
          .select(['tool', 'status', 'is_error'])
          .where('task_id', '=', taskId)
          .executeTakeFirst(),
      'the refused call in the ledger',
    );
    expect(ledger).toEqual({ tool: 'file_write', status: 'failed', is_error: true });
    await h.client.cancel(taskId).catch(() => undefined);
  }, 120_000);

  test('a row naming /etc outright: the worker answers the call with the refusal, and /etc is not read', async () => {
    const agents = new ScriptedAgents(h.llm);
    const agentId = `etc-worker-${suffix}`;
    await put(agentId, {});
    await h.db.db.updateTable('agents').set({ workspace_dir: '/etc' }).where('id', '=', agentId).execute();
    const taskId = agents.task(({ index }) =>
      index === 0 ? toolTurn('file_read', { path: 'hostname' }) : textTurn('Stopping.'),
    );
    await h.client.startTask({ agentId, taskId, title: 'Read', description: 'read a file' });
    const [, second] = await agents.waitForRequests(taskId, 2, 60_000);
    const [result] = lastToolResults(second!);
    expect(result?.isError).toBe(true);
    expect(result?.text).toContain(
      `Denied by policy: the agent's workspace folder is refused, so no tool runs until an operator moves it (invalid agent "${agentId}": workspaceDir: "/etc" cannot be a workspace folder: it is /etc, a folder of the operating system; a workspace of organisation default must lie under ${base}/default`,
    );
    await h.client.cancel(taskId).catch(() => undefined);
  }, 120_000);
});
