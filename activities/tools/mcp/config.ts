/**
 * MCP server configuration, in the `mcpServers` shape desktop clients and IDEs use:
 *
 * ```json
 * { "mcpServers": {
 *     "files": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "${WORKSPACE}"] },
 *     "search": { "url": "https://search.example/mcp", "headers": { "Authorization": "Bearer ${SEARCH_TOKEN}" } } } }
 * ```
 *
 * Secret values are never written here: `${NAME}` references are resolved from the worker's own
 * environment when the session is opened, so the stored configuration (agent row, skill, history)
 * only ever holds the reference. The resolved values join the worker's redaction list.
 *
 * `${WORKSPACE}` is not a secret: in a stdio server's `args` and `env` it is the agent's workspace
 * folder, for a server that works on it. Servers start elsewhere (`server-start.ts`), so `.` is not it.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';

/** Server names become part of tool names (`mcp__<server>__<tool>`): short, and free of the separator. */
export const MCP_SERVER_NAME_PATTERN = /^[a-z0-9][a-z0-9-]{0,31}$/;

/** A tool call that runs longer than this is cancelled and reported as timed out (a server can hang). */
export const MCP_DEFAULT_CALL_TIMEOUT_MS = 60_000;
/** The longest per-call timeout an operator may set: a call that takes longer belongs in a task of its own. */
export const MCP_MAX_CALL_TIMEOUT_MS = 30 * 60_000;
/** How long a server gets to start and answer `initialize` before it is reported as not starting. */
export const MCP_CONNECT_TIMEOUT_MS = 20_000;

const tierSchema = z.enum(['allow', 'approval', 'deny']);

/** The operator's word on one tool: its tier, and whether a call cut off mid-run may be run again. */
const toolPolicySchema = z
  .object({
    tier: tierSchema.optional(),
    /** Overrides the server's `idempotentHint`: `true` lets an interrupted call run again, `false` never. */
    idempotent: z.boolean().optional(),
  })
  .strict();

/** The sandbox profile of a stdio server: what of the host it sees. */
const sandboxProfileSchema = z
  .object({
    /** The agent's workspace, read-write (default), read-only, or not mounted at all. */
    workspace: z.enum(['rw', 'ro', 'none']).optional(),
    /** Shares the host network (a server that calls an API); off by default. */
    network: z.boolean().optional(),
    /** Absolute host paths the server's program needs, bound read-only (its package, its interpreter). */
    readOnlyPaths: z.array(z.string().startsWith('/')).max(32).optional(),
  })
  .strict();

const envRecord = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string().max(4_000));

const common = {
  /** Per-call timeout in ms. */
  timeoutMs: z.number().int().positive().max(MCP_MAX_CALL_TIMEOUT_MS).optional(),
  /** The tier for every tool of the server, over the annotations' default. */
  tier: tierSchema.optional(),
  /** Per-tool overrides, by the server's own tool name. */
  tools: z.record(z.string().min(1).max(128), toolPolicySchema).optional(),
};

export const McpStdioServerSchema = z
  .object({
    command: z.string().min(1).max(1_000),
    args: z.array(z.string().max(4_000)).max(100).optional(),
    env: envRecord.optional(),
    sandbox: sandboxProfileSchema.optional(),
    ...common,
  })
  .strict();

export const McpHttpServerSchema = z
  .object({
    url: z.url({ protocol: /^https?$/ }),
    headers: z.record(z.string().min(1).max(200), z.string().max(4_000)).optional(),
    ...common,
  })
  .strict();

export const McpServerSchema = z.union([McpStdioServerSchema, McpHttpServerSchema]);
export type McpServerConfig = z.infer<typeof McpServerSchema>;
export type McpStdioServerConfig = z.infer<typeof McpStdioServerSchema>;
export type McpHttpServerConfig = z.infer<typeof McpHttpServerSchema>;

/** Servers by name: the value of `mcpServers`. */
export const McpServersSchema = z
  .record(
    z.string().regex(MCP_SERVER_NAME_PATTERN, 'server names are lowercase letters, digits and "-", at most 32'),
    McpServerSchema,
  )
  .refine((servers) => Object.keys(servers).length <= 32, { message: 'at most 32 MCP servers' });
export type McpServers = z.infer<typeof McpServersSchema>;

export function isStdio(config: McpServerConfig): config is McpStdioServerConfig {
  return 'command' in config;
}

/** A `${NAME}` reference the worker's environment does not define: the server is not started. */
export class MissingSecretError extends Error {
  override readonly name = 'MissingSecretError';
}

const REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** The reference to the agent's workspace folder (never read from the worker's environment). */
export const WORKSPACE_REFERENCE = 'WORKSPACE';

/**
 * The configuration with every `${NAME}` replaced by the worker's environment value (in `env`,
 * `headers`, `args` and `url`), and the values that were substituted (they are secrets from here on).
 * `${WORKSPACE}` in a stdio server's `args` and `env` becomes `workspace` (left as written without
 * one); anywhere else it is refused like a missing secret.
 */
export function resolveSecrets(
  config: McpServerConfig,
  env: NodeJS.ProcessEnv = process.env,
  workspace?: string,
): { config: McpServerConfig; secrets: string[] } {
  const secrets = new Set<string>();
  const stdio = isStdio(config);
  const resolve = (text: string): string =>
    text.replace(REFERENCE, (match, name: string) => {
      if (name === WORKSPACE_REFERENCE) {
        if (!stdio)
          throw new MissingSecretError(
            `\${${name}} is the agent's workspace, usable only in a stdio server's args and env`,
          );
        return workspace ?? match;
      }
      const value = env[name];
      if (value === undefined) throw new MissingSecretError(`\${${name}} is not set in the worker's environment`);
      if (value.length > 0) secrets.add(value);
      return value;
    });
  const record = (values: Record<string, string> | undefined) =>
    values ? Object.fromEntries(Object.entries(values).map(([k, v]) => [k, resolve(v)])) : undefined;
  const resolved: McpServerConfig = stdio
    ? { ...config, args: config.args?.map(resolve), ...(config.env ? { env: record(config.env) } : {}) }
    : { ...config, url: resolve(config.url), ...(config.headers ? { headers: record(config.headers) } : {}) };
  return { config: resolved, secrets: [...secrets] };
}

/** One pool entry per distinct configuration: the same server declared twice shares a session. */
export function configKey(name: string, config: McpServerConfig): string {
  return createHash('sha256').update(name).update('\0').update(JSON.stringify(config)).digest('hex');
}

/** The file a skill or organisation folder declares its servers in, as desktop clients write it. */
export const MCP_JSON_FILE = 'mcp.json';

/** The `mcpServers` of an `mcp.json` text, or the problems that make it unusable (nothing is half-read). */
export function parseMcpJson(text: string): { servers: McpServers } | { problems: string[] } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return { problems: [`${MCP_JSON_FILE} is not JSON: ${error instanceof Error ? error.message : String(error)}`] };
  }
  const parsed = z.object({ mcpServers: McpServersSchema }).strict().safeParse(json);
  if (!parsed.success)
    return {
      problems: parsed.error.issues.map((i) => `${MCP_JSON_FILE} ${i.path.join('.') || '(root)'}: ${i.message}`),
    };
  return { servers: parsed.data.mcpServers };
}
