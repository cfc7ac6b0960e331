import { sql, type Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
// Governance (issue 8): how many secrets were redacted from each tool result, and the remote URLs a
// workspace's repositories may talk to (recorded at first sight, or approved by a human).
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('tool_calls')
    .addColumn('redactions', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .createTable('workspace_remotes')
    // The real path of the workspace directory the repository lives in.
    .addColumn('workspace_dir', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('source', 'text', (c) => c.notNull().check(sql`source in ('first-sight', 'approved')`))
    .addColumn('agent_id', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('workspace_remotes_pk', ['workspace_dir', 'url'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('workspace_remotes').ifExists().execute();
  await db.schema.alterTable('tool_calls').dropColumn('redactions').execute();
}
