/**
 * Organisations (seed D1 B3, B13): an organisation folder holds
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
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { pruneSkills, readSkillsFolder, upsertSkills, type SkillDefinition } from './skills';

/** An organisation document is prompt text; longer belongs in a skill or the agents' knowledge. */
export const ORG_DOCUMENT_MAX_CHARS = 32_000;
/** users/*.md files read from one folder (the prompt lists 8 people; more is a directory, not a team). */
export const ORG_USERS_MAX = 100;
/** One system announcement: a line or two, not a document. */
export const ANNOUNCEMENT_MAX_CHARS = 1_000;
/** Live system announcements shown in Tier 3 (newest kept). */
export const ANNOUNCEMENTS_SHOWN_MAX = 5;

export const ORG_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;
const HANDLE_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;

export interface OrganisationDefinition {
  name: string;
  context: string;
  announcements: string;
  users: Array<{ handle: string; name: string; profile: string }>;
  skills: SkillDefinition[];
}

async function readOptional(file: string): Promise<string | undefined> {
  return readFile(file, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  });
}

/** Reads an organisation folder; the name defaults to the folder's name, lowercased. */
export async function readOrganisationFolder(folder: string, name = path.basename(path.resolve(folder)).toLowerCase()): Promise<OrganisationDefinition> {
  const problems: string[] = [];
  if (!ORG_NAME_PATTERN.test(name)) problems.push(`name ${JSON.stringify(name)} must be 1-63 lowercase letters, digits, '-' or '_' (pass a name)`);
  const [context, announcements] = await Promise.all([readOptional(path.join(folder, 'CONTEXT.md')), readOptional(path.join(folder, 'ANNOUNCEMENTS.md'))]);
  for (const [file, text] of [['CONTEXT.md', context], ['ANNOUNCEMENTS.md', announcements]] as const) {
    if ((text?.length ?? 0) > ORG_DOCUMENT_MAX_CHARS) problems.push(`${file} is longer than ${ORG_DOCUMENT_MAX_CHARS} characters`);
  }
  const users: OrganisationDefinition['users'] = [];
  const userDir = path.join(folder, 'users');
  const files = (await readdir(userDir).catch(() => [] as string[])).filter((f) => f.endsWith('.md')).sort();
  if (files.length > ORG_USERS_MAX) problems.push(`users/ holds ${files.length} profiles; at most ${ORG_USERS_MAX}`);
  for (const file of files.slice(0, ORG_USERS_MAX)) {
    const handle = file.slice(0, -'.md'.length);
    if (!HANDLE_PATTERN.test(handle)) {
      problems.push(`users/${file}: the file name is not a usable handle`);
      continue;
    }
    const profile = (await readFile(path.join(userDir, file), 'utf8')).trim();
    const heading = /^#\s+(.+)$/m.exec(profile)?.[1]?.trim();
    users.push({ handle, name: heading || handle, profile: profile.slice(0, ORG_DOCUMENT_MAX_CHARS) });
  }
  if (problems.length) throw new Error(`organisation folder ${folder}: ${problems.join('; ')}`);
  const skills = await readSkillsFolder(path.join(folder, 'skills'));
  if (context === undefined && announcements === undefined && !users.length && !skills.length) {
    throw new Error(`organisation folder ${folder} holds none of CONTEXT.md, ANNOUNCEMENTS.md, users/*.md, skills/*/SKILL.md`);
  }
  return { name, context: context?.trim() ?? '', announcements: announcements?.trim() ?? '', users, skills };
}

/** Creates or replaces an organisation: its documents, its user profiles (exactly the folder's) and its shared skills. */
export async function upsertOrganisation(db: Kysely<Database>, org: OrganisationDefinition): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx
      .insertInto('organisations')
      .values({ name: org.name, context_md: org.context, announcements_md: org.announcements })
      .onConflict((oc) => oc.column('name').doUpdateSet({ context_md: org.context, announcements_md: org.announcements, updated_at: new Date() }))
      .execute();
    await trx.deleteFrom('user_profiles').where('org', '=', org.name).execute();
    if (org.users.length) {
      await trx.insertInto('user_profiles').values(org.users.map((u) => ({ org: org.name, handle: u.handle, name: u.name, profile_md: u.profile }))).execute();
    }
    await upsertSkills(trx, org.skills, { org: org.name });
    await pruneSkills(trx, { org: org.name }, org.skills.map((s) => s.name));
  });
}

/** Posts a system announcement (Tier 3 of every agent of `org`, or of all agents) until `expiresAt`. */
export async function postAnnouncement(db: Kysely<Database>, input: { text: string; org?: string; expiresAt?: Date }): Promise<string> {
  const text = input.text.trim();
  if (!text) throw new Error('an announcement needs text');
  if (text.length > ANNOUNCEMENT_MAX_CHARS) throw new Error(`an announcement is at most ${ANNOUNCEMENT_MAX_CHARS} characters`);
  if (input.org !== undefined && !(await db.selectFrom('organisations').select('name').where('name', '=', input.org).executeTakeFirst())) {
    throw new Error(`unknown organisation ${JSON.stringify(input.org)}: load it first (upsertOrganisationFromFolder)`);
  }
  const row = await db
    .insertInto('announcements')
    .values({ text, org: input.org ?? null, expires_at: input.expiresAt ?? null })
    .returning('id')
    .executeTakeFirstOrThrow();
  return String(row.id);
}
