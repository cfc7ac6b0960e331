/**
 * The skill store (issue 12). A skill is a folder with a `SKILL.md`:
 *
 * ```
 * ---
 * name: csv-import
 * description: Import CSV files into the warehouse safely
 * category: data
 * ---
 * Instructions (Markdown)…
 * ```
 *
 * Skills come from an agent folder's `skills/` (owned by that agent: only it sees them, and they are
 * bound to it), from an organisation folder's `skills/` (the organisation's agents may discover them)
 * and from a shared skills folder (every agent may); an agent's config `skills: [...]` binds them. A
 * name is unique per owner; an agent's own skill shadows its organisation's, which shadows a shared one. Bound skills are always in the agent's prompt (Active
 * Skills, 200 characters of body until activated); `discover_tools` activates a skill for the session
 * and its task, which puts its whole body in the prompt.
 */
import { createHash } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { readUserTextFile } from './user-files';
import path from 'node:path';
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../schema/database';
import { McpServersSchema, MCP_JSON_FILE, parseMcpJson, type McpServers } from '../tools/mcp/config';

/** Skill names: short, lowercase words joined by `-` or `_` (they appear in prompts and tool arguments). */
export const SKILL_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;
/** A skill description is one catalogue line's worth (the catalogue cuts it to 200 characters). */
export const SKILL_DESCRIPTION_MAX_CHARS = 1_000;
/** A skill body is prompt text: the Active Skills section holds at most 4,000 tokens of all of them. */
export const SKILL_BODY_MAX_CHARS = 64_000;
/** Skills one folder may hold: more is not a skill folder but a library. */
export const SKILLS_PER_FOLDER_MAX = 200;
/** Skills the catalogue query reads before the relevance filter keeps the top 30. */
export const SKILL_CATALOGUE_FETCH_MAX = 500;
/** A category groups skills in the catalogue: a word or two. */
export const SKILL_CATEGORY_MAX_CHARS = 100;
/** Skills one listing returns (shared plus one organisation's): two full folders and then some. */
export const SKILLS_LISTED_MAX = 1_000;

export interface SkillDefinition {
  name: string;
  description: string;
  category: string;
  body: string;
  /** MCP servers the skill brings (its folder's `mcp.json`): they join when the skill is activated, for agents bound to it. */
  mcpServers?: McpServers;
}

/** Bad skill input, with its file and every problem. */
export class InvalidSkillError extends Error {
  readonly type = 'InvalidSkill';
  constructor(
    readonly source: string,
    readonly problems: string[],
  ) {
    super(`invalid skill ${source}: ${problems.join('; ')}`);
    this.name = 'InvalidSkillError';
  }
}

/** Parses a SKILL.md: `---` front matter of `key: value` lines (name, description, category), then the body. */
export function parseSkillMarkdown(text: string, source: string): SkillDefinition {
  const match = /^\uFEFF?---\r?\n([\s\S]*?)\r?\n---\r?\n?([\s\S]*)$/.exec(text);
  if (!match)
    throw new InvalidSkillError(source, ['missing front matter: start the file with ---, name:, description:, ---']);
  const fields = new Map<string, string>();
  const problems: string[] = [];
  for (const line of match[1]!.split(/\r?\n/)) {
    if (!line.trim() || line.trim().startsWith('#')) continue;
    const kv = /^([A-Za-z_][\w-]*)\s*:\s*(.*)$/.exec(line);
    if (!kv) {
      problems.push(`front matter line ${JSON.stringify(line)} is not "key: value"`);
      continue;
    }
    fields.set(kv[1]!.toLowerCase(), unquote(kv[2]!.trim()));
  }
  const skill = {
    name: fields.get('name') ?? '',
    description: fields.get('description') ?? '',
    category: fields.get('category') ?? '',
    body: match[2]!.trim(),
  };
  problems.push(...skillProblems(skill));
  if (problems.length) throw new InvalidSkillError(source, problems);
  return skill;
}

/** What is wrong with a skill (empty when nothing): the rules a SKILL.md file and an API request share. */
export function skillProblems(skill: SkillDefinition): string[] {
  const problems: string[] = [];
  if (!SKILL_NAME_PATTERN.test(skill.name))
    problems.push(`name: ${JSON.stringify(skill.name)} must be 1-64 lowercase letters, digits, '-' or '_'`);
  if (!skill.description.trim()) problems.push('description: missing');
  if (skill.description.length > SKILL_DESCRIPTION_MAX_CHARS)
    problems.push(`description: longer than ${SKILL_DESCRIPTION_MAX_CHARS} characters`);
  if (skill.category.length > SKILL_CATEGORY_MAX_CHARS)
    problems.push(`category: longer than ${SKILL_CATEGORY_MAX_CHARS} characters`);
  if (skill.body.length > SKILL_BODY_MAX_CHARS) problems.push(`body: longer than ${SKILL_BODY_MAX_CHARS} characters`);
  if (skill.mcpServers !== undefined) {
    const parsed = McpServersSchema.safeParse(skill.mcpServers);
    if (!parsed.success)
      problems.push(...parsed.error.issues.map((i) => `mcpServers ${i.path.join('.')}: ${i.message}`));
  }
  return problems;
}

