import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { PROMPT_CACHE_POLICIES, type PromptCachePolicy, type ProviderConfig } from '../activities/llm/types';
import { DEFAULT_NAMESPACE, DEFAULT_TASK_QUEUE } from '../workflows/contract';
import { parseWorkspaceRoots, type WorkspaceRoots } from '../activities/store/workspace-roots';
import { gitEmailDomainFromEnv } from '../activities/store/workspace-dir';
import { preparedStatementsFromEnv } from '../activities/store/db';
import { streamIdleTimeoutFromEnv } from '../activities/llm/adapter-support';
import {
  choiceFromEnv,
  ConfigurationError,
  hostFromEnv,
  hostPortFromEnv,
  portFromEnv,
  urlFromEnv,
} from '../activities/env-values';
import { logLevelFromEnv } from './logger';

export interface WorkerConfig {
  temporalAddress: string;
  namespace: string;
  taskQueue: string;
  /** Absent: the embedded PostgreSQL under `embeddedDbDir`. */
  databaseUrl?: string;
  dataDir: string;
  /** The embedded PostgreSQL's folder (`<DATA_DIR>/postgres`), used when DATABASE_URL is unset. */
  embeddedDbDir: string;
  /** AGENTS_WORKSPACE_ROOT: organisations' roots are `<it>/<org>`; agents naming no folder get `<it>/<org>/<id>`. */
  workspaceRoot: string;
  /**
   * Where workspace folders may lie (AGENTS_WORKSPACE_ROOT, AGENTS_WORKSPACE_ROOTS,
   * AGENTS_WORKSPACE_ALLOWED_ROOTS), validated here so a bad value stops the start naming it.
   */
  workspaceRoots: WorkspaceRoots;
  /** In priority order: the first is the default, the rest are fallbacks. */
  providers: ProviderConfig[];
  /** True when no provider key is set and the offline demo model answers. */
  demoModel: boolean;
  /** A workflow bundle built ahead of time (WORKFLOW_BUNDLE_PATH); absent: bundled when the worker starts. */
  workflowBundlePath?: string;
  /**
   * Worker versioning (TEMPORAL_DEPLOYMENT_NAME + TEMPORAL_WORKER_BUILD_ID): the worker polls as this
   * version of a Temporal Worker Deployment. Workflows auto-upgrade to the deployment's current version at
   * their next workflow task, so a previous release's worker never receives a history the current release
   * wrote (it could not replay its patches). Absent: unversioned, as before.
   */
  deployment?: { deploymentName: string; buildId: string };
}

/** `ANTHROPIC_PROMPT_CACHE`: absent keeps the adapter's default; an unknown value is refused, not ignored. */
function promptCachePolicyFromEnv(env: NodeJS.ProcessEnv): { promptCache?: PromptCachePolicy } {
  const promptCache = choiceFromEnv('ANTHROPIC_PROMPT_CACHE', PROMPT_CACHE_POLICIES, env);
  return promptCache ? { promptCache } : {};
}

/** `DATABASE_URL` as the message shows it: the password (anything before the last `@`) masked. */
const withoutCredentials = (url: string): string => {
  const at = url.lastIndexOf('@');
  if (at < 0) return url;
  return `${/^[a-z][a-z0-9+.-]*:\/\//i.exec(url)?.[0] ?? ''}***${url.slice(at)}`;
};

/**
 * `DATABASE_URL`: what node-postgres reads, a `postgres://` or `postgresql://` URL, `socket:/folder?db=…`
 * or `/folder database`; anything else would fail at the first connection with a message naming no variable.
 */
function databaseUrlFromEnv(env: NodeJS.ProcessEnv): string | undefined {
  const value = env.DATABASE_URL?.trim();
  if (!value) return undefined;
  let protocol: string | undefined;
  try {
    protocol = new URL(value).protocol;
  } catch {
    protocol = undefined;
  }
  if (value.startsWith('/') || ['postgres:', 'postgresql:', 'socket:'].includes(protocol ?? '')) return value;
  throw new ConfigurationError(
    'DATABASE_URL',
    withoutCredentials(value),
    'a PostgreSQL URL such as postgres://user:password@host:5432/database (or socket:/folder?db=name)',
  );
}

