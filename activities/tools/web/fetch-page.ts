/**
 * An HTTP GET that cannot be steered into the worker's own network. For each hop (the URL, then every
 * redirect) the host is resolved ONCE, every address of the answer is checked against the address
 * policy, and the socket connects to the checked address through a `lookup` that returns it: Node never
 * resolves the name a second time, so a DNS answer that changes between check and connect (rebinding)
 * changes nothing. Sockets are never pooled (`agent: false`), so no connection made for an earlier hop
 * or call is reused. Bodies are read up to a byte cap, decompressed under the same cap, within one
 * deadline for the whole chain.
 */
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import net from 'node:net';
import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import type { AddressPolicy } from './address-policy';
import type { Resolver } from './config';

/** Redirects followed at most: more is a loop or a trap, and browsers stop near 20 for sites we do not need. */
export const WEB_FETCH_MAX_REDIRECTS = 5;
/** Bytes of body read at most (after decompression): far more than any article; a larger file is cut. */
export const WEB_FETCH_MAX_BYTES = 5 * 1024 * 1024;
/** The whole fetch (every hop, headers and body) must finish within this; a slow server does not hold a step. */
export const WEB_FETCH_TIMEOUT_MS = 20_000;
/** URLs longer than this are refused: no page needs one, and a long query string is how data leaves. */
export const WEB_FETCH_MAX_URL_CHARS = 2_048;

/** A refusal or failure the model should see as it is: the message says what happened and what to do. */
export class WebFetchError extends Error {
  constructor(
    message: string,
    /** `blocked`: the policy refused an address or URL (nothing was sent there). */
    readonly kind: 'blocked' | 'invalid' | 'failed',
  ) {
    super(message);
    this.name = 'WebFetchError';
  }
}

export interface FetchOptions {
  policy: AddressPolicy;
  resolve: Resolver;
  signal: AbortSignal;
  maxBytes?: number;
  timeoutMs?: number;
  maxRedirects?: number;
}

export interface FetchedPage {
  /** The URL that answered (after redirects). */
  url: string;
  status: number;
  contentType: string;
  body: Buffer;
  /** True when the body was cut at the byte cap. */
  truncated: boolean;
  /** The URLs visited before the final one. */
  redirects: string[];
}

const USER_AGENT = 'durable-agents-web-fetch/1 (an AI agent reading a page for a task)';

export async function fetchPage(rawUrl: string, options: FetchOptions): Promise<FetchedPage> {
  const maxRedirects = options.maxRedirects ?? WEB_FETCH_MAX_REDIRECTS;
  const timeoutMs = options.timeoutMs ?? WEB_FETCH_TIMEOUT_MS;
  const signal = AbortSignal.any([options.signal, AbortSignal.timeout(timeoutMs)]);
  const redirects: string[] = [];
  let url = parseUrl(rawUrl);
  for (;;) {
    const target = await checkedTarget(url, options);
    const response = await request(url, target, signal, timeoutMs);
    const status = response.statusCode ?? 0;
    const location = response.headers.location;
    if (status >= 300 && status < 400 && location) {
      response.destroy();
      if (redirects.length >= maxRedirects)
        throw new WebFetchError(`too many redirects (more than ${maxRedirects}) starting at ${rawUrl}`, 'failed');
      redirects.push(url.href);
      let next: URL;
      try {
        next = new URL(location, url);
      } catch {
        throw new WebFetchError(
          `${url.href} redirected to an invalid URL ${JSON.stringify(location.slice(0, 200))}`,
          'failed',
        );
      }
      url = parseUrl(next.href, `${url.href} redirected to`);
      continue;
    }
    const { body, truncated } = await readBody(
      response,
      url,
      options.maxBytes ?? WEB_FETCH_MAX_BYTES,
      signal,
      timeoutMs,
    );
    return {
      url: url.href,
      status,
      contentType: String(response.headers['content-type'] ?? ''),
      body,
      truncated,
      redirects,
    };
  }
}

