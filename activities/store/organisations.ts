/**
 * Organisations: an organisation folder holds
 *
 * - `CONTEXT.md`: what the organisation does (Tier 2, "Organisation"),
 * - `ANNOUNCEMENTS.md`: team announcements and norms (Tier 2),
 * - `users/<handle>.md`: the humans the agents work with (Tier 2 "People You Work With" and the
 *   identity section's human team members); the first `# Heading` is the person's name,
 * - `skills/<skill>/SKILL.md`: skills the organisation's agents may discover and bind (see skills.ts).
 *
 * Agents join with `config.org`; the other agents of the organisation are their colleagues.
 * System announcements (Tier 3) are rows with an expiry, for one organisation or everyone.
 */
import { readdir } from 'node:fs/promises';
import { readUserTextFile } from './user-files';
import path from 'node:path';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { z } from 'zod';
import { ApprovalsConfigSchema, type ApprovalsConfig } from '../approvals/policy';
import { MCP_JSON_FILE, McpServersSchema, parseMcpJson, type McpServers } from '../tools/mcp/config';
import {
  pruneSkills,
  readSkillsFolder,
  skillProblems,
  skillScope,
  SKILLS_PER_FOLDER_MAX,
  upsertSkills,
  type SkillDefinition,
} from './skills';

/** An organisation document is prompt text; longer belongs in a skill or the agents' knowledge. */
export const ORG_DOCUMENT_MAX_CHARS = 32_000;
/** User profiles of one organisation (the prompt lists 8 people; more is a directory, not a team). */
export const ORG_USERS_MAX = 100;
/** A person's name is shown in prompt lists: a name, not a paragraph. */
export const USER_NAME_MAX_CHARS = 200;
/** One system announcement: a line or two, not a document. */
export const ANNOUNCEMENT_MAX_CHARS = 1_000;
/** Live system announcements shown in Tier 3 (newest kept). */
export const ANNOUNCEMENTS_SHOWN_MAX = 5;
/** Live announcements one listing returns (newest first): far more than the prompt shows, still a page. */
export const ANNOUNCEMENTS_LISTED_MAX = 50;

export const ORG_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;
/** A user's handle names their `users/<handle>.md` file and the person in prompts. */
export const USER_HANDLE_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;

export interface OrganisationDefinition {
  name: string;
  context: string;
  announcements: string;
  users: Array<{ handle: string; name: string; profile: string }>;
  skills: SkillDefinition[];
  /** Approval policies for every agent of the organisation (`APPROVALS.json`); an agent's own come first. */
  approvals?: ApprovalsConfig;
  /** MCP servers every agent of the organisation gets (the folder's `mcp.json`). */
  mcpServers?: McpServers;
}

/** Bad organisation input, with every problem; nothing was written. */
export class InvalidOrganisationError extends Error {
  readonly type = 'InvalidOrganisation';
  constructor(
    readonly source: string,
    readonly problems: string[],
  ) {
    super(`${source}: ${problems.join('; ')}`);
    this.name = 'InvalidOrganisationError';
  }
}

/** An announcement or lookup named an organisation that was never loaded. */
export class UnknownOrganisationError extends Error {
  readonly type = 'UnknownOrganisation';
  constructor(readonly org: string) {
    super(`unknown organisation ${JSON.stringify(org)}: load it first (upsertOrganisationFromFolder)`);
    this.name = 'UnknownOrganisationError';
  }
}

/** Bad announcement text (empty, or longer than `ANNOUNCEMENT_MAX_CHARS`). */
export class InvalidAnnouncementError extends Error {
  readonly type = 'InvalidAnnouncement';
  constructor(message: string) {
    super(message);
    this.name = 'InvalidAnnouncementError';
  }
}

