/**
 * MCP sessions live in the worker, not in a step: one client per server configuration (and, for a
 * stdio server, per workspace it is confined to), connected on first use and reused by every step and
 * task after it. A server that crashes or exits is reconnected on the next use, after a backoff that
 * grows with each failure in a row, so a broken server is not restarted in a tight loop. `tools/list`
 * is cached and refreshed when the server sends `notifications/tools/list_changed`.
 */
import { realpathSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike, Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolResultSchema,
  ToolListChangedNotificationSchema,
  type CallToolResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { registerSecretValues } from '../../security/secrets';
import { prepareCommand } from '../shell/sandbox';
import { isWithin, realOrSelf, serverEnvironment, serverStartDir } from './server-start';
import {
  configKey,
  isStdio,
  MCP_CONNECT_TIMEOUT_MS,
  resolveSecrets,
  type McpServerConfig,
  type McpStdioServerConfig,
} from './config';

/** First wait before reconnecting a server that failed; doubled per failure in a row. */
export const MCP_RECONNECT_BASE_MS = 500;
/** The longest wait between reconnection attempts: a server back up is used within this. */
export const MCP_RECONNECT_MAX_MS = 30_000;
/** The last characters of a stdio server's stderr kept to explain why it stopped. */
const STDERR_TAIL_CHARS = 2_000;
/** A long-lived server's CPU allowance: the shell tools' per-command limit would stop it mid-session. */
const SERVER_CPU_SECONDS = 24 * 3_600;
/** Sessions a worker keeps open; the least recently used one is closed past it. */
export const MCP_SESSIONS_MAX = 64;
/**
 * The largest JSON-RPC message read from a stdio server, and the largest reply to one request over HTTP.
 * Past it the connection is dropped (the session reconnects on the next call) and the call is answered
 * with this limit; results under it are cut and offloaded like any tool's output.
 */
export const MCP_MESSAGE_MAX_BYTES = 16 * 1024 * 1024;
/** Tools one server may list: more is not a tool set a model can choose from. */
export const MCP_TOOLS_PER_SERVER_MAX = 200;

const CLIENT_INFO = { name: 'durable-agents', version: '0.5.0' };

/** Why a server could not be used, with what it printed: for the model and the operator. */
export class McpServerUnavailableError extends Error {
  override readonly name = 'McpServerUnavailableError';
}

export interface CallOptions {
  signal: AbortSignal;
  timeoutMs: number;
  onProgress?: (progress: { progress: number; total?: number; message?: string }) => void;
}

export class McpSession {
  private client: Client | undefined;
  private connecting: Promise<Client> | undefined;
  private tools: Tool[] | undefined;
  private failures = 0;
  private retryAt = 0;
  private stderrTail = '';
  private closed = false;
  private lastTransportError: Error | undefined;
  /** How many times this session connected: reuse across steps shows as 1. */
  connects = 0;
  /** Notification and request methods the client sent, newest last (kept short, for tests and diagnosis). */
  readonly sent: string[] = [];

  constructor(
    readonly server: string,
    private readonly config: McpServerConfig,
    private readonly workspaceDir: string,
  ) {}

  /** The server's tools, from the cache unless the server said they changed. */
  async listTools(signal?: AbortSignal): Promise<Tool[]> {
    const client = await this.connected(signal);
    try {
      return await this.listToolsWith(client, signal);
    } catch (error) {
      if (!sessionLost(error)) throw error;
      this.dropClient(client);
      return await this.listToolsWith(await this.connected(signal), signal);
    }
  }

  private async listToolsWith(client: Client, signal?: AbortSignal): Promise<Tool[]> {
    if (this.tools) return this.tools;
    const tools: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor ? { cursor } : {}, { signal, timeout: this.answerTimeoutMs() });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor && tools.length < MCP_TOOLS_PER_SERVER_MAX);
    this.tools = tools.slice(0, MCP_TOOLS_PER_SERVER_MAX);
    return this.tools;
  }

  /**
   * Calls one tool. The activity's signal cancels it (the SDK sends `notifications/cancelled`), as
   * does the timeout; progress notifications reach `onProgress` and restart nothing.
   */
  async callTool(tool: string, args: Record<string, unknown>, options: CallOptions): Promise<CallToolResult> {
    const client = await this.connected(options.signal);
    try {
      return await this.callToolWith(client, tool, args, options);
    } catch (error) {
      if (!sessionLost(error)) throw error;
      // The server refused the request before running it, so sending it again in a new session runs it once.
      this.dropClient(client);
      return await this.callToolWith(await this.connected(options.signal), tool, args, options);
    }
  }

  private async callToolWith(
    client: Client,
    tool: string,
    args: Record<string, unknown>,
    options: CallOptions,
  ): Promise<CallToolResult> {
    this.lastTransportError = undefined;
    try {
      const result = await client.callTool({ name: tool, arguments: args }, CallToolResultSchema, {
        signal: options.signal,
        timeout: options.timeoutMs,
        ...(options.onProgress ? { onprogress: options.onProgress } : {}),
      });
      return result as CallToolResult;
    } catch (error) {
      // Set by the transport while the call was waiting (TypeScript cannot see that).
      const transportError = this.lastTransportError as Error | undefined;
      if (transportError && /exceeded maximum size/.test(transportError.message)) {
        throw new McpServerUnavailableError(
          `the server's reply was larger than ${MCP_MESSAGE_MAX_BYTES / (1024 * 1024)} MB, the most one message may carry; the session was closed and reconnects on the next call`,
        );
      }
      throw error;
    }
  }

  /** Forgets a client whose session the server lost, without counting a failure: the next use connects at once. */
  private dropClient(client: Client): void {
    // A concurrent call may already have replaced it with a new session.
    if (this.client !== client) return;
    this.client = undefined;
    this.tools = undefined;
    void client.close().catch(() => undefined);
  }

  async close(): Promise<void> {
    this.closed = true;
    const client = this.client;
    this.client = undefined;
    await client?.close().catch(() => undefined);
  }

  private async connected(signal?: AbortSignal): Promise<Client> {
    if (this.closed) throw new McpServerUnavailableError(`MCP server "${this.server}" was shut down with the worker`);
    if (this.client) return this.client;
    this.connecting ??= this.connect(signal).finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  private async connect(signal?: AbortSignal): Promise<Client> {
    const wait = this.retryAt - Date.now();
    if (wait > 0) await abortableDelay(wait, signal);
    const { config, secrets } = resolveSecrets(this.config, process.env, realOrSelf(this.workspaceDir));
    registerSecretValues(secrets);
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      this.tools = undefined;
    });
    client.onerror = (error) => {
      this.lastTransportError = error;
    };
    this.stderrTail = '';
    let transport: Transport;
    try {
      transport = isStdio(config)
        ? await this.stdioTransport(config)
        : new StreamableHTTPClientTransport(new URL(config.url), {
            requestInit: { headers: config.headers ?? {} },
            fetch: cappedFetch(MCP_MESSAGE_MAX_BYTES, (error) => {
              // As over stdio: the session is dropped, the waiting call answered, the next use reconnects.
              this.lastTransportError = error;
              void client.close();
            }),
          });
      this.watchSent(transport);
      await client.connect(transport, { signal, timeout: this.answerTimeoutMs() });
    } catch (error) {
      await client.close().catch(() => undefined);
      this.failed();
      if (signal?.aborted) throw error;
      const stderr = this.stderrTail.trim() ? ` Its error output: ${this.stderrTail.trim().slice(-500)}` : '';
      throw new McpServerUnavailableError(
        `MCP server "${this.server}" did not start or answer: ${errorText(error)}.${stderr}`,
      );
    }
    this.failures = 0;
    this.retryAt = 0;
    this.connects += 1;
    this.tools = undefined;
    client.onclose = () => {
      // A crash or exit: the next use reconnects (after the backoff, if it keeps failing).
      if (this.client === client) {
        this.client = undefined;
        this.tools = undefined;
        if (!this.closed) this.failed();
      }
    };
    this.client = client;
    return client;
  }

  /** How long `initialize` and `tools/list` may take: the connect limit, or the server's shorter call timeout. */
  private answerTimeoutMs(): number {
    return Math.min(this.config.timeoutMs ?? MCP_CONNECT_TIMEOUT_MS, MCP_CONNECT_TIMEOUT_MS);
  }

  private failed(): void {
    this.failures += 1;
    this.retryAt = Date.now() + Math.min(MCP_RECONNECT_BASE_MS * 2 ** (this.failures - 1), MCP_RECONNECT_MAX_MS);
  }

  /**
   * A stdio server runs inside the shell tools' sandbox, with the profile its configuration declares.
   * It starts in an empty folder the agent cannot write, never in the workspace (`server-start.ts`):
   * a module the agent wrote there is not what runs. `workspace: "none"` mounts no workspace at all.
   */
  private async stdioTransport(config: McpStdioServerConfig): Promise<Transport> {
    const program = resolveProgram(config.command);
    const workspace = realOrSelf(this.workspaceDir);
    if (isWithin(workspace, program))
      throw new McpServerUnavailableError(`MCP server command "${config.command}" is inside the agent's workspace`);
    const profile = config.sandbox ?? {};
    const access = profile.workspace ?? 'rw';
    const startDir = serverStartDir();
    const prepared = await prepareCommand(program, config.args ?? [], {
      // Something must be mounted as the workspace: for "none", the empty start folder, read-only.
      workspace: access === 'none' ? startDir : workspace,
      cwd: startDir,
      env: serverEnvironment(config.env, workspace),
      limits: { cpuSeconds: SERVER_CPU_SECONDS },
      readOnlyPaths: [program, startDir, ...(profile.readOnlyPaths ?? [])],
      workspaceReadOnly: access !== 'rw',
      network: profile.network === true,
    });
    const transport = new StdioClientTransport({
      command: prepared.file,
      args: prepared.args,
      env: prepared.env,
      cwd: prepared.cwd,
      stderr: 'pipe',
      maxBufferSize: MCP_MESSAGE_MAX_BYTES,
    });
    transport.stderr?.on('data', (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL_CHARS);
    });
    return transport;
  }

  private watchSent(transport: Transport): void {
    const send = transport.send.bind(transport);
    transport.send = async (message, options) => {
      if ('method' in message) {
        this.sent.push(message.method);
        if (this.sent.length > 100) this.sent.shift();
      }
      return send(message, options);
    };
  }
}

