import { createHash } from 'node:crypto';
import path from 'node:path';
import type { Kysely } from 'kysely';
import { z } from 'zod';
import type { AgentRow, Database } from '../../schema/database';
import { identityIsSelfEdited } from './agent-seed';
import {
  InvalidWorkspaceDirError,
  prepareWorkspace,
  workspaceDirSyntaxProblem,
  workspaceRootsFromEnv,
} from './workspace-dir';
import { defaultWorkspaceDir, legacyWorkspaceDir, type WorkspaceRoots } from './workspace-roots';
import { DEFAULT_ORG, orgOfConfig } from './tenancy';
import { ApprovalsConfigSchema } from '../approvals/policy';
import { ownedSkillNames, pruneSkills, syncSkillBindings, upsertSkills, type SkillDefinition } from './skills';
import { McpServersSchema } from '../tools/mcp/config';

/** The identity files that define an agent (ARCHITECTURE §1). */
export const IDENTITY_FILES = {
  soul_md: 'SOUL.md',
  agents_md: 'AGENTS.md',
  heartbeat_md: 'HEARTBEAT.md',
  tools_md: 'TOOLS.md',
} as const;
export type IdentityColumn = keyof typeof IDENTITY_FILES;

/** Whom an agent takes work and messages from (`acceptsWorkFrom`); the first is the default. */
export const WORK_SOURCES = ['colleagues', 'manager', 'humans'] as const;
export type WorkSource = (typeof WORK_SOURCES)[number];

/**
 * Per-agent settings, validated (strict: an unknown key is refused, so a typo never passes silently).
 * A new setting is added here, once: the type is inferred from the schema.
 */
export const AgentConfigSchema = z
  .object({
    /** Provider name from the worker's provider list (e.g. `anthropic`), or absent for the default. */
    provider: z.string().min(1).optional(),
    model: z.string().min(1).optional(),
    tier: z.enum(['cheap', 'standard', 'premium']).optional(),
    /** IANA timezone for timestamps in prompts. */
    timezone: z
      .string()
      .refine((zone) => isTimeZone(zone), { message: 'not an IANA timezone (e.g. Europe/Paris)' })
      .optional(),
    /** Lets the agent edit its own identity files. */
    canEditOwnFiles: z.boolean().optional(),
    /** Spending cap in USD for this agent (checked by the budget guard before each call); absent = no cap. */
    budgetUsd: z.number().nonnegative().optional(),
    allowBudgetOverage: z.boolean().optional(),
    /** The period the budget covers (default a calendar month, UTC). */
    budgetPeriod: z.enum(['hour', 'day', 'week', 'month', 'lifetime']).optional(),
    protectedBranches: z.array(z.string().min(1)).optional(),
    /**
     * What the agent may do (permission flags). Each flag is granted unless set to false; a
     * withheld flag removes its tools from the agent's tool set: they are not sent to the model, no
     * prompt line names them, and a call to one anyway is refused at dispatch without running.
     */
    permissions: z
      .object({
        /** `shell_execute`. */
        shell: z.boolean().optional(),
        /** `file_write` (reading files stays allowed). */
        writeFiles: z.boolean().optional(),
        /** `task_create`, `task_update`, `task_comment` (listing and reading tasks stay allowed). */
        manageTasks: z.boolean().optional(),
        /** `notify_user`, `request_user_approval`. */
        contactHumans: z.boolean().optional(),
        /** `agent_send_message`. */
        messageAgents: z.boolean().optional(),
        /** `goal_create`, `goal_update`. */
        manageGoals: z.boolean().optional(),
        /** Tools that reach outside the worker: `web_fetch`, `web_search` and MCP servers' tools (docs/mcp.md). */
        canCallExternalTools: z.boolean().optional(),
      })
      .strict()
      .optional(),
    /** A manager gets the manager's responsibilities in its prompt and owes a daily report after 20:00. */
    position: z.enum(['manager', 'worker']).optional(),
    /**
     * The organisation the agent works in (an `upsertOrganisationFromFolder` name): its CONTEXT.md,
     * announcements and users/*.md enter the prompt, and the other agents of the same organisation are
     * the agent's colleagues.
     */
    org: z.string().trim().min(1).max(120).optional(),
    /** Free-text capabilities, shown in the prompt (`agents.capabilities`). */
    capabilities: z.string().max(4_000).optional(),
    /** The agent's trust level as shown in its prompt; it grants nothing by itself. */
    trust: z
      .object({ level: z.string().trim().min(1).max(60), description: z.string().max(2_000).optional() })
      .strict()
      .optional(),
    /** Shared skills bound to the agent (skill names); skills in the agent folder's `skills/` are bound too. */
    skills: z.array(z.string().min(1).max(100)).max(100).optional(),
    /** Who decides this agent's risky tool calls, reminders, escalation, quorum and expiry (docs/approvals.md). */
    approvals: ApprovalsConfigSchema.optional(),
    /** MCP servers the agent may use, in the `mcpServers` shape (docs/mcp.md); needs `permissions.canCallExternalTools`. */
    mcpServers: McpServersSchema.optional(),
    /** Tasks this agent creates with task_create wait in `pending` until a human approves them. */
    tasksNeedApproval: z.boolean().optional(),
    /**
     * Who may give this agent work and messages without a human in between (store/work-policy.ts):
     * `colleagues` (default: any agent of its organisation), `manager` (only its organisation's agents
     * whose `position` is manager), `humans` (no agent). A task another agent creates for it against the
     * policy waits for a human's approval; such a message is refused. Other organisations: never.
     */
    acceptsWorkFrom: z.enum(WORK_SOURCES).optional(),
    /**
     * Cognitive preparation: cheap appraisal / reflection calls before the first main
     * call of each task attempt, written to the notebook. Off unless `enabled`. `maxDepth` caps the
     * selected depth (0–3, default 3); `timeoutMs` overrides the 15 s budget.
     */
    cognitive: z
      .object({
        enabled: z.boolean().optional(),
        maxDepth: z.union([z.literal(0), z.literal(1), z.literal(2), z.literal(3)]).optional(),
        timeoutMs: z.number().int().positive().optional(),
      })
      .strict()
      .optional(),
  })
  .strict();
