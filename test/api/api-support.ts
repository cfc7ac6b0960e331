/** Shared by the API tests: an API server in front of a harness, with one token per scope. */
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { buildApi, type ApiOptions, type ApiServer } from '../../api/server';
import { createToken, type TokenScope } from '../../api/tokens';
import { PLATFORM } from '../../activities/store/tenancy';
import type { Harness } from '../support/harness';
import { checkContract, recordResponses } from './contract';

export interface TestApi {
  url: string;
  app: ApiServer;
  /** One token per scope, each acting for the default organisation (as every token did before organisations). */
  tokens: Record<TokenScope, string>;
  /** A platform token (scope operator, organisation null): the only one that reaches every organisation. */
  platformToken: string;
  /** Tokens of another organisation, made on demand and kept per organisation and scope. */
  orgToken(org: string, scope?: TokenScope): Promise<string>;
  /** The tokens' names (what the API records as `createdBy`, `from`, `decidedBy`). */
  tokenNames: Record<TokenScope, string>;
  /** A request with a token (default operator) and a JSON body. */
  call(
    method: string,
    path: string,
    options?: { token?: string | null; body?: unknown; rawBody?: string; headers?: Record<string, string> },
  ): Promise<{ status: number; body: any; headers: Headers }>;
  /** What the API logged (failures only, unless the test passed its own logger). */
  logLines(): string[];
  close(): Promise<void>;
}

let tokenCounter = 0;

export async function startTestApi(
  h: Harness,
  { port = 0, ...options }: Partial<ApiOptions> & { port?: number } = {},
): Promise<TestApi> {
  // The API's failure log is kept here, not printed: tests print nothing on success, and some read it.
  const logged: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logged.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  const workspaceRoot = mkdtempSync(path.join(os.tmpdir(), 'da-api-ws-'));
  const app = await buildApi({
    client: h.client,
    db: h.db.db,
    databaseUrl: h.db.url,
    // Beside the harness's folder, which tests give agents as their workspace: a workspace root, or a
    // folder that contains one, cannot be an agent's workspace (activities/store/workspace-roots.ts).
    workspaceRoot,
    logger: { stream, where: 'the test log', level: 'error' },
    ...options,
  });
  // Every response this API sends is checked against its published spec when it closes.
  const responses = recordResponses(app);
  await app.listen({ host: '127.0.0.1', port });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const suffix = `${process.pid}-${++tokenCounter}-${Date.now()}`;
  const tokenNames = { operator: `operator-${suffix}`, service: `service-${suffix}`, read: `read-${suffix}` };
  const tokens = {
    operator: (await createToken(h.db.db, tokenNames.operator, 'operator')).token,
    service: (await createToken(h.db.db, tokenNames.service, 'service')).token,
    read: (await createToken(h.db.db, tokenNames.read, 'read')).token,
  };
  const platformToken = (await createToken(h.db.db, `platform-${suffix}`, 'operator', { org: PLATFORM })).token;
  const orgTokens = new Map<string, string>();
  return {
    url,
    app,
    tokens,
    platformToken,
    async orgToken(org, scope = 'operator') {
      const key = `${org}/${scope}`;
      if (!orgTokens.has(key))
        orgTokens.set(key, (await createToken(h.db.db, `${scope}-${org}-${suffix}`, scope, { org })).token);
      return orgTokens.get(key)!;
    },
    tokenNames,
    async call(method, path, opts = {}) {
      const token = opts.token === undefined ? tokens.operator : opts.token;
      const headers: Record<string, string> = { ...opts.headers };
      if (token) headers.authorization = `Bearer ${token}`;
      let body: string | undefined;
      if (opts.rawBody !== undefined) body = opts.rawBody;
      else if (opts.body !== undefined) body = JSON.stringify(opts.body);
      if (body !== undefined) headers['content-type'] ??= 'application/json';
      const response = await fetch(`${url}${path}`, { method, headers, body });
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // Not JSON (HTML, metrics): keep the text.
      }
      return { status: response.status, body: parsed, headers: response.headers };
    },
    logLines: () => [...logged],
    async close() {
      await app.closeStreams();
      try {
        await checkContract(url, responses);
      } finally {
        await app.close();
        rmSync(workspaceRoot, { recursive: true, force: true });
      }
    },
  };
}

/** Reads a Server-Sent Events stream (a GET, or a POST with a JSON body); `next` resolves with the next message (or `end`). */
export function readSse(url: string, token: string, headers: Record<string, string> = {}, post?: { body: unknown }) {
  const controller = new AbortController();
  const queue: Array<{ id?: string; event?: string; data: any }> = [];
  const waiters: Array<() => void> = [];
  let ended = false;
  const init = post ? { method: 'POST', body: JSON.stringify(post.body) } : {};
  const contentType: Record<string, string> = post ? { 'content-type': 'application/json' } : {};
  const opened = fetch(url, {
    ...init,
    headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', ...contentType, ...headers },
    signal: controller.signal,
  }).then(async (response) => {
    if (response.status !== 200) throw new Error(`SSE ${url} answered ${response.status}: ${await response.text()}`);
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const frame = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const message: { id?: string; event?: string; data?: string } = {};
          for (const line of frame.split('\n')) {
            if (line.startsWith(':')) continue;
            const [field, ...rest] = line.split(':');
            const value = rest.join(':').replace(/^ /, '');
            if (field === 'id' || field === 'event' || field === 'data') message[field] = value;
          }
          if (message.data === undefined) continue;
          queue.push({ id: message.id, event: message.event, data: JSON.parse(message.data) });
          waiters.splice(0).forEach((w) => w());
        }
      }
    } catch (error) {
      if (!controller.signal.aborted) throw error;
    } finally {
      ended = true;
      waiters.splice(0).forEach((w) => w());
    }
  });
  opened.catch(() => undefined);
  return {
    opened,
    /** The next message; undefined once the stream has ended. */
    async next(timeoutMs = 30_000): Promise<{ id?: string; event?: string; data: any } | undefined> {
      const deadline = Date.now() + timeoutMs;
      while (queue.length === 0 && !ended) {
        if (Date.now() > deadline) throw new Error(`no SSE message from ${url} within ${timeoutMs} ms`);
        await Promise.race([
          new Promise<void>((r) => waiters.push(r)),
          new Promise((r) => setTimeout(r, 200)),
          opened.then(() => undefined),
        ]);
      }
      return queue.shift();
    },
    close: () => controller.abort(),
  };
}

/** The secret part of a `da_<id>_<secret>` token (the secret itself may contain `_`). */
export function tokenSecret(token: string): string {
  return token.slice('da_'.length + 12 + 1);
}
