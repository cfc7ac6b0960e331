import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureWorkspaceDir, InvalidWorkspaceDirError } from '../../activities/store/workspace-dir';
import {
  defaultWorkspaceDir,
  parseWorkspaceRoots,
  PRODUCT_CHECKOUT,
  WorkspaceRootsConfigError,
  workspacePlacementProblem,
} from '../../activities/store/workspace-roots';

/**
 * Where a workspace folder may lie, as a rule of paths: under the organisation's root or an allowed
 * root, never in the operating system's folders, a home's dot-folders, the data folder, the checkout,
 * a root itself or what contains one, whatever the operator configures.
 */
describe('the workspace placement rule', () => {
  const roots = parseWorkspaceRoots({
    AGENTS_WORKSPACE_ROOT: '/srv/ws',
    AGENTS_WORKSPACE_ROOTS: 'globex=/srv/globex',
    AGENTS_WORKSPACE_ALLOWED_ROOTS: '/mnt/shared, /var/lib/agents',
    DATA_DIR: '/srv/data',
  });
  const acme = { agentId: 'a1', org: 'acme' };
  const problem = (folder: string, owner = acme) => workspacePlacementProblem(folder, roots, owner);

  test.each([
    ['/srv/ws/acme/a1', 'under its organisation root, <base>/<org>'],
    ['/srv/ws/acme/team/a1', 'deeper under it'],
    ['/mnt/shared/a1', 'under an allowed root'],
    ['/var/lib/agents/a1', 'under an allowed root inside /var'],
  ])('%s is accepted (%s)', (folder) => {
    expect(problem(folder)).toBeUndefined();
  });

  test.each([
    ['/', /it is the filesystem root/],
    ['/etc', /it is \/etc, a folder of the operating system/],
    ['/etc/acme', /it is under \/etc, a folder of the operating system/],
    ['/usr/local/ws', /under \/usr, a folder of the operating system/],
    ['/bin/ws', /under \/bin/],
    ['/sbin/ws', /under \/sbin/],
    ['/lib64/ws', /under \/lib64, a folder of the operating system/],
    ['/boot/ws', /under \/boot/],
    ['/proc/1/ws', /under \/proc, a virtual filesystem of the kernel/],
    ['/var', /it is \/var, the operating system's folder for services' state/],
    ['/var/lib/postgresql', /under \/var, .* outside every workspace root/],
    ['/opt/app', /under \/opt, .* outside every workspace root/],
    ['/run/docker', /under \/run/],
    ['/root', /it is \/root, a home folder/],
    ['/root/.ssh', /it is \/root\/.ssh, a dot-folder of the home \/root/],
    ['/root/.anything/deep', /under \/root\/.anything, a dot-folder of the home \/root/],
    ['/home', /it is \/home, the folder of every user's home/],
    ['/home/x', /it is \/home\/x, a home folder/],
    ['/home/x/.config', /it is \/home\/x\/.config, a dot-folder of the home \/home\/x/],
    ['/home/x/.config/gh', /under \/home\/x\/.config, a dot-folder/],
    ['/srv/data', /it is the data folder \(DATA_DIR\), which holds the embedded database/],
    ['/srv/data/postgres', /it is \/srv\/data\/postgres, the embedded database's folder/],
    ['/srv/data/postgres/base', /under \/srv\/data\/postgres, the embedded database's folder/],
    ['/srv/data/other', /it is inside \/srv\/data, the data folder \(DATA_DIR\), outside the workspace roots there/],
    [PRODUCT_CHECKOUT, /it is the product's checkout \(its source code\)/],
    [path.join(PRODUCT_CHECKOUT, 'activities'), /inside .*, the product's checkout, outside the workspace roots there/],
    [path.dirname(PRODUCT_CHECKOUT), /it contains .*, the product's checkout/],
    ['/srv', /it contains \/srv\/data, the data folder/],
    ['/srv/ws', /it is \/srv\/ws, AGENTS_WORKSPACE_ROOT, itself/],
    ['/srv/ws/acme', /it is \/srv\/ws\/acme, the workspace root of organisation acme, itself/],
    ['/mnt/shared', /it is \/mnt\/shared, an allowed root \(AGENTS_WORKSPACE_ALLOWED_ROOTS\), itself/],
    ['/mnt', /it contains \/mnt\/shared, an allowed root/],
    ['/srv/globex/a1', /it lies under \/srv\/globex, the workspace root of organisation globex, not of acme/],
    ['/srv/ws/globex/a1', /it lies under \/srv\/ws\/globex, another organisation's root/],
    ['/srv/ws/a1', /it lies under \/srv\/ws\/a1, another organisation's root or another agent's folder/],
    ['/tmp/a1', /it is outside every workspace root/],
  ])('%s is refused: %s', (folder, reason) => {
    const answer = problem(folder);
    expect(answer).toMatch(reason);
    // Every refusal says where the folder must lie instead.
    expect(answer).toMatch(
      /; a workspace of organisation acme must lie under \/srv\/ws\/acme \(the workspace root of organisation acme\) or under an allowed root \(\/mnt\/shared, \/var\/lib\/agents\)$/,
    );
  });

  test("the default organisation keeps its agents' pre-organisation folders <base>/<agentId>, and only its own", () => {
    const a1 = { agentId: 'a1', org: 'default' };
    expect(problem('/srv/ws/a1', a1)).toBeUndefined();
    expect(problem('/srv/ws/default/a1', a1)).toBeUndefined();
    expect(problem('/srv/ws/a2', a1)).toMatch(/it lies under \/srv\/ws\/a2/);
    expect(problem('/srv/ws/a1/sub', a1)).toMatch(/it lies under \/srv\/ws\/a1/);
    expect(problem('/srv/ws/a1', a1)).toBeUndefined();
    // An agent named like the organisation cannot take the organisation's root as its legacy folder.
    expect(problem('/srv/ws/default', { agentId: 'default', org: 'default' })).toMatch(
      /it is \/srv\/ws\/default, the workspace root of organisation default, itself/,
    );
    expect(problem('/srv/ws/a2', a1)).toMatch(/or be \/srv\/ws\/a1 \(its folder from before organisations\)$/);
  });

  test("an organisation with its own root: that one, not <base>/<org>; another's allowed root does not reach it", () => {
    const globex = { agentId: 'g1', org: 'globex' };
    expect(problem('/srv/globex/g1', globex)).toBeUndefined();
    expect(problem('/srv/ws/globex/g1', globex)).toMatch(/it lies under \/srv\/ws\/globex/);
    const nested = parseWorkspaceRoots({
      AGENTS_WORKSPACE_ROOT: '/srv/ws',
      AGENTS_WORKSPACE_ROOTS: 'globex=/mnt/shared/globex',
      AGENTS_WORKSPACE_ALLOWED_ROOTS: '/mnt/shared',
      DATA_DIR: '/srv/data',
    });
    expect(workspacePlacementProblem('/mnt/shared/globex/x', nested, acme)).toMatch(
      /lies under \/mnt\/shared\/globex, the workspace root of organisation globex, not of acme/,
    );
    expect(workspacePlacementProblem('/mnt/shared/acme-stuff', nested, acme)).toBeUndefined();
  });

  test('a new agent gets <org root>/<agentId>; an organisation name that is not a folder name gets no derived root', () => {
    expect(defaultWorkspaceDir(roots, { agentId: 'a1', org: 'acme' })).toBe('/srv/ws/acme/a1');
    expect(defaultWorkspaceDir(roots, { agentId: 'a1', org: 'default' })).toBe('/srv/ws/default/a1');
    expect(defaultWorkspaceDir(roots, { agentId: 'g1', org: 'globex' })).toBe('/srv/globex/g1');
    expect(defaultWorkspaceDir(roots, { agentId: 'x', org: '..' })).toBeUndefined();
    expect(defaultWorkspaceDir(roots, { agentId: 'x', org: 'a/b' })).toBeUndefined();
    expect(problem('/srv/x', { agentId: 'x', org: '..' })).toMatch(/organisation \.\. .*it has none/);
  });

  test('the default layout: workspaces in <checkout>/.data/workspaces, the rest of the data folder and the checkout refused', () => {
    const data = path.join(PRODUCT_CHECKOUT, '.data');
    const layout = parseWorkspaceRoots({ DATA_DIR: data });
    const owner = { agentId: 'a1', org: 'default' };
    expect(layout.base).toBe(path.join(data, 'workspaces'));
    expect(workspacePlacementProblem(path.join(data, 'workspaces', 'default', 'a1'), layout, owner)).toBeUndefined();
    expect(workspacePlacementProblem(path.join(data, 'workspaces', 'a1'), layout, owner)).toBeUndefined();
    expect(workspacePlacementProblem(path.join(data, 'postgres', 'x'), layout, owner)).toMatch(/embedded database/);
    expect(workspacePlacementProblem(path.join(data, 'temporal'), layout, owner)).toMatch(
      /inside .*\.data, the data folder/,
    );
    expect(workspacePlacementProblem(path.join(PRODUCT_CHECKOUT, 'client'), layout, owner)).toMatch(/checkout/);
  });

  test('an allowed root above the data folder does not open it', () => {
    const wide = parseWorkspaceRoots({ DATA_DIR: '/tmp/d', AGENTS_WORKSPACE_ALLOWED_ROOTS: '/tmp' });
    const owner = { agentId: 'a1', org: 'default' };
    expect(workspacePlacementProblem('/tmp/elsewhere/a1', wide, owner)).toBeUndefined();
    expect(workspacePlacementProblem('/tmp/d/workspaces/default/a1', wide, owner)).toBeUndefined();
    expect(workspacePlacementProblem('/tmp/d/postgres/x', wide, owner)).toMatch(/embedded database's folder/);
    expect(workspacePlacementProblem('/tmp/d/other', wide, owner)).toMatch(/inside \/tmp\/d, the data folder/);
    expect(workspacePlacementProblem('/tmp/d', wide, owner)).toMatch(/it is the data folder/);
  });

  test.each([
    [
      { AGENTS_WORKSPACE_ROOTS: 'acme' },
      /^AGENTS_WORKSPACE_ROOTS="acme" is not allowed: "acme" is not ORG=\/folder; use comma-separated ORG=\/absolute\/folder pairs/,
    ],
    [
      { AGENTS_WORKSPACE_ROOTS: 'acme=srv/acme' },
      /^AGENTS_WORKSPACE_ROOTS="acme=srv\/acme" is not allowed: the root of acme, "srv\/acme", is not an absolute path/,
    ],
    [
      { AGENTS_WORKSPACE_ROOTS: 'acme=/etc/acme' },
      /^AGENTS_WORKSPACE_ROOTS="acme=\/etc\/acme" is not allowed: \/etc\/acme cannot be the workspace root of acme: it is under \/etc, a folder of the operating system; a root must be/,
    ],
    [{ AGENTS_WORKSPACE_ROOTS: 'acme=/srv/a,acme=/srv/b' }, /organisation acme is given two roots/],
    [
      { AGENTS_WORKSPACE_ROOTS: 'acme=/srv/a,globex=/srv/a/g' },
      /the roots of acme \(\/srv\/a\) and globex \(\/srv\/a\/g\) overlap/,
    ],
    [
      { AGENTS_WORKSPACE_ALLOWED_ROOTS: '/root/.ssh' },
      /^AGENTS_WORKSPACE_ALLOWED_ROOTS="\/root\/.ssh" is not allowed: \/root\/.ssh cannot be an allowed root: it is \/root\/.ssh, a dot-folder/,
    ],
    [{ AGENTS_WORKSPACE_ALLOWED_ROOTS: '/' }, /cannot be an allowed root: it is the filesystem root/],
    [{ AGENTS_WORKSPACE_ALLOWED_ROOTS: '/var' }, /cannot be an allowed root: it is \/var/],
    [
      { AGENTS_WORKSPACE_ALLOWED_ROOTS: 'shared' },
      /^AGENTS_WORKSPACE_ALLOWED_ROOTS="shared" is not allowed: "shared" is not an absolute path; use comma-separated absolute folders/,
    ],
    [
      { AGENTS_WORKSPACE_ROOT: '/usr' },
      /^AGENTS_WORKSPACE_ROOT="\/usr" is not allowed: \/usr cannot be the workspace root: it is \/usr, a folder of the operating system/,
    ],
    [
      { AGENTS_WORKSPACE_ROOT: '/srv/data', DATA_DIR: '/srv/data' },
      /cannot be the workspace root: it is the data folder/,
    ],
    [
      { AGENTS_WORKSPACE_ROOT: path.join(PRODUCT_CHECKOUT, 'ws') },
      /it is inside the product's checkout .*, outside the data folder/,
    ],
    [
      { DATA_DIR: '/etc/da' },
      /^DATA_DIR="\/etc\/da" is not allowed: \/etc\/da\/workspaces cannot be the workspace root: it is under \/etc/,
    ],
  ])('the variables are refused at start, naming the variable, its value and what is allowed: %j', (env, message) => {
    expect(() => parseWorkspaceRoots(env)).toThrow(WorkspaceRootsConfigError);
    expect(() => parseWorkspaceRoots(env)).toThrow(message);
  });

  test('a root under /var or /opt is accepted at start', () => {
    expect(parseWorkspaceRoots({ AGENTS_WORKSPACE_ALLOWED_ROOTS: '/var/lib/agents,/opt/ws' }).allowed).toEqual([
      '/var/lib/agents',
      '/opt/ws',
    ]);
  });
});

/** The validator applies the rule where the folder really is: `..` and links resolved, nothing created when refused. */
describe('ensureWorkspaceDir applies the rule to the real location', () => {
  let scratch: string;
  let root: string;
  const placement = () => ({
    agentId: 'a1',
    org: 'acme',
    roots: parseWorkspaceRoots({ AGENTS_WORKSPACE_ROOT: root, DATA_DIR: path.join(scratch, 'data') }),
  });
  beforeEach(() => {
    scratch = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'da-roots-')));
    root = path.join(scratch, 'ws');
    mkdirSync(path.join(root, 'acme'), { recursive: true });
  });
  afterEach(() => rmSync(scratch, { recursive: true, force: true }));

  test('a folder under the organisation root is created', async () => {
    await ensureWorkspaceDir(path.join(root, 'acme', 'a1'), placement());
    expect(existsSync(path.join(root, 'acme', 'a1'))).toBe(true);
  });

  test('a symbolic link under the root that leads to /etc is refused, and nothing is created in /etc', async () => {
    symlinkSync('/etc', path.join(root, 'acme', 'to-etc'));
    const target = path.join(root, 'acme', 'to-etc', 'da-ws-probe');
    await expect(ensureWorkspaceDir(target, placement())).rejects.toThrow(InvalidWorkspaceDirError);
    await expect(ensureWorkspaceDir(target, placement())).rejects.toThrow(
      /to-etc is a symbolic link into \/etc, so it is \/etc\/da-ws-probe, and is under \/etc, a folder of the operating system; a workspace of organisation acme must lie under .*\/ws\/acme/,
    );
    expect(existsSync('/etc/da-ws-probe')).toBe(false);
  });

  test('a path climbing out with .. is refused as written, and where it leads is refused too', async () => {
    const climbing = `${root}/acme/../../../../../../../../etc/da-ws-probe`;
    await expect(ensureWorkspaceDir(climbing, placement())).rejects.toThrow(
      /it contains "\.\.": give the folder as \/etc\/da-ws-probe instead/,
    );
    await expect(ensureWorkspaceDir(path.resolve(climbing), placement())).rejects.toThrow(
      /under \/etc, a folder of the operating system/,
    );
    expect(existsSync('/etc/da-ws-probe')).toBe(false);
  });

  test('a folder refused by the rule is not created, even where this process could write', async () => {
    const elsewhere = path.join(scratch, 'elsewhere', 'a1');
    await expect(ensureWorkspaceDir(elsewhere, placement())).rejects.toThrow(/it is outside every workspace root/);
    expect(existsSync(path.join(scratch, 'elsewhere'))).toBe(false);
  });

  test('a fork folder under an extra root of the worker is accepted; without it, refused', async () => {
    const forks = path.join(scratch, 'forks');
    await expect(ensureWorkspaceDir(path.join(forks, 'task-1'), placement())).rejects.toThrow(
      /outside every workspace root/,
    );
    await ensureWorkspaceDir(path.join(forks, 'task-1'), { ...placement(), extraRoots: [forks] });
    expect(existsSync(path.join(forks, 'task-1'))).toBe(true);
  });
});
