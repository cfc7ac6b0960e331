import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { isConfigurationError } from '../../activities/env-values';
import { streamIdleTimeoutFromEnv } from '../../activities/llm/adapter-support';
import { bwrapPathFromEnv, sandboxMode } from '../../activities/tools/shell/sandbox';
import { webToolsConfigFromEnv } from '../../activities/tools/web/config';
import { loadApiConfig } from '../../api/config';
import { ssoFromEnv } from '../../api/sso';
import { loadConfig, workerServersFromEnv } from '../../worker/config';
import { captureContentFromEnv } from '../../worker/genai-conventions';
import { runtimeTelemetryOptions, telemetryFromEnv } from '../../worker/telemetry';
import { tracingRequested } from '../../worker/tracing';

const ROOT = path.join(__dirname, '../..');

/**
 * How a bad value of a documented variable is refused: `bad` given to `read` must throw a
 * ConfigurationError (printed as one line, no stack, exit 1) naming the variable and the value, as
 * `shown` when the message masks a secret in it. Or why no value of it is bad: it takes any string.
 */
type Rule = { bad: string; read: (env: NodeJS.ProcessEnv) => unknown; shown?: string } | { anyString: string };

const config = (env: NodeJS.ProcessEnv) => loadConfig(env);
const api = (env: NodeJS.ProcessEnv) => loadApiConfig(env);
const sso = (env: NodeJS.ProcessEnv) =>
  ssoFromEnv({ OIDC_ISSUER: 'https://id.example.com', OIDC_CLIENT_ID: 'inbox', ...env });

