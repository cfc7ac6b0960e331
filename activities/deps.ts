import type { Kysely } from 'kysely';
import type { Database } from '../schema/database';
import type { ChatRouter } from './llm/types';

/** What every activity factory closes over: the database and the LLM router. */
export interface ActivityDeps {
  db: Kysely<Database>;
  router: ChatRouter;
}
