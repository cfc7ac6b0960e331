import { z } from 'zod';
import {
  KNOWLEDGE_SECTION_MAX_CHARS,
  MEMORY_SEARCH_MAX_LIMIT,
  MEMORY_SEARCH_PREVIEW_CHARS,
  NOTEBOOK_KEY_MAX_CHARS,
  NOTEBOOK_MAX_AGENT_ENTRIES,
  NOTEBOOK_MAX_CHARS_PER_ENTRY,
  OBSERVATION_MAX_TAGS,
  OBSERVATION_TAG_MAX_CHARS,
  OBSERVATION_TYPES,
  OBSERVATIONS_MAX,
} from '../../workflows/rules/memory-limits';
import { defineTool, type ToolContext, type ToolOutput, type ToolSpec } from '../tools/types';
import {
  clearNotebook,
  deleteObservations,
  MemoryLimitError,
  observationId,
  saveObservation,
  upsertNotebookEntry,
} from './store';
import { searchMemory, type SearchHit } from './search';
import { editKnowledge } from './knowledge-store';

/**
 * The memory tools: five primary tools and six legacy aliases that share their handlers.
 * Limits come from `workflows/rules/memory-limits.ts`; a write that breaks one is refused with a message
 * that says what to do instead (the model reads it as the tool's error result).
 */

/** Runs a handler, turning a refused write into an error result the model can act on. */
async function guarded(run: () => Promise<string>): Promise<ToolOutput> {
  try {
    return { content: await run() };
  } catch (error) {
    if (error instanceof MemoryLimitError) return { content: error.message, isError: true };
    throw error;
  }
}

// ---- handlers (shared by the primary tools and their aliases) ----------------------------------

const notebookArgs = z
  .object({
    key: z
      .string()
      .min(1)
      .max(NOTEBOOK_KEY_MAX_CHARS)
      .describe('Short label, e.g. "priorities", "blockers", "decision-auth"'),
    content: z
      .string()
      .max(NOTEBOOK_MAX_CHARS_PER_ENTRY)
      .describe(`The entry's text (at most ${NOTEBOOK_MAX_CHARS_PER_ENTRY} characters)`),
  })
  .strict();

function updateNotebookHandler(args: z.infer<typeof notebookArgs>, ctx: ToolContext): Promise<ToolOutput> {
  return guarded(async () => {
    const { created, evicted } = await upsertNotebookEntry(ctx.db, ctx.agentId, {
      key: args.key,
      content: args.content,
    });
    const note = evicted.length
      ? ` The notebook keeps ${NOTEBOOK_MAX_AGENT_ENTRIES} entries; evicted the oldest: ${evicted.join(', ')}.`
      : '';
    return `Notebook entry "${args.key.trim()}" ${created ? 'added' : 'updated'}.${note}`;
  });
}

const clearArgs = z
  .object({
    key: z
      .string()
      .min(1)
      .max(NOTEBOOK_KEY_MAX_CHARS)
      .optional()
      .describe('The entry to remove; omit to remove all of your entries'),
  })
  .strict();

function clearNotebookHandler(args: z.infer<typeof clearArgs>, ctx: ToolContext): Promise<ToolOutput> {
  return guarded(async () => {
    const removed = await clearNotebook(ctx.db, ctx.agentId, args.key);
    if (args.key && removed.length === 0) throw new MemoryLimitError(`you have no notebook entry "${args.key}"`);
    return removed.length
      ? `Removed notebook ${removed.length === 1 ? 'entry' : 'entries'}: ${removed.join(', ')}.`
      : 'The notebook had no entries of yours.';
  });
}

const saveArgs = z
  .object({
    content: z.string().min(1).describe('One fact, lesson or outcome, self-contained'),
    type: z.enum(OBSERVATION_TYPES).optional().describe('Default: note'),
    tags: z
      .array(z.string().min(1).max(OBSERVATION_TAG_MAX_CHARS))
      .max(OBSERVATION_MAX_TAGS)
      .optional()
      .describe('e.g. ["insight", "domain:billing"]'),
  })
  .strict();

