/** The API's settings from the environment (documented in the README's configuration table). */
import { DEFAULT_BODY_LIMIT_BYTES, DEFAULT_CALL_TIMEOUT_MS, DEFAULT_RATE_LIMIT_PER_MINUTE } from './server';
import { ssoFromEnv, type SsoOptions } from './sso';
import {
  hostFromEnv,
  hostPortFromEnv,
  portFromEnv,
  switchFromEnv,
  urlFromEnv,
  wholeNumberFromEnv,
} from '../activities/env-values';

export interface ApiConfig {
  host: string;
  port: number;
  bodyLimitBytes: number;
  rateLimitPerMinute: number;
  callTimeoutMs: number;
  temporalUiUrl: string;
  /** The Temporal runtime's Prometheus endpoint, served at /metrics/temporal (default: from TEMPORAL_METRICS_BIND when set). */
  temporalMetricsUrl?: string;
  /** Single sign-on to the inbox (`OIDC_*`), when an issuer is set. */
  sso?: SsoOptions;
  /** `API_TRUST_PROXY=1`: behind a TLS-terminating proxy, trust its forwarded protocol and host. */
  trustProxy: boolean;
}

/** The API's default port: free of Temporal's 7233/8233 and the common 3000/8080. */
export const DEFAULT_API_PORT = 8787;
/** Where the API listens by default: loopback, so nothing is exposed until the operator says so. */
export const DEFAULT_API_HOST = '127.0.0.1';

export function loadApiConfig(env: NodeJS.ProcessEnv = process.env): ApiConfig {
  const bind = hostPortFromEnv('TEMPORAL_METRICS_BIND', env, { example: '127.0.0.1:9465' });
  return {
    host: hostFromEnv('API_HOST', env) ?? DEFAULT_API_HOST,
    port: portFromEnv('API_PORT', env) ?? DEFAULT_API_PORT,
    bodyLimitBytes: wholeNumberFromEnv('API_BODY_LIMIT_BYTES', env, { unit: 'bytes' }) ?? DEFAULT_BODY_LIMIT_BYTES,
    rateLimitPerMinute: wholeNumberFromEnv('API_RATE_LIMIT_PER_MINUTE', env) ?? DEFAULT_RATE_LIMIT_PER_MINUTE,
    callTimeoutMs: wholeNumberFromEnv('API_CALL_TIMEOUT_MS', env, { unit: 'milliseconds' }) ?? DEFAULT_CALL_TIMEOUT_MS,
    temporalUiUrl: urlFromEnv('TEMPORAL_UI_URL', env) ?? 'http://localhost:8233',
    temporalMetricsUrl: urlFromEnv('TEMPORAL_METRICS_URL', env) ?? (bind ? `http://${bind}/metrics` : undefined),
    sso: ssoFromEnv(env),
    trustProxy: switchFromEnv('API_TRUST_PROXY', ['1', '0'], env) === true,
  };
}
