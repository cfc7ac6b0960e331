/**
 * "The folder seeds an agent once; later edits win unless forced." An agent's identity files came from
 * its own `edit_agent_file` when the newest self-edit produced the content hash the agent has now
 * (the content hash is the etag). A re-upsert from the folder (`npm start`, `agent upsert`) then keeps
 * them and updates only name, description, config and workspace, unless the caller forces it; after a
 * forced upsert the folder's files are current again, so the next re-upsert follows the folder until
 * the agent edits itself again.
 */
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../schema/database';

export async function identityIsSelfEdited(
  db: Kysely<Database> | Transaction<Database>,
  agentId: string,
): Promise<boolean> {
  const row = await db
    .selectFrom('agents')
    .leftJoin(
      (eb) =>
        eb
          .selectFrom('agent_file_edits')
          .select(['agent_id', 'after_hash'])
          .where('agent_id', '=', agentId)
          .orderBy('id', 'desc')
          .limit(1)
          .as('last_edit'),
      (join) => join.onRef('last_edit.agent_id', '=', 'agents.id'),
    )
    .select(['agents.content_hash', 'last_edit.after_hash'])
    .where('agents.id', '=', agentId)
    .executeTakeFirst();
  return row?.after_hash !== null && row?.after_hash !== undefined && row.after_hash === row.content_hash;
}
