/**
 * The memory module's public surface: the store (notebook, observations, knowledge, daily logs), what
 * prompt assembly injects, the memory tools and `edit_agent_file`, and the scheduled workflows' activities.
 */
export {
  clearNotebook,
  listNotebook,
  localDay,
  MemoryLimitError,
  saveObservation,
  upsertNotebookEntry,
  writeDailyLog,
  type KnowledgeSection,
  type NotebookEntry,
  type Observation,
} from './store';
export { capKnowledge, listKnowledge, loadMemoryForPrompt } from './knowledge-store';
export { searchMemory, type SearchHit } from './search';
export { memoryAliases, memoryTools } from './tools';
export { editAgentFile } from './self-edit';
export { createMemoryActivities, type MemoryActivities } from './memory-activities';
