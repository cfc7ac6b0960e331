/**
 * The web tools' configuration, read from the worker's environment once (or set by `configureWebTools`,
 * which tests and embedders use). Nothing here is stored in PostgreSQL or workflow history; the search
 * API key is a secret by its variable name, so the worker's redaction cuts it out of every tool result.
 *
 * | variable | meaning |
 * | --- | --- |
 * | `WEB_FETCH` | `off` withdraws `web_fetch` from every agent (default on) |
 * | `WEB_FETCH_ALLOW` | comma-separated CIDRs or addresses `web_fetch` may reach although they are loopback/private/link-local |
 * | `WEB_SEARCH_PROVIDER` | `brave` or `searxng`; unset: no `web_search` tool |
 * | `WEB_SEARCH_URL` | the provider's endpoint (required for searxng; brave defaults to its public API) |
 * | `WEB_SEARCH_API_KEY` | the provider's key (brave: required) |
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { ConfigurationError } from '../../env-values';
import { addressPolicy, type AddressPolicy } from './address-policy';

/** One answer of a resolver: an address and its family. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to every address it has; the fetch checks them all and connects to the first. */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export const SEARCH_PROVIDERS = ['brave', 'searxng'] as const;
export type SearchProviderKind = (typeof SEARCH_PROVIDERS)[number];

export interface SearchProviderConfig {
  kind: SearchProviderKind;
  url: string;
  apiKey?: string;
}

export interface WebToolsConfig {
  /** False: `web_fetch` is offered to nobody. */
  fetchEnabled: boolean;
  /** Addresses the operator lets `web_fetch` reach although the policy refuses their range. */
  policy: AddressPolicy;
  /** DNS: the system resolver by default; tests pass their own to script answers. */
  resolve: Resolver;
  /** Absent: no `web_search` tool is offered, and no prompt names it. */
  search?: SearchProviderConfig;
}

/** Brave's public web search endpoint. */
export const BRAVE_SEARCH_URL = 'https://api.search.brave.com/res/v1/web/search';

/** The operating system's resolver (getaddrinfo, so /etc/hosts counts), every address, in its order. */
export const systemResolver: Resolver = async (hostname) => {
  const answers = await dnsLookup(hostname, { all: true, order: 'verbatim' });
  return answers.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

/** Reads the configuration from an environment; a bad value is an error naming the variable and the fix. */
export function webToolsConfigFromEnv(env: NodeJS.ProcessEnv = process.env): WebToolsConfig {
  const fetchSetting = (env.WEB_FETCH ?? 'on').trim().toLowerCase();
  if (!['on', 'off', 'true', 'false', '1', '0'].includes(fetchSetting))
    throw new ConfigurationError('WEB_FETCH', env.WEB_FETCH ?? '', 'use on or off');
  const allowValue = env.WEB_FETCH_ALLOW ?? '';
  const allow = allowValue
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  let policy: AddressPolicy;
  try {
    policy = addressPolicy(allow);
  } catch (error) {
    throw new ConfigurationError('WEB_FETCH_ALLOW', allowValue, (error as Error).message);
  }
  const config: WebToolsConfig = {
    fetchEnabled: !['off', 'false', '0'].includes(fetchSetting),
    policy,
    resolve: systemResolver,
  };
  const provider = env.WEB_SEARCH_PROVIDER?.trim();
  if (provider) {
    if (!(SEARCH_PROVIDERS as readonly string[]).includes(provider))
      throw new ConfigurationError('WEB_SEARCH_PROVIDER', provider, `use one of ${SEARCH_PROVIDERS.join(', ')}`);
    const kind = provider as SearchProviderKind;
    const url = env.WEB_SEARCH_URL?.trim() || (kind === 'brave' ? BRAVE_SEARCH_URL : '');
    if (!url)
      throw new ConfigurationError(
        'WEB_SEARCH_PROVIDER',
        kind,
        "searxng needs WEB_SEARCH_URL (the instance's /search endpoint, e.g. http://searxng:8080/search)",
      );
    if (!/^https?:\/\/[^/\s]/.test(url))
      throw new ConfigurationError('WEB_SEARCH_URL', url, 'an http:// or https:// URL');
    const apiKey = env.WEB_SEARCH_API_KEY?.trim() || undefined;
    if (kind === 'brave' && !apiKey)
      throw new ConfigurationError(
        'WEB_SEARCH_PROVIDER',
        kind,
        'brave needs WEB_SEARCH_API_KEY (a Brave Search API subscription token)',
      );
    config.search = { kind, url, ...(apiKey ? { apiKey } : {}) };
  }
  return config;
}

let current: WebToolsConfig | undefined;

/** The configuration in force: the environment's, read at first use, unless `configureWebTools` set one. */
export function webToolsConfig(): WebToolsConfig {
  return (current ??= webToolsConfigFromEnv());
}

/** Replaces the configuration for this process (tests, embedders); `undefined` goes back to the environment's. */
export function configureWebTools(config: WebToolsConfig | undefined): void {
  current = config;
}
