import { readFileSync } from 'node:fs';
import path from 'node:path';
import { streamIdleTimeoutFromEnv } from '../../activities/llm/adapter-support';
import { sandboxMode } from '../../activities/tools/shell/sandbox';
import { loadApiConfig } from '../../api/config';
import { loadConfig } from '../../worker/config';
import { portFromEnv } from '../../activities/env-values';
import { runtimeTelemetryOptions } from '../../worker/telemetry';
import { otlpTraceExporterFromEnv } from '../../worker/tracing';

/** How a bad value of a documented variable is refused, or why no value of it is bad. */
type Rule =
  | { bad: string; read: (env: NodeJS.ProcessEnv) => unknown }
  | { process: string }
  | { anyString: string }
  | { unchecked: string };

const api = (env: NodeJS.ProcessEnv) => loadApiConfig(env);
const CHECKED_BY_PROCESS = { process: 'test/api/config-errors.test.ts (the process exits 1 with one line)' };

/** One entry per variable of docs/configuration.md's table (the last test keeps the two lists equal). */
const VARIABLES: Record<string, Rule> = {
  TEMPORAL_ADDRESS: CHECKED_BY_PROCESS,
  TEMPORAL_NAMESPACE: { anyString: 'a namespace name; Temporal itself says whether it exists' },
  TEMPORAL_TASK_QUEUE: { anyString: 'any task-queue name is valid' },
  DATABASE_URL: { unchecked: 'a malformed URL fails at connect, without naming the variable' },
  DATABASE_PREPARED_STATEMENTS: { unchecked: 'anything but "off" means on' },
  DATA_DIR: { anyString: 'a folder, created when missing' },
  EMBEDDED_DB_USER: { unchecked: 'checked when the embedded server starts (activities/store/embedded-server.ts)' },
  EMBEDDED_DB_HOME: { anyString: 'a folder, created when missing' },
  EMBEDDED_DB_BINARIES: { unchecked: 'a missing folder fails when the embedded server starts' },
  AGENTS_WORKSPACE_ROOT: { unchecked: 'checked at start by workspaceRootsFromEnv, which reads process.env' },
  AGENTS_WORKSPACE_ROOTS: { unchecked: 'checked at start by workspaceRootsFromEnv, which reads process.env' },
  AGENTS_WORKSPACE_ALLOWED_ROOTS: { unchecked: 'checked at start by workspaceRootsFromEnv, which reads process.env' },
  AGENTS_GIT_EMAIL_DOMAIN: { unchecked: "checked at an agent's first commit, not at start" },
  AGENTS_SANDBOX: { bad: 'maybe', read: (env) => sandboxMode(env) },
  AGENTS_SANDBOX_BWRAP: { unchecked: 'a missing binary is reported by the start-up sandbox check' },
  ANTHROPIC_API_KEY: { anyString: 'a secret the provider checks' },
  ANTHROPIC_BASE_URL: { unchecked: 'a malformed URL fails at the first call' },
  ANTHROPIC_PROMPT_CACHE: { bad: 'forever', read: (env) => loadConfig({ ...env, ANTHROPIC_API_KEY: 'k' }) },
  OPENAI_API_KEY: { anyString: 'a secret the provider checks' },
  OPENAI_BASE_URL: { unchecked: 'a malformed URL fails at the first call' },
  OPENAI_COMPATIBLE_BASE_URL: { unchecked: 'a malformed URL fails at the first call' },
  OPENAI_COMPATIBLE_API_KEY: { anyString: 'a secret the server checks' },
  OPENAI_COMPATIBLE_NAME: { anyString: 'a display name' },
  LLM_PROVIDER: { unchecked: 'only "demo" has a meaning; other values are ignored' },
  LLM_STREAM_IDLE_TIMEOUT_MS: { bad: 'soon', read: (env) => streamIdleTimeoutFromEnv(env) },
  HEALTH_PORT: { bad: '70000', read: (env) => portFromEnv('HEALTH_PORT', env) },
  HEALTH_HOST: { unchecked: 'a bad host fails at listen, without naming the variable' },
  LOG_LEVEL: { unchecked: 'pino rejects an unknown level with its own error' },
  TEMPORAL_UI_URL: { anyString: 'a link shown to people, never fetched' },
  WORKFLOW_BUNDLE_PATH: { unchecked: 'a missing file fails when the worker is created' },
  API_HOST: { unchecked: 'a bad host fails at listen, without naming the variable' },
  API_PORT: { bad: 'abc', read: api },
  API_BODY_LIMIT_BYTES: { bad: '-1', read: api },
  API_RATE_LIMIT_PER_MINUTE: { bad: 'many', read: api },
  API_CALL_TIMEOUT_MS: { bad: '1.5', read: api },
  API_TRUST_PROXY: { unchecked: 'anything but "1" means off' },
  OTEL_EXPORTER_OTLP_ENDPOINT: { unchecked: 'the OpenTelemetry exporter reads it' },
  '…_TRACES_ENDPOINT': { unchecked: 'the OpenTelemetry exporter reads it' },
  OTEL_EXPORTER_OTLP_PROTOCOL: { bad: 'grpc', read: (env) => otlpTraceExporterFromEnv(env) },
  OTEL_SERVICE_NAME: { anyString: 'a service name' },
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: { unchecked: 'anything but "true" means off' },
  DURABLE_AGENTS_METRICS: { unchecked: 'anything but "1" means off' },
  DURABLE_AGENTS_METRICS_AGENT_SPEND: { unchecked: 'anything but "1" means off' },
  METRICS_PORT: { bad: '-1', read: (env) => portFromEnv('METRICS_PORT', env) },
  METRICS_HOST: { unchecked: 'a bad host fails at listen, without naming the variable' },
  TEMPORAL_METRICS_BIND: { bad: '127.0.0.1', read: (env) => runtimeTelemetryOptions(env) },
  TEMPORAL_METRICS_URL: { unchecked: 'an unreachable URL answers 502 at /metrics/temporal' },
  OIDC_ISSUER: { unchecked: 'its discovery document is fetched at the first sign-in' },
  OIDC_CLIENT_ID: { anyString: 'the identity provider checks it' },
  OIDC_ROLE_CLAIM: { anyString: 'a claim name' },
  OIDC_GROUPS_CLAIM: { anyString: 'a claim name' },
};