function unquote(value: string): string {
  return /^(['"]).*\1$/.test(value) ? value.slice(1, -1) : value;
}

/** Reads every `<folder>/<skill>/SKILL.md`; a missing folder holds no skills. Duplicate names are refused. */
export async function readSkillsFolder(folder: string): Promise<SkillDefinition[]> {
  let entries;
  try {
    entries = await readdir(folder, { withFileTypes: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  const dirs = entries
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  if (dirs.length > SKILLS_PER_FOLDER_MAX)
    throw new InvalidSkillError(folder, [`${dirs.length} skill folders; at most ${SKILLS_PER_FOLDER_MAX}`]);
  const skills: SkillDefinition[] = [];
  for (const dir of dirs) {
    const file = path.join(folder, dir, 'SKILL.md');
    const text = await readUserTextFile(file);
    if (text === undefined) continue;
    const skill = parseSkillMarkdown(text, file);
    const mcpFile = path.join(folder, dir, MCP_JSON_FILE);
    const mcpText = await readUserTextFile(mcpFile);
    if (mcpText !== undefined) {
      const mcp = parseMcpJson(mcpText);
      if ('problems' in mcp) throw new InvalidSkillError(mcpFile, mcp.problems);
      skill.mcpServers = mcp.servers;
    }
    skills.push(skill);
  }
  const seen = new Set<string>();
  for (const s of skills) {
    if (seen.has(s.name)) throw new InvalidSkillError(folder, [`two skills are named ${JSON.stringify(s.name)}`]);
    seen.add(s.name);
  }
  return skills;
}

type Db = Kysely<Database> | Transaction<Database>;

function skillHash(s: SkillDefinition): string {
  return createHash('sha256')
    .update(JSON.stringify([s.name, s.category, s.description, s.body, ...(s.mcpServers ? [s.mcpServers] : [])]))
    .digest('hex');
}

/** Who a skill belongs to: one agent (its folder's skills), one organisation, or everyone. */
export type SkillOwner = { agentId: string } | { org: string } | 'shared';

export function skillScope(owner: SkillOwner): string {
  if (owner === 'shared') return 'shared';
  return 'agentId' in owner ? `agent:${owner.agentId}` : `org:${owner.org}`;
}

/** The scopes an agent sees, most specific first: its own skills shadow its organisation's, which shadow shared ones. */
export function visibleScopes(agentId: string, org: string | undefined): string[] {
  return [`agent:${agentId}`, ...(org ? [`org:${org}`] : []), 'shared'];
}

/**
 * Creates or updates skills of one owner (a name is unique per owner). Every skill is checked first
 * (`skillProblems`): one bad skill refuses the whole call with `InvalidSkillError` before anything is written.
 */
export async function upsertSkills(db: Db, skills: readonly SkillDefinition[], owner: SkillOwner): Promise<void> {
  const scope = skillScope(owner);
  for (const s of skills) {
    const problems = skillProblems(s);
    if (problems.length) throw new InvalidSkillError(`${JSON.stringify(s.name)} (${scope})`, problems);
  }
  for (const s of skills) {
    const row = {
      scope,
      name: s.name,
      category: s.category,
      description: s.description,
      body: s.body,
      owner_agent_id: owner !== 'shared' && 'agentId' in owner ? owner.agentId : null,
      content_hash: skillHash(s),
      mcp_servers: s.mcpServers ? JSON.stringify(s.mcpServers) : null,
    };
    await db
      .insertInto('skills')
      .values(row)
      .onConflict((oc) => oc.columns(['scope', 'name']).doUpdateSet({ ...row, updated_at: new Date() }))
      .execute();
  }
}

/** Removes the skills of one owner that are not in `keep` (a folder's skill was deleted). */
export async function pruneSkills(db: Db, owner: SkillOwner, keep: readonly string[]): Promise<void> {
  await db
    .deleteFrom('skills')
    .where('scope', '=', skillScope(owner))
    .$if(keep.length > 0, (q) => q.where('name', 'not in', keep))
    .execute();
}

/**
 * Binds exactly these skills to the agent (config `skills` plus the agent folder's own). Each must exist
 * and be visible to the agent (its own, its organisation's or shared); otherwise the whole upsert is refused with the missing names.
 */
export async function syncSkillBindings(
  db: Db,
  agentId: string,
  org: string | undefined,
  names: readonly string[],
): Promise<string[]> {
  const wanted = [...new Set(names)].sort();
  if (wanted.length) {
    const found = await db
      .selectFrom('skills')
      .select('name')
      .where('name', 'in', wanted)
      .where('scope', 'in', visibleScopes(agentId, org))
      .execute();
    const missing = wanted.filter((n) => !found.some((f) => f.name === n));
    if (missing.length) return missing;
  }
  await db.deleteFrom('skill_bindings').where('agent_id', '=', agentId).execute();
  if (wanted.length)
    await db
      .insertInto('skill_bindings')
      .values(wanted.map((skill_name) => ({ agent_id: agentId, skill_name })))
      .execute();
  return [];
}

/** Names of the skills an agent's folder holds (owned by it). */
export async function ownedSkillNames(db: Db, agentId: string): Promise<string[]> {
  const rows = await db
    .selectFrom('skills')
    .select('name')
    .where('scope', '=', skillScope({ agentId }))
    .orderBy('name')
    .execute();
  return rows.map((r) => r.name);
}

export interface Activations {
  skills: Set<string>;
  tools: Set<string>;
}

/** What discover_tools activated in this session or, for a task, in any session of the task. */
/** The activations of a session or its task, oldest first (also read inside the step's prompt statement). */
export function activationsQuery(db: Db, sessionId: string, taskId: string | undefined) {
  return db
    .selectFrom('skill_activations')
    .select(['kind', 'name'])
    .where((eb) =>
      taskId ? eb.or([eb('session_id', '=', sessionId), eb('task_id', '=', taskId)]) : eb('session_id', '=', sessionId),
    )
    .orderBy('created_at');
}

export async function loadActivations(db: Db, sessionId: string, taskId: string | undefined): Promise<Activations> {
  return activationsFromRows(await activationsQuery(db, sessionId, taskId).execute());
}

export function activationsFromRows(rows: ReadonlyArray<{ kind: string; name: string }>): Activations {
  const out: Activations = { skills: new Set(), tools: new Set() };
  for (const r of rows) (r.kind === 'skill' ? out.skills : out.tools).add(r.name);
  return out;
}

export async function recordActivation(
  db: Db,
  activation: { sessionId: string; agentId: string; taskId?: string; kind: 'skill' | 'tool'; name: string },
): Promise<void> {
  await db
    .insertInto('skill_activations')
    .values({
      session_id: activation.sessionId,
      agent_id: activation.agentId,
      task_id: activation.taskId ?? null,
      kind: activation.kind,
      name: activation.name,
    })
    .onConflict((oc) => oc.columns(['session_id', 'kind', 'name']).doNothing())
    .execute();
}

export interface VisibleSkill extends SkillDefinition {
  bound: boolean;
  /** Where the visible one comes from: `agent:<id>`, `org:<name>` or `shared`. */
  scope: string;
}

/**
 * Skills an agent may use (its own, its organisation's, shared), one per name (the most specific scope
 * wins), bound ones marked; by name (a stable order).
 */
export async function visibleSkills(db: Db, agentId: string, org: string | undefined): Promise<VisibleSkill[]> {
  const scopes = visibleScopes(agentId, org);
  const rows = await db
    .selectFrom('skills')
    .leftJoin('skill_bindings', (join) =>
      join.onRef('skill_bindings.skill_name', '=', 'skills.name').on('skill_bindings.agent_id', '=', agentId),
    )
    .select([
      'skills.scope',
      'skills.name',
      'skills.category',
      'skills.description',
      'skills.body',
      'skill_bindings.agent_id as bound_to',
    ])
    .where('skills.scope', 'in', scopes)
    .orderBy('skills.name')
    .limit(SKILL_CATALOGUE_FETCH_MAX)
    .execute();
  return pickVisible(rows, scopes).map((r) => ({
    name: r.name,
    category: r.category,
    description: r.description,
    body: r.body,
    bound: r.bound_to !== null,
    scope: r.scope,
  }));
}

export interface SkillListing {
  name: string;
  description: string;
  category: string;
  scope: string;
}

/**
 * The shared skills and, with `org`, that organisation's too (both kept where a name is in each, the
 * scope says which is which), without bodies; by name, shared before the organisation's; at most
 * `SKILLS_LISTED_MAX`.
 */
export async function listSkills(db: Db, options: { org?: string } = {}): Promise<SkillListing[]> {
  const scopes = [skillScope('shared'), ...(options.org ? [skillScope({ org: options.org })] : [])];
  return db
    .selectFrom('skills')
    .select(['name', 'description', 'category', 'scope'])
    .where('scope', 'in', scopes)
    .orderBy('name')
    .orderBy('scope', 'desc')
    .limit(SKILLS_LISTED_MAX)
    .execute();
}

/** One skill per name, from the most specific scope (`scopes` most specific first); by name. */
export function pickVisible<T extends { scope: string; name: string }>(
  rows: readonly T[],
  scopes: readonly string[],
): T[] {
  const byName = new Map<string, T>();
  for (const r of rows) {
    const seen = byName.get(r.name);
    if (!seen || scopes.indexOf(r.scope) < scopes.indexOf(seen.scope)) byName.set(r.name, r);
  }
  return [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