export type AgentConfig = z.infer<typeof AgentConfigSchema>;

function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

export const AGENT_ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;

export function identityContentHash(files: { soul: string; agents: string; heartbeat: string; tools: string }): string {
  const hash = createHash('sha256');
  for (const part of [files.soul, files.agents, files.heartbeat, files.tools]) {
    hash
      .update(String(Buffer.byteLength(part)))
      .update('\0')
      .update(part);
  }
  return hash.digest('hex');
}

/** An identity file is prompt text: 256K characters is far beyond what a prompt should carry. */
export const MAX_IDENTITY_FILE_CHARS = 256_000;

export const AgentDefinitionSchema = z
  .object({
    id: z
      .string()
      .regex(AGENT_ID_PATTERN, "use 1-63 lowercase letters, digits, '-' or '_', starting with a letter or digit"),
    name: z.string().trim().min(1).max(200),
    description: z.string().max(2_000).optional(),
    files: z
      .object({
        soul: z.string().max(MAX_IDENTITY_FILE_CHARS),
        agents: z.string().max(MAX_IDENTITY_FILE_CHARS),
        heartbeat: z.string().max(MAX_IDENTITY_FILE_CHARS),
        tools: z.string().max(MAX_IDENTITY_FILE_CHARS),
      })
      .strict(),
    config: AgentConfigSchema.optional(),
    /**
     * The agent's workspace folder (created if missing); it must lie under its organisation's workspace
     * root or an allowed root (workspace-roots.ts). Default: `<org root>/<id>`, the org root being
     * `$AGENTS_WORKSPACE_ROOT/<org>` unless AGENTS_WORKSPACE_ROOTS gives it another.
     */
    workspaceDir: z.string().min(1).optional(),
  })
  .strict();
