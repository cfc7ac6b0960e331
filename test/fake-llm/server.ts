/**
 * A local HTTP server that speaks the Anthropic Messages and OpenAI Chat Completions protocols,
 * plays back scripted responses and records every request. Tests point the real SDKs at it
 * (`maxRetries: 0`), so our adapters are exercised end to end, streaming included.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  anthropicErrorBody,
  anthropicMessageJson,
  anthropicOpeningFrames,
  anthropicPingFrame,
  anthropicRequestIdHeader,
  anthropicStreamFrames,
} from './anthropic-protocol';
import {
  openAiCompletionJson,
  openAiErrorBody,
  openAiOpeningFrames,
  openAiRequestIdHeader,
  openAiStreamFrames,
} from './openai-protocol';
import { FakePromptCache, PromptCacheRequestError } from './prompt-cache';
import { DEFAULT_USAGE, type RenderContext } from './rendering';
import type {
  FakeLlmServer,
  FakeLlmServerOptions,
  FakeProtocol,
  FakeResponder,
  RecordedRequest,
  ScriptedErrorStatus,
  ScriptedResponse,
} from './types';

/** How long `waitForAbortedRequests` waits by default: a disconnect reaches the server in milliseconds. */
const DEFAULT_ABORT_WAIT_MS = 2_000;

/** Poll interval of `waitForAbortedRequests`; short, since tests wait on it. */
const ABORT_POLL_MS = 10;

const ROUTES: Record<string, FakeProtocol> = {
  '/v1/messages': 'anthropic',
  '/v1/chat/completions': 'openai',
};