/** Only http(s), no credentials in the URL, a bounded length. */
function parseUrl(text: string, context?: string): URL {
  const where = context ? `${context} ` : '';
  if (text.length > WEB_FETCH_MAX_URL_CHARS)
    throw new WebFetchError(
      `${where}a URL of ${text.length} characters; at most ${WEB_FETCH_MAX_URL_CHARS} are accepted`,
      'invalid',
    );
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new WebFetchError(
      `${where}${JSON.stringify(text.slice(0, 200))} is not a valid absolute URL (give one like https://example.com/page)`,
      'invalid',
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new WebFetchError(`${where}${url.protocol} URLs are not fetched: only http and https`, 'blocked');
  if (url.username || url.password)
    throw new WebFetchError(`${where}a URL with credentials (user:password@) is refused`, 'blocked');
  return url;
}

/** Resolves the URL's host once and checks every address; the first is the one connected to. */
async function checkedTarget(url: URL, options: FetchOptions): Promise<{ address: string; family: 4 | 6 }> {
  // WHATWG parsing already turned 2130706433, 0x7f.1 and 0177.0.0.1 into 127.0.0.1, and brackets IPv6.
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const literal = net.isIP(host);
  let answers: Array<{ address: string; family: 4 | 6 }>;
  if (literal) answers = [{ address: host, family: literal === 6 ? 6 : 4 }];
  else {
    try {
      answers = await options.resolve(host);
    } catch (error) {
      throw new WebFetchError(
        `could not resolve ${host}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
        'failed',
      );
    }
    if (answers.length === 0) throw new WebFetchError(`${host} has no address`, 'failed');
  }
  for (const answer of answers) {
    const verdict = options.policy.check(answer.address);
    if (!verdict.ok) {
      const via = literal ? '' : ` (${host} resolves to ${answer.address})`;
      throw new WebFetchError(
        `blocked: ${url.origin} is a ${verdict.reason}${via}; web_fetch reaches only public addresses. ` +
          `Nothing was sent there. An operator can allow a range with WEB_FETCH_ALLOW.`,
        'blocked',
      );
    }
  }
  return answers[0]!;
}

function request(
  url: URL,
  target: { address: string; family: 4 | 6 },
  signal: AbortSignal,
  timeoutMs: number,
): Promise<http.IncomingMessage> {
  // The checked address, whatever name Node asks about: no second resolution can happen.
  const pinned: LookupFunction = (_hostname, lookupOptions, callback) => {
    if ((lookupOptions as { all?: boolean }).all)
      (callback as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [
        { address: target.address, family: target.family },
      ]);
    else callback(null, target.address, target.family);
  };
  const send = url.protocol === 'https:' ? https.request : http.request;
  return new Promise((resolve, reject) => {
    const req = send(url, {
      method: 'GET',
      agent: false,
      lookup: pinned,
      signal,
      headers: {
        'user-agent': USER_AGENT,
        accept: 'text/html,application/xhtml+xml,text/plain;q=0.9,text/*;q=0.8,*/*;q=0.5',
        'accept-encoding': 'gzip, deflate, br',
      },
    });
    req.on('response', resolve);
    req.on('error', (error) => reject(networkError(url, error, signal, timeoutMs)));
    req.end();
  });
}

async function readBody(
  response: http.IncomingMessage,
  url: URL,
  maxBytes: number,
  signal: AbortSignal,
  timeoutMs: number,
): Promise<{ body: Buffer; truncated: boolean }> {
  const encoding = String(response.headers['content-encoding'] ?? 'identity')
    .trim()
    .toLowerCase();
  let stream: Readable = response;
  if (encoding === 'gzip' || encoding === 'x-gzip') stream = response.pipe(zlib.createGunzip());
  else if (encoding === 'deflate') stream = response.pipe(zlib.createInflate());
  else if (encoding === 'br') stream = response.pipe(zlib.createBrotliDecompress());
  else if (encoding !== 'identity' && encoding !== '') {
    response.destroy();
    throw new WebFetchError(
      `the server sent the body in an unsupported encoding ${JSON.stringify(encoding)}`,
      'failed',
    );
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let truncated = false;
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      const room = maxBytes - size;
      if (chunk.length >= room) {
        chunks.push(chunk.subarray(0, room));
        size += room;
        truncated = chunk.length > room;
        if (truncated) break;
        continue;
      }
      chunks.push(chunk);
      size += chunk.length;
    }
  } catch (error) {
    throw networkError(url, error as Error, signal, timeoutMs);
  } finally {
    response.destroy();
    if (stream !== response) stream.destroy();
  }
  return { body: Buffer.concat(chunks), truncated };
}

function networkError(url: URL, error: Error, signal: AbortSignal, timeoutMs: number): Error {
  if (signal.aborted) {
    const reason = signal.reason as Error | undefined;
    // The activity's own cancellation is not a web error: it propagates as it is.
    if (reason?.name !== 'TimeoutError') return reason ?? error;
    return new WebFetchError(`${url.origin} did not answer within ${timeoutMs / 1000} s`, 'failed');
  }
  if (error instanceof WebFetchError) return error;
  const code = (error as NodeJS.ErrnoException).code;
  return new WebFetchError(`could not fetch ${url.origin}: ${code ?? error.message}`, 'failed');
}