/** A user profile; without a name, the profile's first `# Heading` is the person's name, else the handle. */
export function userFromProfile(
  handle: string,
  profile: string,
  name?: string,
): OrganisationDefinition['users'][number] {
  const text = profile.trim();
  return { handle, name: name?.trim() || /^#\s+(.+)$/m.exec(text)?.[1]?.trim() || handle, profile: text };
}

/**
 * What is wrong with an organisation (empty when nothing): the rules an organisation folder and an API
 * request share. Every problem is listed, so one answer names all the fixes.
 */
export function organisationProblems(org: OrganisationDefinition): string[] {
  const problems: string[] = [];
  if (!ORG_NAME_PATTERN.test(org.name))
    problems.push(`name ${JSON.stringify(org.name)} must be 1-63 lowercase letters, digits, '-' or '_'`);
  for (const [field, text] of [
    ['context (CONTEXT.md)', org.context],
    ['announcements (ANNOUNCEMENTS.md)', org.announcements],
  ] as const) {
    if (text.length > ORG_DOCUMENT_MAX_CHARS)
      problems.push(`${field} is longer than ${ORG_DOCUMENT_MAX_CHARS} characters`);
  }
  if (org.users.length > ORG_USERS_MAX) problems.push(`${org.users.length} user profiles; at most ${ORG_USERS_MAX}`);
  const handles = new Set<string>();
  for (const user of org.users) {
    const who = `user ${JSON.stringify(user.handle)}`;
    if (!USER_HANDLE_PATTERN.test(user.handle))
      problems.push(`${who}: a handle is 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit`);
    if (handles.has(user.handle)) problems.push(`${who}: listed twice`);
    handles.add(user.handle);
    if (user.name.length > USER_NAME_MAX_CHARS)
      problems.push(`${who}: the name is longer than ${USER_NAME_MAX_CHARS} characters`);
    if (user.profile.length > ORG_DOCUMENT_MAX_CHARS)
      problems.push(`${who}: the profile is longer than ${ORG_DOCUMENT_MAX_CHARS} characters`);
  }
  if (org.skills.length > SKILLS_PER_FOLDER_MAX)
    problems.push(`${org.skills.length} skills; at most ${SKILLS_PER_FOLDER_MAX}`);
  const skillNames = new Set<string>();
  for (const skill of org.skills) {
    const which = `skill ${JSON.stringify(skill.name)}`;
    for (const problem of skillProblems(skill)) problems.push(`${which}: ${problem}`);
    if (skillNames.has(skill.name)) problems.push(`${which}: listed twice`);
    skillNames.add(skill.name);
  }
  if (org.approvals !== undefined) {
    const parsed = ApprovalsConfigSchema.safeParse(org.approvals);
    if (!parsed.success)
      for (const issue of parsed.error.issues)
        problems.push(`approvals${issue.path.map((p) => `.${String(p)}`).join('')}: ${issue.message}`);
  }
  if (org.mcpServers !== undefined) {
    const parsed = McpServersSchema.safeParse(org.mcpServers);
    if (!parsed.success)
      problems.push(...parsed.error.issues.map((i) => `mcpServers ${i.path.join('.')}: ${i.message}`));
  }
  return problems;
}

/** Throws `InvalidOrganisationError` naming every problem of `org` (see `organisationProblems`). */
export function validateOrganisation(
  org: OrganisationDefinition,
  source = `invalid organisation ${JSON.stringify(org.name)}`,
): void {
  const problems = organisationProblems(org);
  if (problems.length) throw new InvalidOrganisationError(source, problems);
}

async function readOptional(file: string): Promise<string | undefined> {
  return readUserTextFile(file);
}

/**
 * Reads and validates an organisation folder; the name defaults to the folder's name, lowercased. A
 * profile longer than `ORG_DOCUMENT_MAX_CHARS` is cut to it (a folder's file is kept, not refused).
 */
export async function readOrganisationFolder(
  folder: string,
  name = path.basename(path.resolve(folder)).toLowerCase(),
): Promise<OrganisationDefinition> {
  const [context, announcements] = await Promise.all([
    readOptional(path.join(folder, 'CONTEXT.md')),
    readOptional(path.join(folder, 'ANNOUNCEMENTS.md')),
  ]);
  const userDir = path.join(folder, 'users');
  const files = (await readdir(userDir).catch(() => [] as string[])).filter((f) => f.endsWith('.md')).sort();
  const users: OrganisationDefinition['users'] = [];
  for (const file of files.slice(0, ORG_USERS_MAX)) {
    const user = userFromProfile(
      file.slice(0, -'.md'.length),
      (await readUserTextFile(path.join(userDir, file))) ?? '',
    );
    users.push({ ...user, profile: user.profile.slice(0, ORG_DOCUMENT_MAX_CHARS) });
  }
  const skills = await readSkillsFolder(path.join(folder, 'skills'));
  const approvalsText = await readOptional(path.join(folder, 'APPROVALS.json'));
  let approvals: unknown;
  const problems: string[] = [];
  try {
    approvals = approvalsText === undefined ? undefined : z.json().parse(JSON.parse(approvalsText));
  } catch (error) {
    problems.push(`APPROVALS.json is not JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
  const mcpText = await readOptional(path.join(folder, MCP_JSON_FILE));
  const mcp = mcpText === undefined ? undefined : parseMcpJson(mcpText);
  const org: OrganisationDefinition = {
    name,
    context: context?.trim() ?? '',
    announcements: announcements?.trim() ?? '',
    users,
    skills,
    ...(approvals !== undefined ? { approvals: approvals as ApprovalsConfig } : {}),
    ...(mcp && 'servers' in mcp ? { mcpServers: mcp.servers } : {}),
  };
  problems.push(...organisationProblems(org));
  if (mcp && 'problems' in mcp) problems.push(...mcp.problems);
  if (files.length > ORG_USERS_MAX) problems.unshift(`users/ holds ${files.length} profiles; at most ${ORG_USERS_MAX}`);
  if (problems.length) throw new InvalidOrganisationError(`organisation folder ${folder}`, problems);
  if (context === undefined && announcements === undefined && !users.length && !skills.length) {
    throw new InvalidOrganisationError(`organisation folder ${folder}`, [
      'it holds none of CONTEXT.md, ANNOUNCEMENTS.md, users/*.md, skills/*/SKILL.md',
    ]);
  }
  return org;
}

/**
 * Creates or replaces an organisation: its documents, its user profiles (exactly these: others are
 * removed) and its skills (likewise). Validated first: bad input throws `InvalidOrganisationError` and
 * nothing is written; the rest is one transaction.
 */
export async function upsertOrganisation(db: Kysely<Database>, org: OrganisationDefinition): Promise<void> {
  validateOrganisation(org);
  await db.transaction().execute(async (trx) => {
    await trx
      .insertInto('organisations')
      .values({
        name: org.name,
        context_md: org.context,
        announcements_md: org.announcements,
        approvals: org.approvals ? JSON.stringify(org.approvals) : null,
        mcp_servers: org.mcpServers ? JSON.stringify(org.mcpServers) : null,
      })
      .onConflict((oc) =>
        oc.column('name').doUpdateSet({
          context_md: org.context,
          announcements_md: org.announcements,
          approvals: org.approvals ? JSON.stringify(org.approvals) : null,
          mcp_servers: org.mcpServers ? JSON.stringify(org.mcpServers) : null,
          updated_at: new Date(),
        }),
      )
      .execute();
    await trx.deleteFrom('user_profiles').where('org', '=', org.name).execute();
    if (org.users.length) {
      await trx
        .insertInto('user_profiles')
        .values(org.users.map((u) => ({ org: org.name, handle: u.handle, name: u.name, profile_md: u.profile })))
        .execute();
    }
    await upsertSkills(trx, org.skills, { org: org.name });
    await pruneSkills(
      trx,
      { org: org.name },
      org.skills.map((s) => s.name),
    );
  });
}

async function organisationExists(db: Kysely<Database>, name: string): Promise<boolean> {
  return (
    (await db.selectFrom('organisations').select('name').where('name', '=', name).executeTakeFirst()) !== undefined
  );
}

export interface OrganisationSummary {
  name: string;
  context: string;
  announcements: string;
  users: Array<{ handle: string; name: string }>;
  skills: Array<{ name: string; description: string; category: string }>;
  updatedAt: Date;
}

/** An organisation as stored: its documents, people (by handle) and own skills (by name, no bodies); undefined when unknown. */
export async function findOrganisation(db: Kysely<Database>, name: string): Promise<OrganisationSummary | undefined> {
  const row = await db.selectFrom('organisations').selectAll().where('name', '=', name).executeTakeFirst();
  if (!row) return undefined;
  const [users, skills] = await Promise.all([
    db.selectFrom('user_profiles').select(['handle', 'name']).where('org', '=', name).orderBy('handle').execute(),
    db
      .selectFrom('skills')
      .select(['name', 'description', 'category'])
      .where('scope', '=', skillScope({ org: name }))
      .orderBy('name')
      .execute(),
  ]);
  return {
    name: row.name,
    context: row.context_md,
    announcements: row.announcements_md,
    users,
    skills,
    updatedAt: row.updated_at,
  };
}

export interface Announcement {
  id: string;
  text: string;
  org: string | null;
  createdAt: Date;
  expiresAt: Date | null;
}

/**
 * Live system announcements (not expired), newest first, at most `ANNOUNCEMENTS_LISTED_MAX`: with
 * `org`, those an agent of that organisation sees (the organisation's and everyone's; an unknown one
 * throws `UnknownOrganisationError`), else all of them.
 */
export async function liveAnnouncements(
  db: Kysely<Database>,
  options: { org?: string; folderless?: boolean } = {},
): Promise<Announcement[]> {
  const { org } = options;
  // `folderless`: the caller's own organisation, which need not have been loaded from a folder.
  if (org !== undefined && !options.folderless && !(await organisationExists(db, org)))
    throw new UnknownOrganisationError(org);
  const rows = await db
    .selectFrom('announcements')
    .selectAll()
    .$if(org !== undefined, (q) => q.where((w) => w.or([w('org', 'is', null), w('org', '=', org!)])))
    .where((w) => w.or([w('expires_at', 'is', null), w('expires_at', '>', sql<Date>`now()`)]))
    .orderBy('id', 'desc')
    .limit(ANNOUNCEMENTS_LISTED_MAX)
    .execute();
  return rows.map((r) => ({
    id: String(r.id),
    text: r.text,
    org: r.org,
    createdAt: r.created_at,
    expiresAt: r.expires_at,
  }));
}

/** Posts a system announcement (Tier 3 of every agent of `org`, or of all agents) until `expiresAt`. */
export async function postAnnouncement(
  db: Kysely<Database>,
  input: { text: string; org?: string; expiresAt?: Date },
): Promise<string> {
  const text = input.text.trim();
  if (!text) throw new InvalidAnnouncementError('an announcement needs text');
  if (text.length > ANNOUNCEMENT_MAX_CHARS)
    throw new InvalidAnnouncementError(`an announcement is at most ${ANNOUNCEMENT_MAX_CHARS} characters`);
  if (input.expiresAt && Number.isNaN(input.expiresAt.getTime()))
    throw new InvalidAnnouncementError('the expiry is not a valid date');
  if (input.org !== undefined && !(await organisationExists(db, input.org)))
    throw new UnknownOrganisationError(input.org);
  const row = await db
    .insertInto('announcements')
    .values({ text, org: input.org ?? null, expires_at: input.expiresAt ?? null })
    .returning('id')
    .executeTakeFirstOrThrow();
  return String(row.id);
}