export type AgentDefinition = z.input<typeof AgentDefinitionSchema>;

/** Bad agent input, with every problem named by its path (`config.budgetUsd: …`). */
export class InvalidAgentError extends Error {
  readonly type = 'InvalidAgent';
  constructor(
    readonly agentId: unknown,
    readonly problems: string[],
  ) {
    super(`invalid agent ${JSON.stringify(agentId)}: ${problems.join('; ')}`);
    this.name = 'InvalidAgentError';
  }
}

/** Validates an agent definition; throws `InvalidAgentError` listing every problem. */
export function parseAgentDefinition(agent: unknown): z.output<typeof AgentDefinitionSchema> {
  const parsed = AgentDefinitionSchema.safeParse(agent);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || 'definition'}: ${issue.message}`);
  throw new InvalidAgentError((agent as { id?: unknown } | undefined)?.id, problems);
}

/**
 * The workspace folder an agent gets: the one given; else, for an agent of the default organisation
 * whose row already has `<workspaceRoot>/<id>` (the default before organisations), that folder, so
 * re-upserting an agent after the upgrade keeps its files; else `<org root>/<id>`. No root to build the
 * default from: a clear error rather than a folder nobody chose. Where the folder may lie is checked
 * by `ensureWorkspace`, not here.
 */
export function resolveWorkspaceDir(
  agentId: string,
  workspaceDir: string | undefined,
  workspaceRoot: string | undefined = process.env.AGENTS_WORKSPACE_ROOT,
  options: { org?: string; roots?: WorkspaceRoots; currentDir?: string } = {},
): string {
  const org = options.org ?? DEFAULT_ORG;
  let chosen: string | undefined;
  if (workspaceDir) chosen = path.resolve(workspaceDir);
  else {
    // The caller's root is the base of the default (the API's and the client's `workspaceRoot`).
    const roots = {
      ...(options.roots ?? workspaceRootsFromEnv(workspaceRoot || undefined)),
      base: workspaceRoot ? path.resolve(workspaceRoot) : undefined,
    };
    const legacy = legacyWorkspaceDir(roots, agentId);
    chosen =
      org === DEFAULT_ORG && legacy !== undefined && options.currentDir === legacy
        ? legacy
        : defaultWorkspaceDir(roots, { agentId, org });
  }
  if (chosen) {
    const problem = workspaceDirSyntaxProblem(chosen);
    if (problem)
      throw new InvalidAgentError(agentId, [`workspaceDir: ${new InvalidWorkspaceDirError(chosen, problem).message}`]);
    return chosen;
  }
  throw new InvalidAgentError(agentId, [
    workspaceRoot
      ? `workspaceDir: missing, and organisation ${org} has no workspace root; pass workspaceDir or give it a root in AGENTS_WORKSPACE_ROOTS`
      : 'workspaceDir: missing, and AGENTS_WORKSPACE_ROOT is not set; pass workspaceDir or set AGENTS_WORKSPACE_ROOT',
  ]);
}

/**
 * Makes sure an agent's workspace folder is usable and exists (validated, then created with its
 * parents; see workspace-dir.ts), and that its repositories commit as the agent. A folder that cannot
 * be one, or lies where the agent's organisation may not have one (workspace-roots.ts: system folders,
 * homes' dot-folders, the data folder, the checkout, another organisation's root …), is refused with
 * `InvalidAgentError` naming the agent, the folder and why; nothing is created then. The worker runs
 * this before every tool call, so a row written around the API is refused there too.
 */
export async function ensureWorkspace(
  agent: { id: string; name: string; config?: unknown },
  workspaceDir: string,
  options: { gitIdentity?: boolean; roots?: WorkspaceRoots; extraRoots?: readonly string[] } = {},
): Promise<void> {
  const placement = {
    agentId: agent.id,
    org: orgOfConfig(agent.config as AgentConfig | undefined),
    ...(options.roots ? { roots: options.roots } : {}),
    ...(options.extraRoots ? { extraRoots: options.extraRoots } : {}),
  };
  try {
    await prepareWorkspace(agent, workspaceDir, placement, { gitIdentity: options.gitIdentity });
  } catch (error) {
    if (error instanceof InvalidWorkspaceDirError)
      throw new InvalidAgentError(agent.id, [`workspaceDir: ${error.message}`]);
    throw error;
  }
}

/**
 * Creates or updates an agent after validating it (`InvalidAgentError` names every problem). Its
 * workspace folder exists when this returns. Identity files the agent changed itself
 * (`edit_agent_file`) survive a re-upsert unless `force` (see agent-seed.ts); compare the returned
 * content hash with the definition's to tell which files are current. `skills` are the agent folder's
 * own skills (they replace the ones it held); config `skills` bind shared ones (an unknown name is refused).
 */
export async function upsertAgent(
  db: Kysely<Database>,
  input: AgentDefinition,
  options: {
    workspaceRoot?: string;
    workspaceRoots?: WorkspaceRoots;
    force?: boolean;
    skills?: SkillDefinition[];
  } = {},
): Promise<AgentRow> {
  const agent = parseAgentDefinition(input);
  const org = orgOfConfig(agent.config);
  const roots = options.workspaceRoots ?? workspaceRootsFromEnv(options.workspaceRoot || undefined);
  const currentDir = agent.workspaceDir ? undefined : (await findAgent(db, agent.id))?.workspace_dir;
  const workspaceDir = resolveWorkspaceDir(agent.id, agent.workspaceDir, options.workspaceRoot, {
    org,
    roots,
    ...(currentDir !== undefined ? { currentDir } : {}),
  });
  await ensureWorkspace(agent, workspaceDir, { roots });
  const row = {
    id: agent.id,
    name: agent.name,
    description: agent.description ?? '',
    soul_md: agent.files.soul,
    agents_md: agent.files.agents,
    heartbeat_md: agent.files.heartbeat,
    tools_md: agent.files.tools,
    content_hash: identityContentHash(agent.files),
    config: JSON.stringify(agent.config ?? {}),
    workspace_dir: workspaceDir,
  };
  return db.transaction().execute(async (trx) => {
    await trx.selectFrom('agents').select('id').where('id', '=', agent.id).forUpdate().executeTakeFirst();
    const keepIdentity = !options.force && (await identityIsSelfEdited(trx, agent.id));
    const { soul_md: _s, agents_md: _a, heartbeat_md: _h, tools_md: _t, content_hash: _c, ...rest } = row;
    const saved = await trx
      .insertInto('agents')
      .values(row)
      .onConflict((oc) => oc.column('id').doUpdateSet({ ...(keepIdentity ? rest : row), updated_at: new Date() }))
      .returningAll()
      .executeTakeFirstOrThrow();
    // The agent folder's own skills (replacing what it held before), then the bindings: config `skills` + own.
    if (options.skills) {
      await upsertSkills(trx, options.skills, { agentId: agent.id });
      await pruneSkills(
        trx,
        { agentId: agent.id },
        options.skills.map((s) => s.name),
      );
    }
    const missing = await syncSkillBindings(trx, agent.id, agent.config?.org, [
      ...(agent.config?.skills ?? []),
      ...(await ownedSkillNames(trx, agent.id)),
    ]);
    if (missing.length) {
      throw new InvalidAgentError(agent.id, [
        `config.skills: no skill visible to this agent named ${missing.map((m) => JSON.stringify(m)).join(', ')} (load the organisation or skills folder first)`,
      ]);
    }
    return saved;
  });
}

export async function findAgent(db: Kysely<Database>, agentId: string): Promise<AgentRow | undefined> {
  return db.selectFrom('agents').selectAll().where('id', '=', agentId).executeTakeFirst();
}

export function agentConfig(row: AgentRow): AgentConfig {
  return (row.config ?? {}) as AgentConfig;
}