/** One entry per variable of docs/configuration.md's table (a test below keeps the two lists equal). */
const VARIABLES: Record<string, Rule> = {
  // The API also refuses an address where no Temporal answers: test/api/config-errors.test.ts.
  TEMPORAL_ADDRESS: { bad: 'http://localhost:7233', read: config },
  TEMPORAL_NAMESPACE: { anyString: 'a namespace name; Temporal itself says whether it exists' },
  TEMPORAL_TASK_QUEUE: { anyString: 'any task-queue name is valid' },
  TEMPORAL_DEPLOYMENT_NAME: { bad: 'durable-agents', read: config }, // without a build id
  TEMPORAL_WORKER_BUILD_ID: { bad: '0.10.0+3f2c1ab', read: config }, // without a deployment name
  DATABASE_URL: { bad: 'localhost:5432/agents', read: config },
  DATABASE_PREPARED_STATEMENTS: { bad: 'false', read: config },
  DATA_DIR: { bad: '/etc/durable-agents', read: config },
  EMBEDDED_DB_USER: { bad: 'no-such-user-here', read: config },
  EMBEDDED_DB_HOME: { anyString: 'a folder, created when missing' },
  EMBEDDED_DB_BINARIES: { bad: '/nonexistent/postgresql/17', read: config },
  AGENTS_WORKSPACE_ROOT: { bad: '/usr', read: config },
  AGENTS_WORKSPACE_ROOTS: { bad: 'acme', read: config },
  AGENTS_WORKSPACE_ALLOWED_ROOTS: { bad: 'shared', read: config },
  AGENTS_GIT_EMAIL_DOMAIN: { bad: 'not a domain', read: config },
  AGENTS_FORK_WORKSPACE_ROOT: { anyString: 'a folder, created when missing' },
  AGENTS_SANDBOX: { bad: 'maybe', read: (env) => sandboxMode(env) },
  AGENTS_SANDBOX_BWRAP: { bad: '/nonexistent/bwrap', read: (env) => bwrapPathFromEnv(env) },
  WEB_FETCH: { bad: 'maybe', read: (env) => webToolsConfigFromEnv(env) },
  WEB_FETCH_ALLOW: { bad: '10.0.0.0/8,intranet', read: (env) => webToolsConfigFromEnv(env) },
  WEB_SEARCH_PROVIDER: { bad: 'google', read: (env) => webToolsConfigFromEnv(env) },
  WEB_SEARCH_URL: {
    bad: 'searxng:8080/search',
    read: (env) => webToolsConfigFromEnv({ WEB_SEARCH_PROVIDER: 'searxng', ...env }),
  },
  WEB_SEARCH_API_KEY: {
    anyString: 'a secret the provider checks (brave without one is refused as WEB_SEARCH_PROVIDER)',
  },
  ANTHROPIC_API_KEY: { anyString: 'a secret the provider checks' },
  ANTHROPIC_BASE_URL: { bad: 'api.anthropic.com', read: config },
  ANTHROPIC_PROMPT_CACHE: { bad: 'forever', read: config },
  OPENAI_API_KEY: { anyString: 'a secret the provider checks' },
  OPENAI_BASE_URL: { bad: 'ftp://api.openai.com/v1', read: config },
  OPENAI_COMPATIBLE_BASE_URL: { bad: 'localhost:11434/v1', read: config },
  OPENAI_COMPATIBLE_API_KEY: { anyString: 'a secret the server checks' },
  OPENAI_COMPATIBLE_NAME: { anyString: 'a display name' },
  LLM_PROVIDER: { bad: 'anthropic', read: config },
  NODE_ENV: {
    anyString: 'only "production" has a meaning here; other values are Node conventions (test, development)',
  },
  LLM_STREAM_IDLE_TIMEOUT_MS: { bad: 'soon', read: (env) => streamIdleTimeoutFromEnv(env) },
  HEALTH_PORT: { bad: '70000', read: (env) => workerServersFromEnv(env) },
  HEALTH_HOST: { bad: 'not a host', read: (env) => workerServersFromEnv(env) },
  LOG_LEVEL: { bad: 'verbose', read: config },
  TEMPORAL_UI_URL: { bad: 'localhost:8233', read: api },
  WORKFLOW_BUNDLE_PATH: { bad: '/nonexistent/workflow-bundle.js', read: config },
  API_HOST: { bad: 'http://0.0.0.0', read: api },
  API_PORT: { bad: 'abc', read: api },
  API_BODY_LIMIT_BYTES: { bad: '-1', read: api },
  API_RATE_LIMIT_PER_MINUTE: { bad: 'many', read: api },
  API_CALL_TIMEOUT_MS: { bad: '1.5', read: api },
  API_TRUST_PROXY: { bad: 'true', read: api },
  OTEL_EXPORTER_OTLP_ENDPOINT: { bad: 'collector:4318', read: (env) => tracingRequested(env) },
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: { bad: '/v1/traces', read: (env) => tracingRequested(env) },
  OTEL_EXPORTER_OTLP_PROTOCOL: { bad: 'grpc', read: (env) => tracingRequested(env) },
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: { bad: 'grpc', read: (env) => tracingRequested(env) },
  // Header values are often tokens: the message shows the names only.
  OTEL_EXPORTER_OTLP_HEADERS: {
    bad: 'api-key=s3cret,tenant',
    shown: 'api-key=…,tenant',
    read: (env) => tracingRequested(env),
  },
  OTEL_SERVICE_NAME: { anyString: 'a service name' },
  OTEL_TRACES_EXPORTER: { bad: 'zipkin', read: (env) => tracingRequested(env) },
  OTEL_SDK_DISABLED: { bad: 'yes', read: (env) => tracingRequested(env) },
  OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: { bad: 'collector:4318', read: (env) => runtimeTelemetryOptions(env) },
  OTEL_EXPORTER_OTLP_METRICS_HEADERS: {
    bad: 'Authorization',
    read: (env) => runtimeTelemetryOptions(env),
  },
  OTEL_METRIC_EXPORT_INTERVAL: { bad: '0', read: (env) => runtimeTelemetryOptions(env) },
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: { bad: '1', read: (env) => captureContentFromEnv(env) },
  DURABLE_AGENTS_METRICS: { bad: 'true', read: (env) => telemetryFromEnv(env) },
  DURABLE_AGENTS_METRICS_AGENT_SPEND: { bad: 'yes', read: (env) => telemetryFromEnv(env) },
  METRICS_PORT: { bad: '-1', read: (env) => workerServersFromEnv(env) },
  METRICS_HOST: { bad: '127.0.0.1:9464', read: (env) => workerServersFromEnv(env) },
  TEMPORAL_METRICS_BIND: { bad: '127.0.0.1', read: (env) => runtimeTelemetryOptions(env) },
  TEMPORAL_METRICS_URL: { bad: '127.0.0.1:9465/metrics', read: api },
  OIDC_ISSUER: { bad: 'id.example.com', read: (env) => ssoFromEnv({ OIDC_CLIENT_ID: 'inbox', ...env }) },
  OIDC_CLIENT_ID: { anyString: 'the identity provider checks it' },
  OIDC_CLIENT_SECRET: { anyString: 'a secret the identity provider checks' },
  OIDC_OPERATOR_ROLES: { bad: ' , ', read: sso },
  OIDC_SERVICE_ROLES: { anyString: "role or group names, the provider's to choose" },
  OIDC_READ_ROLES: { anyString: "role or group names, the provider's to choose" },
  OIDC_ROLE_CLAIM: { anyString: 'a claim name' },
  OIDC_GROUPS_CLAIM: { anyString: 'a claim name' },
  OIDC_ORG_CLAIM: { anyString: 'a claim name' },
  OIDC_SCOPES: { anyString: 'scope names, the provider checks them' },
  OIDC_REDIRECT_URL: { bad: '/inbox/sso/callback', read: sso },
};

/** Variables the product reads that are the system's, not the operator's settings. */
const SYSTEM_VARIABLES: Record<string, string> = {
  HOME: 'a home folder is never a workspace root',
  PATH: 'handed on to tool processes',
  USER: 'handed on to tool processes',
  PYTHONSAFEPATH: 'written, not read: set for MCP servers run by Python',
};

/** The variables named in the first column of docs/configuration.md's table. */
function documentedVariables(): string[] {
  const text = readFileSync(path.join(ROOT, 'docs/configuration.md'), 'utf8');
  const table = text.slice(text.indexOf('| variable'), text.indexOf('\n\n', text.indexOf('| variable')));
  return table
    .split('\n')
    .slice(2)
    .flatMap((row) => [...(row.split('|')[1] ?? '').matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!));
}

