/** The API's settings from the environment (documented in the README's configuration table). */
import { DEFAULT_BODY_LIMIT_BYTES, DEFAULT_CALL_TIMEOUT_MS, DEFAULT_RATE_LIMIT_PER_MINUTE } from './server';
import { ssoFromEnv, type SsoOptions } from './sso';
import { ConfigurationError, portFromEnv } from '../activities/env-values';

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

export function loadApiConfig(env: NodeJS.ProcessEnv = process.env): ApiConfig {
  const int = (name: string, fallback: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < 0) throw new ConfigurationError(name, raw, 'a non-negative integer');
    return value;
  };
  return {
    host: env.API_HOST ?? '127.0.0.1',
    port: portFromEnv('API_PORT', env) ?? DEFAULT_API_PORT,
    bodyLimitBytes: int('API_BODY_LIMIT_BYTES', DEFAULT_BODY_LIMIT_BYTES),
    rateLimitPerMinute: int('API_RATE_LIMIT_PER_MINUTE', DEFAULT_RATE_LIMIT_PER_MINUTE),
    callTimeoutMs: int('API_CALL_TIMEOUT_MS', DEFAULT_CALL_TIMEOUT_MS),
    temporalUiUrl: env.TEMPORAL_UI_URL ?? 'http://localhost:8233',
    temporalMetricsUrl:
      env.TEMPORAL_METRICS_URL ||
      (env.TEMPORAL_METRICS_BIND ? `http://${env.TEMPORAL_METRICS_BIND}/metrics` : undefined),
    sso: ssoFromEnv(env),
    trustProxy: env.API_TRUST_PROXY === '1',
  };
}
