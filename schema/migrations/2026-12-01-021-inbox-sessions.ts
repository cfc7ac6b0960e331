import { sql, type Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
// The inbox's sign-in sessions (issue 21): server-side, so signing out or expiring ends them on every
// API process, and the browser holds only a random id. Stored as hashes, like tokens.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('inbox_sessions')
    // sha256 of the cookie's random value.
    .addColumn('id_hash', 'text', (c) => c.primaryKey())
    // Who signed in: a token's name, or the identity an OpenID provider vouched for.
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('scope', 'text', (c) => c.notNull().check(sql`scope in ('operator', 'service', 'read')`))
    // The token signed in with (revoking it ends its sessions); null for a single sign-on.
    .addColumn('token_id', 'text')
    // The form token every state-changing post must carry.
    .addColumn('csrf_token', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('inbox_sessions_expires').on('inbox_sessions').column('expires_at').execute();
  // Single sign-on logins under way: what the callback needs to finish one (authorization code + PKCE),
  // kept server-side so any API process can take the callback. One use each, minutes long.
  await db.schema
    .createTable('inbox_sso_logins')
    // sha256 of the `state` parameter (the browser holds it in a cookie too, so a callback is bound to it).
    .addColumn('state_hash', 'text', (c) => c.primaryKey())
    .addColumn('code_verifier', 'text', (c) => c.notNull())
    .addColumn('nonce', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('inbox_sso_logins').execute();
  await db.schema.dropTable('inbox_sessions').execute();
}