function memorySaveHandler(args: z.infer<typeof saveArgs>, ctx: ToolContext): Promise<ToolOutput> {
  return guarded(async () => {
    const { id, trimmed } = await saveObservation(ctx.db, ctx.agentId, {
      id: observationId(ctx.sessionId, ctx.toolCallId),
      type: args.type ?? 'note',
      tags: args.tags,
      content: args.content,
      source: ctx.sessionId,
    });
    const note = trimmed ? ` The buffer keeps ${OBSERVATIONS_MAX} observations; trimmed the ${trimmed} oldest.` : '';
    return `Saved observation ${id}.${note}`;
  });
}

const updateArgs = z
  .object({
    mode: z
      .enum(['replace', 'patch', 'delete'])
      .describe(
        "replace: set a section's content (creates it); patch: replace old_text with new_text in a section; delete: remove a section, or observations by ids",
      ),
    section: z.string().min(1).optional().describe('Knowledge section title'),
    content: z
      .string()
      .max(KNOWLEDGE_SECTION_MAX_CHARS)
      .optional()
      .describe(`replace: the section's new content (at most ${KNOWLEDGE_SECTION_MAX_CHARS} characters)`),
    old_text: z.string().optional().describe('patch: exact text to replace'),
    new_text: z.string().optional().describe('patch: replacement text'),
    ids: z
      .array(z.string().min(1))
      .max(MEMORY_SEARCH_MAX_LIMIT)
      .optional()
      .describe('delete: observation ids (from memory_search)'),
  })
  .strict();

function memoryUpdateHandler(args: z.infer<typeof updateArgs>, ctx: ToolContext): Promise<ToolOutput> {
  return guarded(async () => {
    switch (args.mode) {
      case 'replace':
        if (!args.section || args.content === undefined)
          throw new MemoryLimitError('mode "replace" needs section and content');
        return editKnowledge(ctx.db, ctx.agentId, { mode: 'replace', section: args.section, content: args.content });
      case 'patch':
        if (!args.section || args.old_text === undefined || args.new_text === undefined)
          throw new MemoryLimitError('mode "patch" needs section, old_text and new_text');
        return editKnowledge(ctx.db, ctx.agentId, {
          mode: 'patch',
          section: args.section,
          oldText: args.old_text,
          newText: args.new_text,
        });
      case 'delete':
        if (args.ids?.length) return deleteObservationsText(ctx, args.ids);
        if (!args.section) throw new MemoryLimitError('mode "delete" needs a section or observation ids');
        return editKnowledge(ctx.db, ctx.agentId, { mode: 'delete', section: args.section });
    }
  });
}

async function deleteObservationsText(ctx: ToolContext, ids: string[]): Promise<string> {
  const deleted = await deleteObservations(ctx.db, ctx.agentId, ids);
  const missing = ids.filter((id) => !deleted.includes(id));
  if (deleted.length === 0) throw new MemoryLimitError(`no observation with id ${ids.join(', ')}`);
  return `Deleted ${deleted.length} observation(s): ${deleted.join(', ')}.${missing.length ? ` Not found: ${missing.join(', ')}.` : ''}`;
}

const searchArgs = z
  .object({
    query: z.string().max(500).describe('Words to look for; empty lists your most recent observations'),
    limit: z.number().int().min(1).max(MEMORY_SEARCH_MAX_LIMIT).optional(),
    scope: z.enum(['all', 'observations', 'knowledge']).optional().describe('Default: all'),
  })
  .strict();

function memorySearchHandler(args: z.infer<typeof searchArgs>, ctx: ToolContext): Promise<ToolOutput> {
  return guarded(async () => {
    const hits = await searchMemory(ctx.db, ctx.agentId, args.query, { limit: args.limit, scope: args.scope });
    const what = args.query.trim() ? `for "${args.query.trim()}"` : '(most recent)';
    if (hits.length === 0) return `No memory entries ${what}.`;
    return [`${hits.length} memory entr${hits.length === 1 ? 'y' : 'ies'} ${what}:`, ...hits.map(formatHit)].join('\n');
  });
}

function formatHit(hit: SearchHit): string {
  const preview = (text: string) =>
    text.length > MEMORY_SEARCH_PREVIEW_CHARS ? `${text.slice(0, MEMORY_SEARCH_PREVIEW_CHARS)}…` : text;
  if (hit.kind === 'knowledge') return `- [knowledge § ${hit.title}] ${preview(hit.content)}`;
  const tags = hit.tags.length ? ` · tags: ${hit.tags.join(', ')}` : '';
  return `- [${hit.id}] ${hit.type}${tags} · ${hit.createdAt.toISOString().slice(0, 16).replace('T', ' ')}: ${preview(hit.content)}`;
}

