/**
 * MCP servers serving Streamable HTTP on a free loopback port, each in its own process, as remote MCP
 * servers run: the tests reach them by URL only. The reference server
 * (`@modelcontextprotocol/server-everything`), and a misbehaving one built on the SDK.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { freeLoopbackPort } from '../../activities/store/db';

const EVERYTHING = path.resolve('node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const HOSTILE_HTTP = path.resolve('test/support/mcp-hostile-http-server.mjs');

export interface McpHttpServer {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  url: string;
  /** Requests the server logged receiving, by HTTP method (the reference server logs them). */
  received(method: 'POST' | 'GET' | 'DELETE'): number;
  /** Stops the server and waits until it is gone. */
  stop(): Promise<void>;
}

/** The reference server on `port` (a free one by default); resolves once it listens. */
export async function startEverythingHttp(port?: number): Promise<McpHttpServer> {
  const listenOn = port ?? (await freeLoopbackPort());
  return startListening([EVERYTHING, 'streamableHttp'], listenOn);
}

/** The misbehaving server (its `big` tool answers with 20 MB), answering with SSE streams or JSON bodies. */
export async function startHostileHttp(mode: 'sse' | 'json'): Promise<McpHttpServer> {
  const port = await freeLoopbackPort();
  return startListening([HOSTILE_HTTP, String(port), mode], port);
}

async function startListening(args: string[], port: number): Promise<McpHttpServer> {
  const child: ChildProcess = spawn(process.execPath, args, {
    env: { PATH: process.env.PATH ?? '', PORT: String(port) },
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
    child.once('exit', (code) => reject(new Error(`${path.basename(args[0]!)} exited with ${code}: ${stderr}`)));
  });
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    received: (method) => stdout.split(`Received MCP ${method} request`).length - 1,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    },
  };
}