/**
 * The embedded PostgreSQL's settings, checked at start of every process that may open it (the
 * embedded server checks them again when it runs): a folder of PostgreSQL's programs, a user to run it as.
 */
function checkEmbeddedDatabaseSettings(env: NodeJS.ProcessEnv): void {
  const binaries = env.EMBEDDED_DB_BINARIES?.trim();
  if (binaries && !existsSync(path.join(path.resolve(binaries), 'bin', 'initdb')))
    throw new ConfigurationError(
      'EMBEDDED_DB_BINARIES',
      binaries,
      "a folder holding PostgreSQL's bin/initdb, bin/pg_ctl and bin/postgres, such as /usr/lib/postgresql/17",
    );
  const user = env.EMBEDDED_DB_USER?.trim();
  if (user) {
    const entry = readFileSync('/etc/passwd', 'utf8')
      .split('\n')
      .find((line) => line.startsWith(`${user}:`));
    if (!entry || Number(entry.split(':')[2]) === 0)
      throw new ConfigurationError(
        'EMBEDDED_DB_USER',
        user,
        `a user of this machine other than root (PostgreSQL refuses root)${entry ? '' : '; none has that name'}`,
      );
  }
}

/** `WORKFLOW_BUNDLE_PATH`: a file that exists, so a typo stops the start instead of the first workflow task. */
function workflowBundlePathFromEnv(env: NodeJS.ProcessEnv): string | undefined {
  const value = env.WORKFLOW_BUNDLE_PATH?.trim();
  if (!value) return undefined;
  if (!existsSync(value) || !statSync(value).isFile())
    throw new ConfigurationError(
      'WORKFLOW_BUNDLE_PATH',
      value,
      'the path of a workflow bundle file that exists (built by `npm run build`)',
    );
  return value;
}

/** The worker's own servers for an orchestrator and a scraper (`HEALTH_*`, `METRICS_*`); each off without its port. */
export interface WorkerServers {
  health?: { port: number; host: string };
  metrics?: { port: number; host: string };
}

/** Where the worker's health endpoint listens by default: every interface, so a kubelet reaches it. */
export const DEFAULT_HEALTH_HOST = '0.0.0.0';
/** Where the worker's metrics endpoint listens by default: loopback, so nothing is exposed unasked. */
export const DEFAULT_METRICS_HOST = '127.0.0.1';

export function workerServersFromEnv(env: NodeJS.ProcessEnv = process.env): WorkerServers {
  const healthPort = portFromEnv('HEALTH_PORT', env);
  const healthHost = hostFromEnv('HEALTH_HOST', env) ?? DEFAULT_HEALTH_HOST;
  const metricsPort = portFromEnv('METRICS_PORT', env);
  const metricsHost = hostFromEnv('METRICS_HOST', env) ?? DEFAULT_METRICS_HOST;
  return {
    ...(healthPort !== undefined ? { health: { port: healthPort, host: healthHost } } : {}),
    ...(metricsPort !== undefined ? { metrics: { port: metricsPort, host: metricsHost } } : {}),
  };
}

