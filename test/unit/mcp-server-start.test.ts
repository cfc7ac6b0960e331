/**
 * Where a stdio MCP server starts and what it searches for code: never the agent's workspace. The
 * end-to-end attack (a planted `python3 -m` module) is test/workflow/mcp-planted-module.test.ts.
 */
import { mkdtempSync, readdirSync, realpathSync, rmSync, statSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MissingSecretError, resolveSecrets } from '../../activities/tools/mcp/config';
import { SERVER_DEFAULT_PATH, serverEnvironment, serverStartDir } from '../../activities/tools/mcp/server-start';

let scratch: string;
let workspace: string;
beforeAll(() => {
  scratch = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'mcp-start-')));
  workspace = mkdtempSync(path.join(scratch, 'ws-'));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the start folder', () => {
  test('is empty, outside the workspace, and writable by no one but root (mode 0555)', () => {
    const dir = serverStartDir();
    expect(readdirSync(dir)).toEqual([]);
    expect(statSync(dir).mode & 0o777).toBe(0o555);
    expect(path.relative(workspace, dir).startsWith('..')).toBe(true);
    expect(serverStartDir()).toBe(dir);
  });
});

describe("a server's environment", () => {
  test('code search paths lose every entry inside the workspace, relative or empty; the rest stay in order', () => {
    const env = serverEnvironment(
      {
        PYTHONPATH: `/opt/mcp:${workspace}:${workspace}/lib:lib::/usr/lib/python3/dist-packages`,
        NODE_PATH: `${workspace}/node_modules`,
        PATH: `${workspace}/bin:/usr/bin`,
        LD_PRELOAD: `${workspace}/evil.so /usr/lib/ok.so`,
        TOKEN: `a value naming ${workspace} is not code and stays`,
      },
      workspace,
    );
    expect(env.PYTHONPATH).toBe('/opt/mcp:/usr/lib/python3/dist-packages');
    expect(env.NODE_PATH).toBeUndefined();
    expect(env.PATH).toBe('/usr/bin');
    expect(env.LD_PRELOAD).toBe('/usr/lib/ok.so');
    expect(env.TOKEN).toBe(`a value naming ${workspace} is not code and stays`);
  });

  test('the workspace is recognised through symbolic links to it, and through .. segments', () => {
    const link = path.join(scratch, 'link-to-ws');
    symlinkSync(workspace, link);
    const env = serverEnvironment({ PYTHONPATH: `${link}/pkg:/opt/x/../..${workspace}/pkg:/opt/mcp` }, link);
    expect(env.PYTHONPATH).toBe('/opt/mcp');
    // A link outside the workspace that leads into it.
    expect(serverEnvironment({ NODE_PATH: `${link}:/opt/mcp` }, workspace).NODE_PATH).toBe('/opt/mcp');
  });

  test('options naming a file of code in the workspace are dropped whole; others are kept', () => {
    const env = serverEnvironment(
      { NODE_OPTIONS: `--require ${workspace}/hook.js`, PYTHONSTARTUP: '/opt/startup.py' },
      workspace,
    );
    expect(env.NODE_OPTIONS).toBeUndefined();
    expect(env.PYTHONSTARTUP).toBe('/opt/startup.py');
  });

  test('PYTHONSAFEPATH is always 1, PATH defaults to system directories, HOME is the sandbox’s own', () => {
    expect(serverEnvironment({ PYTHONSAFEPATH: '' }, workspace)).toEqual({
      PATH: SERVER_DEFAULT_PATH,
      HOME: '/tmp/home',
      PYTHONSAFEPATH: '1',
    });
    expect(serverEnvironment({ PATH: workspace }, workspace).PATH).toBe(SERVER_DEFAULT_PATH);
  });
});

describe('${WORKSPACE}', () => {
  test("is the workspace folder in a stdio server's args and env, and not a secret", () => {
    const { config, secrets } = resolveSecrets(
      { command: 'node', args: ['server.js', '${WORKSPACE}'], env: { ROOT: '${WORKSPACE}/data' } },
      { WORKSPACE: '/the/worker/environment/is/not/read' },
      workspace,
    );
    expect(config).toEqual({ command: 'node', args: ['server.js', workspace], env: { ROOT: `${workspace}/data` } });
    expect(secrets).toEqual([]);
  });

  test('is left as written when no workspace is given, and refused in a remote server', () => {
    const { config } = resolveSecrets({ command: 'node', args: ['${WORKSPACE}'] }, {});
    expect(config).toEqual({ command: 'node', args: ['${WORKSPACE}'] });
    expect(() => resolveSecrets({ url: 'https://x.example/${WORKSPACE}' }, {}, workspace)).toThrow(MissingSecretError);
  });
});
