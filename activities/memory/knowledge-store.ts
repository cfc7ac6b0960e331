/**
 * Curated knowledge sections: titled, capped, edited by the agent and by consolidation, and injected
 * into prompts up to their budget. Every write locks the agent's row (as the rest of memory does), so
 * concurrent writers cannot overshoot the total.
 */
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../schema/database';
import {
  KNOWLEDGE_PROMPT_MAX_CHARS,
  KNOWLEDGE_SECTION_MAX_CHARS,
  KNOWLEDGE_TITLE_MAX_CHARS,
  KNOWLEDGE_TOTAL_MAX_CHARS,
} from '../../workflows/rules/memory-limits';
import { listNotebook, lockAgent, MemoryLimitError, type Db, type KnowledgeSection, type NotebookEntry } from './store';
export function normaliseSectionTitle(title: string): string {
  const t = title.trim().replace(/^#+\s*/, '');
  if (!t || t.length > KNOWLEDGE_TITLE_MAX_CHARS)
    throw new MemoryLimitError(`a knowledge section title must be 1–${KNOWLEDGE_TITLE_MAX_CHARS} characters`);
  if (t.toLowerCase() === '_observations')
    throw new MemoryLimitError('"_observations" is the observation buffer; use memory_save to add observations');
  return t;
}

export async function listKnowledge(db: Db, agentId: string): Promise<KnowledgeSection[]> {
  const rows = await knowledgeQuery(db, agentId).execute();
  return rows.map((r) => ({ title: r.title, content: r.content }));
}

/** `listKnowledge`'s query, not run (the prompt loads it with the rest of its inputs in one statement). */
export function knowledgeQuery(db: Db, agentId: string) {
  return db
    .selectFrom('memory_knowledge')
    .select(['title', 'content'])
    .where('agent_id', '=', agentId)
    .orderBy('position');
}

/**
 * Sets a section's content (creating it when new), refusing content over 3,000 characters or a total
 * over 15,000 for the agent. Runs inside the caller's transaction, so a dream's promotions and the
 * caps are checked together.
 */
export async function putKnowledgeSection(
  trx: Transaction<Database>,
  agentId: string,
  title: string,
  content: string,
): Promise<{ created: boolean; totalChars: number }> {
  const section = normaliseSectionTitle(title);
  const body = content.trim();
  if (body.length > KNOWLEDGE_SECTION_MAX_CHARS) {
    throw new MemoryLimitError(
      `section "${section}" would have ${body.length} characters; a section holds at most ${KNOWLEDGE_SECTION_MAX_CHARS}. Condense it, or split it into sections by topic.`,
    );
  }
  const others = await trx
    .selectFrom('memory_knowledge')
    .select((eb) => eb.fn.coalesce(eb.fn.sum<string>(sql`length(content)`), eb.lit(0)).as('n'))
    .where('agent_id', '=', agentId)
    .where('title', '!=', section)
    .executeTakeFirstOrThrow();
  const total = Number(others.n) + body.length;
  if (total > KNOWLEDGE_TOTAL_MAX_CHARS) {
    throw new MemoryLimitError(
      `curated knowledge would total ${total} characters; the limit is ${KNOWLEDGE_TOTAL_MAX_CHARS}. Condense or delete sections that are stale before adding more.`,
    );
  }
  const now = new Date();
  const existing = await trx
    .selectFrom('memory_knowledge')
    .select('title')
    .where('agent_id', '=', agentId)
    .where('title', '=', section)
    .executeTakeFirst();
  if (existing) {
    await trx
      .updateTable('memory_knowledge')
      .set({ content: body, updated_at: now })
      .where('agent_id', '=', agentId)
      .where('title', '=', section)
      .execute();
  } else {
    await trx
      .insertInto('memory_knowledge')
      .values({ agent_id: agentId, title: section, content: body, created_at: now, updated_at: now })
      .execute();
  }
  return { created: !existing, totalChars: total };
}

export type KnowledgeEdit =
  | { mode: 'replace'; section: string; content: string }
  | { mode: 'patch'; section: string; oldText: string; newText: string }
  | { mode: 'delete'; section: string };

/** memory_update's section edits, each in one transaction under the agent lock. */
export async function editKnowledge(db: Kysely<Database>, agentId: string, edit: KnowledgeEdit): Promise<string> {
  return db.transaction().execute(async (trx) => {
    await lockAgent(trx, agentId);
    const title = normaliseSectionTitle(edit.section);
    const current = await trx
      .selectFrom('memory_knowledge')
      .select('content')
      .where('agent_id', '=', agentId)
      .where('title', '=', title)
      .executeTakeFirst();
    if (edit.mode === 'delete') {
      if (!current) throw new MemoryLimitError(`there is no knowledge section "${title}"`);
      await trx.deleteFrom('memory_knowledge').where('agent_id', '=', agentId).where('title', '=', title).execute();
      return `Deleted knowledge section "${title}".`;
    }
    if (edit.mode === 'replace') {
      const { created, totalChars } = await putKnowledgeSection(trx, agentId, title, edit.content);
      return `${created ? 'Created' : 'Replaced'} knowledge section "${title}" (${edit.content.trim().length} characters; ${totalChars}/${KNOWLEDGE_TOTAL_MAX_CHARS} in all).`;
    }
    if (!current)
      throw new MemoryLimitError(`there is no knowledge section "${title}" to patch; use mode "replace" to create it`);
    const at = current.content.indexOf(edit.oldText);
    if (!edit.oldText || at < 0)
      throw new MemoryLimitError(
        `the text to replace was not found in section "${title}"; copy it exactly from the section`,
      );
    const patched = current.content.slice(0, at) + edit.newText + current.content.slice(at + edit.oldText.length);
    const { totalChars } = await putKnowledgeSection(trx, agentId, title, patched);
    return `Patched knowledge section "${title}" (${patched.trim().length} characters; ${totalChars}/${KNOWLEDGE_TOTAL_MAX_CHARS} in all).`;
  });
}

// ---- prompt ------------------------------------------------------------------------------------

/**
 * What the prompt assembly injects: curated knowledge in section order, cut at
 * 8,000 characters (titles included; the section that crosses the line is truncated with a marker),
 * and the whole notebook, most recently updated first. Observations are never injected.
 *
 * @example
 * const { knowledge, notebook } = await loadMemoryForPrompt(db, 'reviewer');
 * // knowledge: [{ title: 'Conventions', content: 'Tabs, not spaces…' }]
 * // notebook:  [{ key: 'priorities', content: 'Finish the auth review', tag: 'agent', updatedAt: Date }]
 */
export async function loadMemoryForPrompt(
  db: Db,
  agentId: string,
): Promise<{ knowledge: KnowledgeSection[]; notebook: NotebookEntry[] }> {
  const [sections, notebook] = await Promise.all([listKnowledge(db, agentId), listNotebook(db, agentId)]);
  return { knowledge: capKnowledge(sections, KNOWLEDGE_PROMPT_MAX_CHARS), notebook };
}

export const KNOWLEDGE_TRUNCATION_MARKER = '\n[… truncated; memory_search finds the rest]';

/** Keeps whole sections while they fit in `maxChars` (title + content); truncates the one that crosses it. */
export function capKnowledge(sections: KnowledgeSection[], maxChars: number): KnowledgeSection[] {
  const out: KnowledgeSection[] = [];
  let used = 0;
  for (const s of sections) {
    const size = s.title.length + s.content.length;
    if (used + size <= maxChars) {
      out.push(s);
      used += size;
      continue;
    }
    const room = maxChars - used - s.title.length - KNOWLEDGE_TRUNCATION_MARKER.length;
    if (room > 0) out.push({ title: s.title, content: s.content.slice(0, room) + KNOWLEDGE_TRUNCATION_MARKER });
    break;
  }
  return out;
}