/** The variables named in the first column of docs/configuration.md's table. */
function documentedVariables(): string[] {
  const text = readFileSync(path.join(__dirname, '../../docs/configuration.md'), 'utf8');
  const table = text.slice(text.indexOf('| variable'), text.indexOf('\n## '));
  return table
    .split('\n')
    .slice(2)
    .flatMap((row) => [...(row.split('|')[1] ?? '').matchAll(/`([A-Z_…]+)`/g)].map((m) => m[1]!));
}

describe('configuration variables', () => {
  const entries = Object.entries(VARIABLES);
  test.each(entries.filter(([, rule]) => 'bad' in rule))(
    '%s: a bad value is refused with the variable and the value named',
    (variable, rule) => {
      const { bad, read } = rule as Extract<Rule, { bad: string }>;
      expect(() => read({ [variable]: bad })).toThrow(variable);
      expect(() => read({ [variable]: bad })).toThrow(bad);
    },
  );
  // What is not refused at start yet is a list here, each with its reason, not a skipped test.
  test('every variable not checked yet says why', () => {
    const unchecked = entries.filter(([, rule]) => 'unchecked' in rule);
    for (const [variable, rule] of unchecked)
      expect([variable, (rule as { unchecked: string }).unchecked.length > 10]).toEqual([variable, true]);
  });

  test('the table here and the table in docs/configuration.md list the same variables', () => {
    expect(Object.keys(VARIABLES).sort()).toEqual(documentedVariables().sort());
  });
});
