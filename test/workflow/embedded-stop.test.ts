import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  EMBEDDED_STOP_TIMEOUT_MS,
  embeddedPaths,
  embeddedServerStatus,
  ensureEmbeddedServer,
  stopEmbeddedServer,
} from '../../activities/store/embedded-server';
import { eventually } from '../support/eventually';

/**
 * `agents db stop` while a worker runs: the worker's pool starts the server again the moment it is down
 * (its next query does), so a new server's pid file appears at once. The stop must end when the server
 * it stopped has exited, not wait on the new one.
 */
describe('stopping the embedded server while another process starts it again', () => {
  let dir: string;
  beforeAll(() => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'da-embedded-stop-'));
    // As root, PostgreSQL runs as another user, who must be able to enter the folder (mkdtemp makes it 0700).
    chmodSync(dataDir, 0o755);
    dir = path.join(dataDir, 'postgres');
  });
  afterAll(async () => {
    await stopEmbeddedServer(dir);
    rmSync(path.dirname(dir), { recursive: true, force: true });
  });

  const postmasterPid = () =>
    Number(readFileSync(path.join(embeddedPaths(dir).cluster, 'postmaster.pid'), 'utf8').split('\n')[0]);

  test('the stop returns once its server exited, and the restarter brings it back at the same address', async () => {
    const { url } = await ensureEmbeddedServer(dir);
    // The restarter: what a running worker's pool does on every refused connection, without pause.
    let restarting = true;
    const restarts: string[] = [];
    const restarter = (async () => {
      while (restarting) {
        const server = await ensureEmbeddedServer(dir);
        if (server.started) restarts.push(server.url);
      }
    })();
    try {
      for (let round = 0; round < 3; round++) {
        const stopped = postmasterPid();
        const began = Date.now();
        expect(await stopEmbeddedServer(dir)).toBe(true);
        // pg_ctl's own wait would last its whole timeout here: the new server's pid file is there.
        expect(Date.now() - began).toBeLessThan(EMBEDDED_STOP_TIMEOUT_MS);
        // It removed its pid file last; the process itself is gone a moment later.
        await eventually(() => !processExists(stopped), 'the stopped postmaster to exit', 10_000, 20);
        const back = await eventually(() => embeddedServerStatus(dir), 'the restarter to start it again', 60_000);
        expect(back.url).toBe(url);
        expect(postmasterPid()).not.toBe(stopped);
      }
    } finally {
      restarting = false;
      await restarter;
    }
    // Every restart kept the address, and it was the restarter that brought it back each time.
    expect(restarts.length).toBeGreaterThanOrEqual(3);
    expect(new Set(restarts)).toEqual(new Set([url]));
  }, 240_000);

  test('a pid file left by a killed server is not a running server: stop says so, and the next start recovers', async () => {
    const { url } = await ensureEmbeddedServer(dir);
    const pid = postmasterPid();
    process.kill(pid, 'SIGKILL');
    await eventually(() => !processExists(pid), 'the killed server to be gone');
    expect(await stopEmbeddedServer(dir)).toBe(false);
    const again = await ensureEmbeddedServer(dir);
    expect(again).toEqual({ url, port: again.port, started: true });
  }, 240_000);
});

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
