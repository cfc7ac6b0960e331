import path from 'node:path';
import { PROMPT_CACHE_POLICIES, type PromptCachePolicy, type ProviderConfig } from '../activities/llm/types';
import { DEFAULT_NAMESPACE, DEFAULT_TASK_QUEUE } from '../workflows/contract';
import { parseWorkspaceRoots, type WorkspaceRoots } from '../activities/store/workspace-roots';

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
function promptCachePolicyFromEnv(value: string | undefined): { promptCache?: PromptCachePolicy } {
  if (value === undefined || value === '') return {};
  if ((PROMPT_CACHE_POLICIES as readonly string[]).includes(value)) return { promptCache: value as PromptCachePolicy };
  throw new Error(
    `ANTHROPIC_PROMPT_CACHE=${value} is not a prompt-cache policy; use one of ${PROMPT_CACHE_POLICIES.join(', ')}`,
  );
}

/**
 * Reads the configuration from the environment (see the README's table). Providers: Anthropic when
 * ANTHROPIC_API_KEY is set, OpenAI when OPENAI_API_KEY is set, an OpenAI-compatible server (Ollama,
 * vLLM, llama.cpp, OpenRouter) when OPENAI_COMPATIBLE_BASE_URL is set; none → the offline demo model.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): WorkerConfig {
  const dataDir = path.resolve(env.DATA_DIR ?? '.data');
  const workspaceRoots = parseWorkspaceRoots(env);
  const providers: ProviderConfig[] = [];
  if (env.ANTHROPIC_API_KEY) {
    providers.push({
      name: 'anthropic',
      kind: 'anthropic',
      apiKey: env.ANTHROPIC_API_KEY,
      baseURL: env.ANTHROPIC_BASE_URL,
      ...promptCachePolicyFromEnv(env.ANTHROPIC_PROMPT_CACHE),
    });
  }
  if (env.OPENAI_API_KEY) {
    providers.push({ name: 'openai', kind: 'openai', apiKey: env.OPENAI_API_KEY, baseURL: env.OPENAI_BASE_URL });
  }
  if (env.OPENAI_COMPATIBLE_BASE_URL) {
    providers.push({
      name: env.OPENAI_COMPATIBLE_NAME ?? 'openai-compatible',
      kind: 'openai-compatible',
      apiKey: env.OPENAI_COMPATIBLE_API_KEY,
      baseURL: env.OPENAI_COMPATIBLE_BASE_URL,
    });
  }
  const demoModel = providers.length === 0;
  // In production a missing API key is a mistake, not a wish to see the demo: the offline model would
  // answer every task with canned text while everything looks healthy. Only asking for it by name runs it.
  if (demoModel && env.NODE_ENV === 'production' && env.LLM_PROVIDER !== 'demo') {
    throw new Error(
      'no LLM provider is configured (NODE_ENV=production): set ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_COMPATIBLE_BASE_URL; ' +
        'to run the offline demo model on purpose, set LLM_PROVIDER=demo',
    );
  }
  if (demoModel) providers.push({ name: 'demo', kind: 'demo' });
  return {
    temporalAddress: env.TEMPORAL_ADDRESS ?? 'localhost:7233',
    namespace: env.TEMPORAL_NAMESPACE ?? DEFAULT_NAMESPACE,
    taskQueue: env.TEMPORAL_TASK_QUEUE ?? DEFAULT_TASK_QUEUE,
    databaseUrl: env.DATABASE_URL || undefined,
    dataDir,
    embeddedDbDir: path.join(dataDir, 'postgres'),
    workspaceRoot: workspaceRoots.base!,
    workspaceRoots,
    providers,
    demoModel,
    workflowBundlePath: env.WORKFLOW_BUNDLE_PATH || undefined,
    ...deploymentConfig(env),
  };
}

function deploymentConfig(env: NodeJS.ProcessEnv): Pick<WorkerConfig, 'deployment'> {
  const deploymentName = env.TEMPORAL_DEPLOYMENT_NAME?.trim();
  const buildId = env.TEMPORAL_WORKER_BUILD_ID?.trim();
  if (!deploymentName && !buildId) return {};
  if (!deploymentName || !buildId) {
    throw new Error(
      'worker versioning needs both TEMPORAL_DEPLOYMENT_NAME and TEMPORAL_WORKER_BUILD_ID (e.g. durable-agents and the release, 0.6.0+3f2c1ab); set both or neither',
    );
  }
  return { deployment: { deploymentName, buildId } };
}