/**
 * The variables the product code reads: `env.NAME`, `env['NAME']`, a `…FromEnv('NAME')` reader, or a
 * constant naming one (`SANDBOX_SETTING = 'AGENTS_SANDBOX'`). Tests, scripts and benchmarks excluded.
 */
function variablesReadByTheCode(): string[] {
  const names = new Set<string>();
  for (const folder of ['activities', 'api', 'client', 'worker', 'workflows', 'schema', 'prompts']) {
    for (const entry of readdirSync(path.join(ROOT, folder), { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
      const source = readFileSync(path.join(entry.parentPath, entry.name), 'utf8');
      const patterns = [
        /\benv\.([A-Z][A-Z0-9_]+)/g,
        /\benv\[['"]([A-Z][A-Z0-9_]+)['"]\]/g,
        /FromEnv\(\s*['"]([A-Z][A-Z0-9_]+)['"]/g,
        /(?:SETTING|VARIABLE)\s*=\s*['"]([A-Z][A-Z0-9_]+)['"]/g,
      ];
      for (const pattern of patterns) for (const match of source.matchAll(pattern)) names.add(match[1]!);
    }
  }
  return [...names].sort();
}

describe('configuration variables', () => {
  const entries = Object.entries(VARIABLES);
  test.each(entries.filter(([, rule]) => 'bad' in rule))(
    '%s: a bad value is refused in one line naming the variable, the value and what is allowed',
    (variable, rule) => {
      const { bad, read, shown = bad } = rule as Extract<Rule, { bad: string }>;
      let thrown: unknown;
      try {
        read({ [variable]: bad });
      } catch (error) {
        thrown = error;
      }
      expect([isConfigurationError(thrown), (thrown as Error | undefined)?.message]).toEqual([
        true,
        expect.stringMatching(new RegExp(`^${variable}=${escape(JSON.stringify(shown))} is not allowed: \\S.{9,}$`)),
      ]);
      if (shown !== bad) expect((thrown as Error).message).not.toContain(bad);
    },
  );

  test('a DATABASE_URL that is refused is shown without its credentials', () => {
    expect(() => loadConfig({ DATABASE_URL: 'mysql://agents:s3cret@db.internal/agents' })).toThrow(
      'DATABASE_URL="mysql://***@db.internal/agents" is not allowed: a PostgreSQL URL',
    );
  });

  test('good values pass: each reader accepts what its row documents', () => {
    expect(
      loadConfig({
        TEMPORAL_ADDRESS: 'temporal.example.com',
        DATABASE_URL: 'postgresql://agents:pw@db:5432/agents?sslmode=require',
        DATABASE_PREPARED_STATEMENTS: 'off',
        LOG_LEVEL: 'warn',
        LLM_PROVIDER: 'demo',
        ANTHROPIC_BASE_URL: 'http://127.0.0.1:8080',
      }),
    ).toMatchObject({ temporalAddress: 'temporal.example.com', databaseUrl: expect.stringContaining('postgresql:') });
    expect(workerServersFromEnv({ HEALTH_PORT: '8080', HEALTH_HOST: '::', METRICS_PORT: '0' })).toEqual({
      health: { port: 8080, host: '::' },
      metrics: { port: 0, host: '127.0.0.1' },
    });
    expect(runtimeTelemetryOptions({ TEMPORAL_METRICS_BIND: '[::1]:9465' })).toMatchObject({
      metrics: { prometheus: { bindAddress: '[::1]:9465' } },
    });
    expect(
      runtimeTelemetryOptions({
        OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'http://collector:4318/v1/metrics',
        OTEL_EXPORTER_OTLP_HEADERS: 'Authorization=Bearer%20abc',
        OTEL_METRIC_EXPORT_INTERVAL: '500',
      }),
    ).toEqual({
      metrics: {
        otel: {
          url: 'http://collector:4318/v1/metrics',
          http: true,
          metricsExportInterval: 500,
          headers: { Authorization: 'Bearer abc' },
        },
      },
    });
    expect(loadApiConfig({ API_TRUST_PROXY: '1', API_RATE_LIMIT_PER_MINUTE: '0' })).toMatchObject({
      trustProxy: true,
      rateLimitPerMinute: 0,
    });
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' })).toBe(
      false,
    );
  });

  test('every variable that takes any string says why', () => {
    for (const [variable, rule] of entries.filter(([, r]) => 'anyString' in r))
      expect([variable, (rule as { anyString: string }).anyString.length > 10]).toEqual([variable, true]);
  });

  test('the table here and the table in docs/configuration.md list the same variables', () => {
    expect(Object.keys(VARIABLES).sort()).toEqual(documentedVariables().sort());
  });

  test('every variable the code reads is in docs/configuration.md (or is the system’s)', () => {
    const documented = new Set([...documentedVariables(), ...Object.keys(SYSTEM_VARIABLES)]);
    expect(variablesReadByTheCode().filter((name) => !documented.has(name))).toEqual([]);
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
