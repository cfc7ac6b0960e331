import type { Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
// The groups a person signed in with (their OIDC groups claim, as a JSON array of strings): an
// approval policy's `@group` lets them decide. Null for sessions opened with a token.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('inbox_sessions').addColumn('groups', 'jsonb').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('inbox_sessions').dropColumn('groups').execute();
}