/**
 * Reads the configuration from the environment (see the README's table). Providers: Anthropic when
 * ANTHROPIC_API_KEY is set, OpenAI when OPENAI_API_KEY is set, an OpenAI-compatible server (Ollama,
 * vLLM, llama.cpp, OpenRouter) when OPENAI_COMPATIBLE_BASE_URL is set; none → the offline demo model.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): WorkerConfig {
  const dataDir = path.resolve(env.DATA_DIR ?? '.data');
  const workspaceRoots = parseWorkspaceRoots(env);
  const databaseUrl = databaseUrlFromEnv(env);
  if (!databaseUrl) checkEmbeddedDatabaseSettings(env);
  // Read where they are used, checked here so that every process refuses a bad one at start.
  preparedStatementsFromEnv(env);
  gitEmailDomainFromEnv(env);
  logLevelFromEnv(env);
  urlFromEnv('TEMPORAL_UI_URL', env);
  streamIdleTimeoutFromEnv(env);
  const providers: ProviderConfig[] = [];
  const promptCache = promptCachePolicyFromEnv(env);
  if (env.ANTHROPIC_API_KEY) {
    providers.push({
      name: 'anthropic',
      kind: 'anthropic',
      apiKey: env.ANTHROPIC_API_KEY,
      baseURL: urlFromEnv('ANTHROPIC_BASE_URL', env),
      ...promptCache,
    });
  }
  if (env.OPENAI_API_KEY) {
    providers.push({
      name: 'openai',
      kind: 'openai',
      apiKey: env.OPENAI_API_KEY,
      baseURL: urlFromEnv('OPENAI_BASE_URL', env),
    });
  }
  const compatibleBaseUrl = urlFromEnv('OPENAI_COMPATIBLE_BASE_URL', env);
  if (compatibleBaseUrl) {
    providers.push({
      name: env.OPENAI_COMPATIBLE_NAME ?? 'openai-compatible',
      kind: 'openai-compatible',
      apiKey: env.OPENAI_COMPATIBLE_API_KEY,
      baseURL: compatibleBaseUrl,
    });
  }
  // Unused base URLs are checked too: a typo must not wait for the day their key is set.
  urlFromEnv('ANTHROPIC_BASE_URL', env);
  urlFromEnv('OPENAI_BASE_URL', env);
  const llmProvider = choiceFromEnv('LLM_PROVIDER', ['demo'], env);
  const demoModel = providers.length === 0;
  // In production a missing API key is a mistake, not a wish to see the demo: the offline model would
  // answer every task with canned text while everything looks healthy. Only asking for it by name runs it.
  if (demoModel && env.NODE_ENV === 'production' && llmProvider !== 'demo') {
    throw new ConfigurationError(
      'NODE_ENV',
      env.NODE_ENV,
      'production only with an LLM provider, and no LLM provider is configured: set ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_COMPATIBLE_BASE_URL; ' +
        'to run the offline demo model on purpose, set LLM_PROVIDER=demo',
    );
  }
  if (demoModel) providers.push({ name: 'demo', kind: 'demo' });
  return {
    temporalAddress:
      hostPortFromEnv('TEMPORAL_ADDRESS', env, { portOptional: true, example: 'localhost:7233' }) ?? 'localhost:7233',
    namespace: env.TEMPORAL_NAMESPACE ?? DEFAULT_NAMESPACE,
    taskQueue: env.TEMPORAL_TASK_QUEUE ?? DEFAULT_TASK_QUEUE,
    databaseUrl,
    dataDir,
    embeddedDbDir: path.join(dataDir, 'postgres'),
    workspaceRoot: workspaceRoots.base!,
    workspaceRoots,
    providers,
    demoModel,
    workflowBundlePath: workflowBundlePathFromEnv(env),
    ...deploymentConfig(env),
  };
}

function deploymentConfig(env: NodeJS.ProcessEnv): Pick<WorkerConfig, 'deployment'> {
  const deploymentName = env.TEMPORAL_DEPLOYMENT_NAME?.trim();
  const buildId = env.TEMPORAL_WORKER_BUILD_ID?.trim();
  if (!deploymentName && !buildId) return {};
  if (!deploymentName || !buildId) {
    const [variable, value] = deploymentName
      ? ['TEMPORAL_DEPLOYMENT_NAME', deploymentName]
      : ['TEMPORAL_WORKER_BUILD_ID', buildId!];
    throw new ConfigurationError(
      variable,
      value,
      'worker versioning needs both TEMPORAL_DEPLOYMENT_NAME and TEMPORAL_WORKER_BUILD_ID (e.g. durable-agents and the release, 0.6.0+3f2c1ab); set both or neither',
    );
  }
  return { deployment: { deploymentName, buildId } };
}
