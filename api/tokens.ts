/**
 * Bearer tokens for the HTTP API. A token is `da_<id>_<secret>`; only the sha256 of the whole token is
 * stored, so a database dump reveals no usable token. Scopes nest: `operator` ⊃ `service` ⊃ `read`.
 * A token acts for one organisation (`DEFAULT_ORG` unless created for another) and reaches nothing of
 * any other; only a platform token (organisation `PLATFORM`) spans them all.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../schema/database';
import { DEFAULT_ORG, PLATFORM, type OrgScope } from '../activities/store/tenancy';
import { ORG_NAME_PATTERN } from '../activities/store/organisations';

export const TOKEN_SCOPES = ['read', 'service', 'operator'] as const;
export type TokenScope = (typeof TOKEN_SCOPES)[number];

/** 32 random bytes: guessing is hopeless, so a fast hash is enough to store it. */
const TOKEN_SECRET_BYTES = 32;
/** A token's name is shown as "decided by"; keep it short and printable. */
export const TOKEN_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9 ._@-]{0,62}$/;
/** last_used_at is written at most this often per token, so reads do not turn into writes. */
const LAST_USED_WRITE_INTERVAL_MS = 60_000;

export interface ApiPrincipal {
  tokenId: string;
  name: string;
  scope: TokenScope;
  /** A person signed in through OIDC: the groups in their groups claim. */
  groups?: string[];
  /** The organisation the principal acts for; `PLATFORM` (null) for the platform operator alone. */
  org: OrgScope;
}

/**
 * The groups an approval policy's `@group` matches for this caller: the OIDC groups they signed in
 * with, and the token's scope by name (`@operator` with an empty `operator` group: any operator).
 */
export function approverGroupsOf(principal: ApiPrincipal): string[] {
  return [...new Set([...(principal.groups ?? []), principal.scope])];
}

export interface TokenInfo {
  id: string;
  name: string;
  scope: TokenScope;
  /** null: a platform token, which spans organisations. */
  org: OrgScope;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

const hashToken = (token: string): string => createHash('sha256').update(token).digest('hex');

/** Whether a principal of `have` may do what needs `need`. */
export function scopeAllows(have: TokenScope, need: TokenScope): boolean {
  return TOKEN_SCOPES.indexOf(have) >= TOKEN_SCOPES.indexOf(need);
}

/**
 * Creates a token for one organisation (default `DEFAULT_ORG`; `PLATFORM` for a platform token, which
 * only an operator-scope token may be); the secret is returned once and never stored.
 */
export async function createToken(
  db: Kysely<Database>,
  name: string,
  scope: TokenScope,
  options: { org?: OrgScope } = {},
): Promise<{ token: string; id: string }> {
  const org = options.org === undefined ? DEFAULT_ORG : options.org;
  if (org === PLATFORM && scope !== 'operator')
    throw new Error(
      `a platform token spans organisations and must have scope "operator", not ${JSON.stringify(scope)}`,
    );
  if (org !== PLATFORM && !ORG_NAME_PATTERN.test(org))
    throw new Error(`invalid organisation ${JSON.stringify(org)}: 1-63 lowercase letters, digits, '-' or '_'`);
  if (!TOKEN_NAME_PATTERN.test(name))
    throw new Error(`invalid token name ${JSON.stringify(name)}: 1-63 letters, digits, space, '.', '_', '@' or '-'`);
  if (!TOKEN_SCOPES.includes(scope))
    throw new Error(`invalid scope ${JSON.stringify(scope)}: use one of ${TOKEN_SCOPES.join(', ')}`);
  const existing = await db
    .selectFrom('api_tokens')
    .select('id')
    .where('name', '=', name)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  if (existing)
    throw new Error(`a token named ${JSON.stringify(name)} already exists; revoke it first or pick another name`);
  // A revoked token keeps its row (audit); free the name for reuse.
  await db
    .updateTable('api_tokens')
    .set({ name: `${name} (revoked ${Date.now()})` })
    .where('name', '=', name)
    .execute();
  const id = randomBytes(6).toString('hex');
  const token = `da_${id}_${randomBytes(TOKEN_SECRET_BYTES).toString('base64url')}`;
  await db
    .insertInto('api_tokens')
    .values({ id, name, scope, org, token_hash: hashToken(token) })
    .execute();
  return { token, id };
}

/** Revokes by id or name. Returns false when no live token matched. */
export async function revokeToken(db: Kysely<Database>, idOrName: string): Promise<boolean> {
  const result = await db
    .updateTable('api_tokens')
    .set({ revoked_at: new Date() })
    .where((eb) => eb.or([eb('id', '=', idOrName), eb('name', '=', idOrName)]))
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export async function listTokens(db: Kysely<Database>): Promise<TokenInfo[]> {
  const rows = await db.selectFrom('api_tokens').selectAll().orderBy('created_at').execute();
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    scope: r.scope,
    org: r.org,
    createdAt: r.created_at,
    lastUsedAt: r.last_used_at,
    revokedAt: r.revoked_at,
  }));
}

/** Checks a presented token; undefined when unknown, malformed or revoked. */
export async function verifyToken(db: Kysely<Database>, token: string): Promise<ApiPrincipal | undefined> {
  const match = /^da_([0-9a-f]{12})_[A-Za-z0-9_-]{43}$/.exec(token);
  if (!match) return undefined;
  const row = await db.selectFrom('api_tokens').selectAll().where('id', '=', match[1]!).executeTakeFirst();
  if (!row || row.revoked_at !== null) return undefined;
  const presented = Buffer.from(hashToken(token), 'hex');
  if (!timingSafeEqual(presented, Buffer.from(row.token_hash, 'hex'))) return undefined;
  if (!row.last_used_at || Date.now() - row.last_used_at.getTime() > LAST_USED_WRITE_INTERVAL_MS) {
    await db.updateTable('api_tokens').set({ last_used_at: new Date() }).where('id', '=', row.id).execute();
  }
  return { tokenId: row.id, name: row.name, scope: row.scope, org: row.org };
}
