/** memory_search: full-text search over an agent's observations and knowledge. */
import { sql } from 'kysely';
import { MEMORY_SEARCH_DEFAULT_LIMIT, MEMORY_SEARCH_MAX_LIMIT } from '../../workflows/rules/memory-limits';
import { recentObservations, toObservation, type Db } from './store';
import { listKnowledge } from './knowledge-store';

export type SearchHit =
  | { kind: 'observation'; id: string; type: string; tags: string[]; content: string; createdAt: Date }
  | { kind: 'knowledge'; title: string; content: string };

/**
 * Full-text search (PostgreSQL `websearch_to_tsquery`, English stemming) over observations and
 * knowledge, ranked; a tag equal to the query also matches. When full-text finds nothing (stop words,
 * partial words) a substring match is tried. An empty query lists the most recent observations.
 */
export async function searchMemory(
  db: Db,
  agentId: string,
  query: string,
  options: { limit?: number; scope?: 'all' | 'observations' | 'knowledge' } = {},
): Promise<SearchHit[]> {
  const limit = Math.min(Math.max(1, options.limit ?? MEMORY_SEARCH_DEFAULT_LIMIT), MEMORY_SEARCH_MAX_LIMIT);
  const scope = options.scope ?? 'all';
  const q = query.trim();
  if (!q) {
    if (scope === 'knowledge')
      return (await listKnowledge(db, agentId)).slice(0, limit).map((k) => ({ kind: 'knowledge' as const, ...k }));
    return (await recentObservations(db, agentId, limit)).map((o) => ({ kind: 'observation' as const, ...o }));
  }
  const hits: SearchHit[] = [];
  if (scope !== 'observations') {
    let rows = (
      await sql<{ title: string; content: string }>`
        select title, content from memory_knowledge, websearch_to_tsquery('english', ${q}) query
        where agent_id = ${agentId} and search @@ query
        order by ts_rank(search, query) desc, position limit ${limit}`.execute(db)
    ).rows;
    if (rows.length === 0) {
      rows = (
        await sql<{ title: string; content: string }>`
          select title, content from memory_knowledge
          where agent_id = ${agentId} and (title || ' ' || content) ilike ${likePattern(q)}
          order by position limit ${limit}`.execute(db)
      ).rows;
    }
    hits.push(...rows.map((r) => ({ kind: 'knowledge' as const, title: r.title, content: r.content })));
  }
  if (scope !== 'knowledge') {
    type Row = { id: string; type: string; tags: string[]; content: string; created_at: Date };
    let rows = (
      await sql<Row>`
        select id, type, tags, content, created_at from memory_observations, websearch_to_tsquery('english', ${q}) query
        where agent_id = ${agentId} and (search @@ query or ${q} = any(tags))
        order by ts_rank(search, query) desc, seq desc limit ${limit}`.execute(db)
    ).rows;
    if (rows.length === 0) {
      rows = (
        await sql<Row>`
          select id, type, tags, content, created_at from memory_observations
          where agent_id = ${agentId} and content ilike ${likePattern(q)}
          order by seq desc limit ${limit}`.execute(db)
      ).rows;
    }
    hits.push(...rows.map((r) => ({ kind: 'observation' as const, ...toObservation(r) })));
  }
  return hits.slice(0, limit);
}

function likePattern(q: string): string {
  return `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}
