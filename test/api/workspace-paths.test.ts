import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { InvalidAgentError } from '../../client';
import { useHarness } from '../support/harness';
import { startTestApi, type TestApi } from './api-support';

const run = promisify(execFile);
/** A refusal is a few filesystem calls: far below this, while the recursive-mkdir loop never answered. */
const ANSWER_WITHIN_MS = 5_000;

/**
 * Every workspace path from a user goes through one validator: the HTTP API, the client library and
 * the CLI refuse impossible ones with the reason (400 over HTTP), quickly, and create nothing.
 */
describe('workspace paths from users', () => {
  const h = useHarness({ beforeClose: async () => api.close() });
  let api: TestApi;
  let scratch: string;
  const files = { soul: 's', agents: 'a', heartbeat: '', tools: '' };
  beforeAll(async () => {
    api = await startTestApi(h);
    scratch = mkdtempSync(path.join(os.tmpdir(), 'da-paths-'));
    writeFileSync(path.join(scratch, 'plain-file'), 'not a folder');
    symlinkSync('/proc/self', path.join(scratch, 'to-proc'));
    mkdirSync(path.join(scratch, 'agent-folder'));
    writeFileSync(path.join(scratch, 'agent-folder', 'SOUL.md'), 'You are tidy.');
  });
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  /** Unique per run: the database outlives a test run. */
  const ghost = `ghost-${Date.now().toString(36)}`;
  const put = (agentId: string, workspaceDir: string) =>
    api.call('PUT', `/v1/agents/${agentId}`, { body: { name: 'Ghost', files, workspaceDir } });

  test.each([
    ['/proc/nope/ws', /under \/proc, a virtual filesystem of the kernel/],
    ['/sys/nope/ws', /under \/sys, a virtual filesystem/],
    ['/dev/nope/ws', /under \/dev, a virtual filesystem/],
    ['<scratch>/plain-file/ws', /plain-file is a regular file, not a folder, so nothing can be created below it/],
    ['<scratch>/plain-file', /it is a regular file, not a folder/],
    ['<scratch>/to-proc/ws', /to-proc is a symbolic link into \/proc/],
    ['relative/ws', /it is not an absolute path/],
    ['/tmp/a\u0000b', /it contains a NUL character/],
    [`/tmp/${'x'.repeat(300)}`, /is longer than 255 bytes/],
  ])('PUT /v1/agents with workspaceDir %s → 400 naming the reason, at once, nothing created', async (given, reason) => {
    const workspaceDir = given.replace('<scratch>', scratch);
    const started = Date.now();
    const response = await put(ghost, workspaceDir);
    expect(Date.now() - started).toBeLessThan(ANSWER_WITHIN_MS);
    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe('invalid_request');
    expect(response.body.error.message).toMatch(
      new RegExp(`^invalid agent "${ghost}": workspaceDir: .* cannot be a workspace folder: `),
    );
    expect(response.body.error.message).toMatch(reason);
    expect(await h.db.db.selectFrom('agents').select('id').where('id', '=', ghost).executeTakeFirst()).toBeUndefined();
    for (const created of ['/proc/nope', '/sys/nope', '/dev/nope']) expect(existsSync(created)).toBe(false);
  });

  test('the client library refuses the same paths with InvalidAgentError, and a usable one is created', async () => {
    await expect(
      h.client.upsertAgent({ id: 'ghost-lib', name: 'Ghost', files, workspaceDir: '/proc/nope/ws' }),
    ).rejects.toThrow(InvalidAgentError);
    await expect(
      h.client.upsertAgent({
        id: 'ghost-lib',
        name: 'Ghost',
        files,
        workspaceDir: path.join(scratch, 'plain-file', 'ws'),
      }),
    ).rejects.toThrow(/regular file, not a folder/);
    const deep = path.join(scratch, 'a', 'b', 'c');
    const created = await h.client.upsertAgent({ id: 'ghost-lib', name: 'Ghost', files, workspaceDir: deep });
    expect(created.workspaceDir).toBe(deep);
    expect(existsSync(deep)).toBe(true);
  });

  test('folders a user points at: a link to /dev/zero or a named pipe is refused at once, not read forever', async () => {
    const folder = path.join(scratch, 'hostile-agent');
    mkdirSync(folder);
    symlinkSync('/dev/zero', path.join(folder, 'SOUL.md'));
    const started = Date.now();
    await expect(
      h.client.upsertAgentFromFolder(folder, { id: 'zero-agent', workspaceDir: path.join(scratch, 'zero-ws') }),
    ).rejects.toThrow(/SOUL\.md is not a regular file \(a device, pipe or socket\)/);
    rmSync(path.join(folder, 'SOUL.md'));
    execFileSync('mkfifo', [path.join(folder, 'AGENTS.md')]);
    await expect(
      h.client.upsertAgentFromFolder(folder, { id: 'fifo-agent', workspaceDir: path.join(scratch, 'fifo-ws') }),
    ).rejects.toThrow(/AGENTS\.md is not a regular file/);
    const org = path.join(scratch, 'hostile-org');
    mkdirSync(path.join(org, 'users'), { recursive: true });
    writeFileSync(path.join(org, 'CONTEXT.md'), 'We build things.');
    symlinkSync('/dev/zero', path.join(org, 'users', 'zed.md'));
    await expect(h.client.upsertOrganisationFromFolder(org, { name: 'hostile-org' })).rejects.toThrow(
      /zed\.md is not a regular file/,
    );
    expect(Date.now() - started).toBeLessThan(ANSWER_WITHIN_MS);
    expect(
      await h.db.db.selectFrom('agents').select('id').where('id', 'in', ['zero-agent', 'fifo-agent']).execute(),
    ).toEqual([]);
  });

  test('the CLI refuses it with the reason and exit code 1', async () => {
    const cli = run(
      process.execPath,
      [
        require.resolve('tsx/cli'),
        'client/cli.ts',
        'agent',
        'upsert',
        path.join(scratch, 'agent-folder'),
        '--id',
        'ghost-cli',
        '--workspace',
        '/proc/nope/ws',
      ],
      {
        env: { ...process.env, DATABASE_URL: h.db.url },
        timeout: 60_000,
      },
    );
    const failure = (await cli.then(
      () => undefined,
      (error: unknown) => error,
    )) as { code?: number; stderr?: string } | undefined;
    expect(failure?.code).toBe(1);
    expect(failure?.stderr).toMatch(
      /error: invalid agent "ghost-cli": workspaceDir: "\/proc\/nope\/ws" cannot be a workspace folder: it is under \/proc/,
    );
  }, 90_000);

  test('a request failing for an unknown reason names its request id and where it is logged, and the log has it', async () => {
    const agentId = await h.createAgent();
    const failing = Object.assign(Object.create(h.client) as typeof h.client, {
      agentUsage: async () => {
        throw new Error('disk on fire');
      },
    });
    const broken = await startTestApi(h, { client: failing });
    try {
      const response = await broken.call('GET', `/v1/agents/${agentId}/usage`, { token: broken.tokens.read });
      expect(response.status).toBe(500);
      const requestId = /with reqId ([0-9a-f-]{36})$/.exec(response.body.error.message)?.[1];
      expect(response.body.error.message).toMatch(/the error is logged on the test log with reqId /);
      expect(requestId).toBeDefined();
      const line = broken
        .logLines()
        .map((l) => JSON.parse(l) as { reqId?: string; err?: { message?: string } })
        .find((l) => l.reqId === requestId);
      expect(line?.err?.message).toBe('disk on fire');
    } finally {
      await broken.close();
    }
    // Without a logger configured (the API inside `npm start`), failures still go to stderr, and the answer says so.
    const written: string[] = [];
    const spy = jest.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    const unconfigured = await startTestApi(h, { client: failing, logger: undefined });
    try {
      const response = await unconfigured.call('GET', `/v1/agents/${agentId}/usage`, {
        token: unconfigured.tokens.read,
      });
      expect(response.body.error.message).toMatch(/logged on the API process's standard error with reqId /);
      const requestId = /with reqId (\S+)$/.exec(response.body.error.message)![1]!;
      expect(written.join('')).toContain(requestId);
      expect(written.join('')).toContain('disk on fire');
    } finally {
      spy.mockRestore();
      await unconfigured.close();
    }
  });
});