/** The pool of one worker. */
export class McpSessionPool {
  private readonly sessions = new Map<string, McpSession>();

  session(server: string, config: McpServerConfig, workspaceDir: string): McpSession {
    const key = `${configKey(server, config)}\0${isStdio(config) ? workspaceDir : ''}`;
    let session = this.sessions.get(key);
    if (session) {
      // Most recently used last, so the oldest is the one closed when the pool is full.
      this.sessions.delete(key);
      this.sessions.set(key, session);
      return session;
    }
    session = new McpSession(server, config, workspaceDir);
    this.sessions.set(key, session);
    if (this.sessions.size > MCP_SESSIONS_MAX) {
      const [oldestKey, oldest] = this.sessions.entries().next().value!;
      this.sessions.delete(oldestKey);
      void oldest.close();
    }
    return session;
  }

  /** Every open session, for tests and diagnosis. */
  all(): McpSession[] {
    return [...this.sessions.values()];
  }

  async closeAll(): Promise<void> {
    const sessions = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.all(sessions.map((s) => s.close()));
  }
}

/** The worker's pool. */
export const mcpSessions = new McpSessionPool();

/** The program's absolute path on the host (looked up on the worker's PATH), bound into the sandbox read-only. */
function resolveProgram(command: string): string {
  const candidates = command.includes('/')
    ? [command]
    : (process.env.PATH ?? '')
        .split(':')
        .filter(Boolean)
        .map((dir) => `${dir}/${command}`);
  for (const candidate of candidates) {
    try {
      return realpathSync(candidate);
    } catch {
      // Not in this directory.
    }
  }
  throw new McpServerUnavailableError(`MCP server command "${command}" was not found on the worker's PATH`);
}

