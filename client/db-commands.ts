import type { Command } from 'commander';
import { embeddedServerStatus, ensureEmbeddedServer, stopEmbeddedServer } from '../activities/store/embedded-server';
import { loadConfig } from '../worker/config';

/**
 * `agents db status|start|stop`: the embedded PostgreSQL that every process shares when DATABASE_URL
 * is unset. It keeps running between processes (so its address never changes under a running API or
 * CLI); `stop` ends it with a checkpoint, and the next process to need it starts it again.
 */
export function addDbCommands(program: Command): void {
  const db = program.command('db').description('the embedded PostgreSQL (used when DATABASE_URL is unset)');
  const embeddedOnly = () => {
    const config = loadConfig();
    if (config.databaseUrl) throw new Error('DATABASE_URL is set: this process uses that server, not the embedded one');
    return config.embeddedDbDir;
  };
  db.command('status').action(async () => {
    const dir = embeddedOnly();
    const status = await embeddedServerStatus(dir);
    console.log(
      status
        ? `running at ${status.url} (data in ${dir})`
        : `not running (data in ${dir}); the next process that needs it starts it`,
    );
  });
  db.command('start').action(async () => {
    const dir = embeddedOnly();
    const server = await ensureEmbeddedServer(dir);
    console.log(`${server.started ? 'started' : 'already running'} at ${server.url} (data in ${dir})`);
  });
  db.command('stop').action(async () => {
    const dir = embeddedOnly();
    console.log((await stopEmbeddedServer(dir)) ? `stopped (data in ${dir})` : `was not running (data in ${dir})`);
  });
}