// ---- primary tools -----------------------------------------------------------------------------

export const updateNotebook = defineTool({
  name: 'update_notebook',
  description:
    `Upsert a keyed entry in your notebook: a short situational workspace shown in every prompt (priorities, context, decisions, blockers). ` +
    `At most ${NOTEBOOK_MAX_AGENT_ENTRIES} entries of ${NOTEBOOK_MAX_CHARS_PER_ENTRY} characters; the oldest is evicted. Do not store raw messages; use memory_save for durable observations.`,
  schema: notebookArgs,
  sideEffecting: true,
  summarize: (a) => `update_notebook: ${a.key}`,
  run: updateNotebookHandler,
});

export const clearNotebookTool = defineTool({
  name: 'clear_notebook',
  description: 'Remove one of your notebook entries (by key) when it is no longer relevant, or all of them.',
  schema: clearArgs,
  sideEffecting: true,
  summarize: (a) => `clear_notebook: ${a.key ?? 'all'}`,
  run: clearNotebookHandler,
});

export const memorySave = defineTool({
  name: 'memory_save',
  description:
    `Save an observation to long-term memory (a fact, lesson, outcome). Observations are not shown in prompts; find them with memory_search. ` +
    `The buffer keeps the ${OBSERVATIONS_MAX} most recent.`,
  schema: saveArgs,
  sideEffecting: true,
  summarize: (a) => `memory_save: ${a.content.slice(0, 80)}`,
  run: memorySaveHandler,
});

export const memoryUpdate = defineTool({
  name: 'memory_update',
  description:
    `Edit your curated knowledge (the "Your Knowledge" sections shown in every prompt): replace or create a section, patch text in it, or delete it; ` +
    `or delete observations by id. Sections hold at most ${KNOWLEDGE_SECTION_MAX_CHARS} characters each and 15,000 in all.`,
  schema: updateArgs,
  sideEffecting: true,
  summarize: (a) => `memory_update ${a.mode}: ${a.section ?? a.ids?.join(', ') ?? ''}`,
  run: memoryUpdateHandler,
});

export const memorySearch = defineTool({
  name: 'memory_search',
  description:
    'Search your observations and curated knowledge (full-text). An empty query lists your most recent observations.',
  schema: searchArgs,
  sideEffecting: false,
  summarize: (a) => `memory_search: ${a.query || '(recent)'}`,
  run: memorySearchHandler,
});

// ---- legacy aliases (same handlers) -----------------------------------------------------

function alias(spec: ToolSpec, name: string): ToolSpec {
  return { ...spec, name, description: `${spec.description} (Legacy name of ${spec.name}.)` };
}

const listArgs = z.object({ limit: z.number().int().min(1).max(MEMORY_SEARCH_MAX_LIMIT).optional() }).strict();
const deleteArgs = z.object({ ids: z.array(z.string().min(1)).min(1).max(MEMORY_SEARCH_MAX_LIMIT) }).strict();

export const memoryAliases: ToolSpec[] = [
  alias(updateNotebook, 'update_working_memory'),
  alias(clearNotebookTool, 'clear_working_memory'),
  alias(memoryUpdate, 'memory_update_longterm'),
  alias(memorySearch, 'memory_search_longterm'),
  defineTool({
    name: 'memory_list',
    description: 'List your most recent observations. (Legacy name of memory_search with an empty query.)',
    schema: listArgs,
    sideEffecting: false,
    summarize: () => 'memory_list',
    run: (args, ctx) => memorySearchHandler({ query: '', limit: args.limit, scope: 'observations' }, ctx),
  }),
  defineTool({
    name: 'memory_delete',
    description: 'Delete observations by id. (Legacy name of memory_update with mode "delete".)',
    schema: deleteArgs,
    sideEffecting: true,
    summarize: (a) => `memory_delete: ${a.ids.join(', ')}`,
    run: (args, ctx) => memoryUpdateHandler({ mode: 'delete', ids: args.ids }, ctx),
  }),
];

export const memoryTools: ToolSpec[] = [updateNotebook, clearNotebookTool, memorySave, memoryUpdate, memorySearch];
