import { sql, type Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
// The MCP tools one LLM step offered (issue 22): recorded when the step first runs, so a retried or
// resumed step, and the tool calls it made, see the same definitions in the same order whatever the
// servers list now. Holds definitions only, never a server's configuration or secrets.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('mcp_tool_snapshots')
    .addColumn('session_id', 'text', (c) => c.notNull())
    // The step's key within the session (its assistant message's key).
    .addColumn('step_key', 'text', (c) => c.notNull())
    // [{ server, tool, name, description, inputSchema, annotations }] in the order offered.
    .addColumn('tools', 'jsonb', (c) => c.notNull())
    // [{ server, tool?, reason }]: servers that did not answer and tools refused (bad schema, bad name).
    .addColumn('refused', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('mcp_tool_snapshots_pk', ['session_id', 'step_key'])
    .execute();
  // MCP servers a skill brings (its folder's mcp.json) and an organisation gives all its agents: the
  // `mcpServers` shape, with `${NAME}` references only (the worker resolves them; no secret is stored).
  await db.schema.alterTable('skills').addColumn('mcp_servers', 'jsonb').execute();
  await db.schema.alterTable('organisations').addColumn('mcp_servers', 'jsonb').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('organisations').dropColumn('mcp_servers').execute();
  await db.schema.alterTable('skills').dropColumn('mcp_servers').execute();
  await db.schema.dropTable('mcp_tool_snapshots').execute();
}
