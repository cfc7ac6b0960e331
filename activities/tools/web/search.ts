/**
 * `web_search` providers: an HTTP search API the operator names (Brave Search's web endpoint, or a
 * SearXNG instance's JSON API). The endpoint is the operator's, so it is not subject to the fetch
 * address policy (a SearXNG instance often runs on the private network); the model only chooses the
 * query. Each provider's answer is reduced to title, URL and snippet.
 */
import type { SearchProviderConfig } from './config';

/** Results per search by default, and at most: enough to pick pages to read, small in the prompt. */
export const WEB_SEARCH_DEFAULT_RESULTS = 8;
export const WEB_SEARCH_MAX_RESULTS = 20;
/** A provider that has not answered by then fails the call (the model can retry). */
export const WEB_SEARCH_TIMEOUT_MS = 15_000;
/** Bytes of a provider's answer read at most: a page of results is a few dozen KB. */
const WEB_SEARCH_MAX_ANSWER_BYTES = 2 * 1024 * 1024;
/** Characters of a snippet kept. */
const SNIPPET_CHARS = 400;

export interface SearchResult {
  title: string;
  url: string;
  snippet: string;
}

export class WebSearchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WebSearchError';
  }
}

export async function searchWeb(
  provider: SearchProviderConfig,
  query: string,
  count: number,
  signal: AbortSignal,
): Promise<SearchResult[]> {
  const url = new URL(provider.url);
  const headers: Record<string, string> = { accept: 'application/json' };
  if (provider.kind === 'brave') {
    url.searchParams.set('q', query);
    url.searchParams.set('count', String(count));
    headers['x-subscription-token'] = provider.apiKey ?? '';
  } else {
    url.searchParams.set('q', query);
    url.searchParams.set('format', 'json');
    if (provider.apiKey) headers.authorization = `Bearer ${provider.apiKey}`;
  }
  let response: Response;
  try {
    response = await fetch(url, {
      headers,
      signal: AbortSignal.any([signal, AbortSignal.timeout(WEB_SEARCH_TIMEOUT_MS)]),
      redirect: 'error',
    });
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    const name =
      (error as Error).name === 'TimeoutError'
        ? `did not answer within ${WEB_SEARCH_TIMEOUT_MS / 1000} s`
        : ((error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message);
    throw new WebSearchError(`the ${provider.kind} search provider ${url.origin} failed: ${name}`);
  }
  const text = await readLimited(response);
  if (!response.ok)
    throw new WebSearchError(
      `the ${provider.kind} search provider answered HTTP ${response.status}${text ? `: ${text.slice(0, 200)}` : ''}`,
    );
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch {
    throw new WebSearchError(`the ${provider.kind} search provider answered something that is not JSON`);
  }
  const raw =
    provider.kind === 'brave'
      ? ((answer as { web?: { results?: unknown[] } }).web?.results ?? [])
      : ((answer as { results?: unknown[] }).results ?? []);
  if (!Array.isArray(raw)) throw new WebSearchError(`the ${provider.kind} search provider's answer has no result list`);
  const results: SearchResult[] = [];
  for (const item of raw) {
    const r = item as { title?: unknown; url?: unknown; description?: unknown; content?: unknown };
    if (typeof r.url !== 'string' || !/^https?:\/\//.test(r.url)) continue;
    const snippet = typeof r.description === 'string' ? r.description : typeof r.content === 'string' ? r.content : '';
    results.push({
      title: typeof r.title === 'string' ? r.title : r.url,
      url: r.url,
      snippet: stripTags(snippet).slice(0, SNIPPET_CHARS),
    });
    if (results.length >= count) break;
  }
  return results;
}

async function readLimited(response: Response): Promise<string> {
  if (!response.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.length;
    if (size > WEB_SEARCH_MAX_ANSWER_BYTES)
      throw new WebSearchError(`the search provider's answer is over ${WEB_SEARCH_MAX_ANSWER_BYTES} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Brave marks matches with <strong>; snippets are text. */
function stripTags(text: string): string {
  return text
    .replace(/<[^>]{0,200}>/g, '')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>');
}