/**
 * `fetch` whose answers to POSTs (a request's reply, with its progress when the server streams it) stop
 * with an error past `maxBytes`, so a remote server cannot make the worker buffer a reply of any size.
 * The standing GET stream of server notifications is left alone: it is long-lived by design.
 */
function cappedFetch(maxBytes: number, onOversize: (error: Error) => void): FetchLike {
  return async (url, init) => {
    const response = await fetch(url, init);
    if (init?.method !== 'POST' || !response.body) return response;
    let seen = 0;
    const capped = response.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          seen += chunk.byteLength;
          if (seen <= maxBytes) return controller.enqueue(chunk);
          const error = new Error(`the HTTP reply exceeded maximum size of ${maxBytes} bytes`);
          onOversize(error);
          controller.error(error);
        },
      }),
    );
    return new Response(capped, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}

function abortableDelay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * True when a Streamable HTTP server no longer knows the session (it restarted, or expired the
 * session): the spec's 404, or the 400 that servers built on the SDK's examples answer an unknown
 * session id with. The server did not run the request, and the spec asks the client to open a new
 * session. Without this, a remote server's restart would fail every later call until the worker restarts.
 */
function sessionLost(error: unknown): boolean {
  if (!(error instanceof StreamableHTTPError)) return false;
  return error.code === 404 || (error.code === 400 && /session/i.test(error.message));
}

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