function protocolOf(req: IncomingMessage): FakeProtocol | undefined {
  const path = (req.url ?? '').split('?')[0] ?? '';
  return req.method === 'POST' ? ROUTES[path] : undefined;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function startFakeLlmServer(options: FakeLlmServerOptions = {}): Promise<FakeLlmServer> {
  const queue: ScriptedResponse[] = [...(options.script ?? [])];
  let responder: FakeResponder | undefined = options.responder;
  const requests: RecordedRequest[] = [];
  let promptCache: FakePromptCache | undefined;
  let idCounter = 0;
  const nextId = (prefix: string) => `${prefix}_${++idCounter}`;

  function sendError(
    res: ServerResponse,
    protocol: FakeProtocol,
    status: ScriptedErrorStatus,
    message: string,
    headers: Record<string, string> = {},
  ) {
    const requestId = nextId('req_fake');
    const body = protocol === 'anthropic' ? anthropicErrorBody(status, message) : openAiErrorBody(status, message);
    const idHeader = protocol === 'anthropic' ? anthropicRequestIdHeader(requestId) : openAiRequestIdHeader(requestId);
    res.writeHead(status, { 'content-type': 'application/json', ...idHeader, ...headers });
    res.end(JSON.stringify(body));
  }

  /** Writes frames one by one, pausing `delayMs` between them; stops early if the client left. */
  async function writeFrames(res: ServerResponse, frames: string[], delayMs: number): Promise<void> {
    for (const [i, frame] of frames.entries()) {
      if (res.destroyed) return;
      res.write(frame);
      if (delayMs > 0 && i < frames.length - 1) await sleep(delayMs);
    }
  }

  async function reply(res: ServerResponse, record: RecordedRequest, scripted: ScriptedResponse): Promise<void> {
    const { protocol, body } = record;
    if (scripted.kind === 'reset') {
      res.socket?.destroy(); // the connection drops before any byte of the reply, as a reset does
      return;
    }
    if (scripted.kind === 'error') {
      sendError(res, protocol, scripted.status, scripted.message ?? `fake ${scripted.status} error`, scripted.headers);
      return;
    }
    if (protocol === 'anthropic' && promptCache && scripted.kind === 'message') {
      let cached;
      try {
        cached = promptCache.usageFor(body);
      } catch (error) {
        if (!(error instanceof PromptCacheRequestError)) throw error;
        sendError(res, protocol, 400, error.message);
        return;
      }
      record.promptCache = cached;
      scripted = {
        ...scripted,
        usage: {
          outputTokens: scripted.usage?.outputTokens ?? DEFAULT_USAGE.outputTokens,
          inputTokens: cached.inputTokens,
          cacheReadTokens: cached.cacheReadTokens,
          cacheWriteTokens: cached.cacheWriteTokens,
          cacheWrite1hTokens: cached.cacheWrite1hTokens,
        },
      };
    }
    const ctx: RenderContext = { model: typeof body.model === 'string' ? body.model : 'fake-model', nextId };
    const streaming = body.stream === true;
    const includeUsage = (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
    const idHeader =
      protocol === 'anthropic'
        ? anthropicRequestIdHeader(nextId('req_fake'))
        : openAiRequestIdHeader(nextId('req_fake'));

    if (!streaming) {
      if (scripted.kind === 'hang') return; // never answer; the 'close' listener records the disconnect
      const json = protocol === 'anthropic' ? anthropicMessageJson(scripted, ctx) : openAiCompletionJson(scripted, ctx);
      res.writeHead(200, { 'content-type': 'application/json', ...idHeader });
      res.end(JSON.stringify(json));
      return;
    }

    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...idHeader });
    if (scripted.kind === 'hang') {
      const opening =
        protocol === 'anthropic' ? anthropicOpeningFrames(undefined, ctx) : openAiOpeningFrames(ctx, includeUsage);
      await writeFrames(res, opening, 0);
      return; // keep the connection open until the client aborts or the server closes
    }
    const frames =
      protocol === 'anthropic' ? anthropicStreamFrames(scripted, ctx) : openAiStreamFrames(scripted, ctx, includeUsage);
    const delayMs = scripted.chunkDelayMs ?? 0;
    if (scripted.stallAfterEvents !== undefined) {
      await writeFrames(res, frames.slice(0, scripted.stallAfterEvents), delayMs);
      return; // silent from here until the client aborts or the server closes
    }
    if (scripted.pause) {
      const { afterEvents, ms, keepAliveEveryMs } = scripted.pause;
      await writeFrames(res, frames.slice(0, afterEvents), delayMs);
      const keepAlive = protocol === 'anthropic' ? anthropicPingFrame() : ': keep-alive\n\n';
      const resumeAt = Date.now() + ms;
      while (!res.destroyed && Date.now() < resumeAt) {
        await sleep(Math.min(keepAliveEveryMs ?? ms, resumeAt - Date.now()));
        if (keepAliveEveryMs !== undefined && !res.destroyed && Date.now() < resumeAt) res.write(keepAlive);
      }
      await writeFrames(res, frames.slice(afterEvents), delayMs);
    } else {
      await writeFrames(res, frames, delayMs);
    }
    if (!res.destroyed) res.end();
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const protocol = protocolOf(req);
    if (!protocol) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `fake LLM server: no route for ${req.method} ${req.url}` } }));
      return;
    }
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(await readBody(req)) as Record<string, unknown>;
    } catch (error) {
      sendError(res, protocol, 400, `fake LLM server: request body is not JSON (${String(error)})`);
      return;
    }
    const record: RecordedRequest = {
      protocol,
      path: req.url ?? '',
      headers: { ...req.headers },
      body,
      receivedAt: Date.now(),
      aborted: false,
    };
    requests.push(record);
    res.on('close', () => {
      if (!res.writableEnded) {
        record.aborted = true;
        record.abortedAt = Date.now();
      }
    });

    let scripted: ScriptedResponse | undefined;
    try {
      scripted = queue.shift() ?? responder?.(record);
    } catch (error) {
      sendError(res, protocol, 500, `fake LLM server: responder threw: ${String(error)}`);
      return;
    }
    if (!scripted) {
      sendError(
        res,
        protocol,
        500,
        `fake LLM server: script exhausted (request #${requests.length} to ${record.path}: no scripted response queued and no responder set)`,
      );
      return;
    }
    await reply(res, record, scripted);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `fake LLM server crashed: ${String(error)}` } }));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  const countAborted = () => requests.filter((r) => r.aborted).length;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    get abortedRequests() {
      return countAborted();
    },
    enqueue(...responses) {
      queue.push(...responses);
    },
    setResponder(next) {
      responder = next;
    },
    async waitForAbortedRequests(count, timeoutMs = DEFAULT_ABORT_WAIT_MS) {
      const deadline = Date.now() + timeoutMs;
      while (countAborted() < count) {
        if (Date.now() > deadline) {
          throw new Error(
            `fake LLM server: expected ${count} aborted request(s) within ${timeoutMs} ms, saw ${countAborted()}`,
          );
        }
        await sleep(ABORT_POLL_MS);
      }
    },
    simulatePromptCache(cacheOptions) {
      promptCache = new FakePromptCache(cacheOptions);
      return promptCache;
    },
    reset() {
      promptCache = undefined;
      queue.length = 0;
      responder = undefined;
      requests.length = 0;
    },
    close() {
      server.closeAllConnections();
      return new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
    },
  };
}
