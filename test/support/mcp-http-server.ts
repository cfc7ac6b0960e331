/**
 * The reference MCP server (`@modelcontextprotocol/server-everything`) serving Streamable HTTP on a free
 * loopback port, in its own process, as a remote MCP server would run: the tests reach it by URL only.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { freeLoopbackPort } from '../../activities/store/db';

const EVERYTHING = path.resolve('node_modules/@modelcontextprotocol/server-everything/dist/index.js');

export interface EverythingHttpServer {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  url: string;
  /** Requests the server logged receiving, by HTTP method (`POST`, `GET`, `DELETE`). */
  received(method: 'POST' | 'GET' | 'DELETE'): number;
  /** Stops the server and waits until it is gone. */
  stop(): Promise<void>;
}

/** Starts the server on `port` (a free one by default); resolves once it listens. */
export async function startEverythingHttp(port?: number): Promise<EverythingHttpServer> {
  const listenOn = port ?? (await freeLoopbackPort());
  const child: ChildProcess = spawn(process.execPath, [EVERYTHING, 'streamableHttp'], {
    env: { PATH: process.env.PATH ?? '', PORT: String(listenOn) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  await new Promise<void>((resolve, reject) => {
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
      if (stderr.includes('listening on port')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`server-everything exited with ${code}: ${stderr}`)));
  });
  return {
    url: `http://127.0.0.1:${listenOn}/mcp`,
    received: (method) => stdout.split(`Received MCP ${method} request`).length - 1,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    },
  };
}
