import { sql, type Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
// Images tool calls returned (an MCP server's image content), kept whole for the operator. The session's
// messages carry only the newest few, the ones a request still shows the model, so a session of many
// screenshots stays small to load on every step.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('tool_result_images')
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('tool_call_id', 'text', (c) => c.notNull())
    // The image's place among the call's images.
    .addColumn('position', 'integer', (c) => c.notNull())
    .addColumn('media_type', 'text', (c) => c.notNull())
    // Base64, as the providers take it.
    .addColumn('data', 'text', (c) => c.notNull())
    .addColumn('bytes', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('tool_result_images_pk', ['session_id', 'tool_call_id', 'position'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('tool_result_images').execute();
}
