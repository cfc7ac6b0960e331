/**
 * The inbox's sign-in sessions and their defences against cross-site request forgery.
 *
 * A person signs in once (an operator token typed into a form, never a URL; or single sign-on) and
 * gets a short-lived server-side session: the browser holds only a random id in an HttpOnly,
 * SameSite=Strict cookie (Secure when the request came over TLS), the database holds its hash, who it
 * is and a per-session form token. Every state-changing post must come from this API's own origin
 * (`Origin` checked: SameSite alone lets a page on another port of the same host through) and carry the
 * session's form token.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../schema/database';
import { ApiError } from './errors';
import type { ApiPrincipal, TokenScope } from './tokens';
import type { OrgScope } from '../activities/store/tenancy';

/** The session cookie's name. */
export const SESSION_COOKIE = 'da_session';
/** A session ends this long after its last use: a decision desk left open is not a standing credential. */
export const SESSION_IDLE_MS = 30 * 60_000;
/** …and at the latest this long after sign-in, whatever its use. */
export const SESSION_MAX_MS = 8 * 3600_000;
/** Random bytes in a session id and a form token (256 bits: not guessable). */
const SESSION_SECRET_BYTES = 32;

const hash = (value: string): string => createHash('sha256').update(value).digest('hex');

export interface InboxSession extends ApiPrincipal {
  csrfToken: string;
}

/** Opens a session for `who`; returns the cookie value (the only place the id exists in clear). */
export async function openSession(
  db: Kysely<Database>,
  who: { name: string; scope: TokenScope; org: OrgScope; tokenId?: string; groups?: string[] },
): Promise<{ id: string; csrfToken: string }> {
  const id = randomBytes(SESSION_SECRET_BYTES).toString('base64url');
  const csrfToken = randomBytes(SESSION_SECRET_BYTES).toString('base64url');
  await db.deleteFrom('inbox_sessions').where('expires_at', '<', new Date()).execute();
  await db
    .insertInto('inbox_sessions')
    .values({
      id_hash: hash(id),
      name: who.name,
      scope: who.scope,
      token_id: who.tokenId ?? null,
      csrf_token: csrfToken,
      groups: who.groups ? JSON.stringify(who.groups) : null,
      org: who.org,
      expires_at: new Date(Date.now() + SESSION_IDLE_MS),
    })
    .execute();
  return { id, csrfToken };
}

/**
 * The live session behind a cookie value, its idle deadline moved on; undefined when unknown, expired,
 * past its maximum age, or signed in with a token revoked since.
 */
export async function findSession(db: Kysely<Database>, id: string): Promise<InboxSession | undefined> {
  if (!/^[A-Za-z0-9_-]{43}$/.test(id)) return undefined;
  const row = await db
    .selectFrom('inbox_sessions')
    .leftJoin('api_tokens', 'api_tokens.id', 'inbox_sessions.token_id')
    .select([
      'inbox_sessions.id_hash',
      'inbox_sessions.name',
      'inbox_sessions.scope',
      'inbox_sessions.token_id',
      'inbox_sessions.csrf_token',
      'inbox_sessions.groups',
      'inbox_sessions.org',
      'inbox_sessions.created_at',
      'inbox_sessions.expires_at',
      'api_tokens.revoked_at',
    ])
    .where('inbox_sessions.id_hash', '=', hash(id))
    .executeTakeFirst();
  const now = Date.now();
  if (
    !row ||
    row.expires_at.getTime() <= now ||
    now - row.created_at.getTime() >= SESSION_MAX_MS ||
    (row.token_id !== null && row.revoked_at !== null)
  )
    return undefined;
  const expires = Math.min(now + SESSION_IDLE_MS, row.created_at.getTime() + SESSION_MAX_MS);
  await db
    .updateTable('inbox_sessions')
    .set({ expires_at: new Date(expires) })
    .where('id_hash', '=', row.id_hash)
    .execute();
  return {
    tokenId: row.token_id ?? `session-${row.id_hash.slice(0, 12)}`,
    name: row.name,
    scope: row.scope,
    org: row.org,
    csrfToken: row.csrf_token,
    ...(row.groups ? { groups: row.groups } : {}),
  };
}

export async function closeSession(db: Kysely<Database>, id: string): Promise<void> {
  await db.deleteFrom('inbox_sessions').where('id_hash', '=', hash(id)).execute();
}

/** Whether the request reached us over TLS (directly, or through a proxy Fastify trusts). */
const overTls = (request: FastifyRequest): boolean => request.protocol === 'https';

/** Sets the session cookie: HttpOnly, SameSite=Strict, scoped to the inbox, Secure behind TLS, gone with the session. */
export function setSessionCookie(request: FastifyRequest, reply: FastifyReply, id: string): void {
  const attributes = [
    `${SESSION_COOKIE}=${id}`,
    'HttpOnly',
    'SameSite=Strict',
    'Path=/inbox',
    `Max-Age=${Math.floor(SESSION_MAX_MS / 1000)}`,
  ];
  if (overTls(request)) attributes.push('Secure');
  void reply.header('set-cookie', attributes.join('; '));
}

export function clearSessionCookie(request: FastifyRequest, reply: FastifyReply): void {
  const attributes = [`${SESSION_COOKIE}=`, 'HttpOnly', 'SameSite=Strict', 'Path=/inbox', 'Max-Age=0'];
  if (overTls(request)) attributes.push('Secure');
  void reply.header('set-cookie', attributes.join('; '));
}

/** The origin this request was addressed to (scheme, host and port), as a browser would write it in `Origin`. */
export function ownOrigin(request: FastifyRequest): string {
  return `${request.protocol}://${request.host}`;
}

/**
 * Refuses a state-changing browser request that did not come from one of the API's own pages: its
 * `Origin` must be this API's origin (a page on another port of the same host is another origin,
 * though the same site), and, once signed in, its form must carry the session's token.
 */
export function requireSameOrigin(request: FastifyRequest): void {
  const origin = request.headers.origin;
  if (origin !== ownOrigin(request)) {
    throw new ApiError(
      403,
      'cross_origin',
      `refused: this form must be posted from the inbox itself (${ownOrigin(request)}), not from ${origin ?? 'a request without an Origin header'}`,
    );
  }
}

export function requireFormToken(session: InboxSession, form: Record<string, string>): void {
  const sent = Buffer.from(form.csrf ?? '');
  const expected = Buffer.from(session.csrfToken);
  if (sent.length !== expected.length || !timingSafeEqual(sent, expected))
    throw new ApiError(
      403,
      'csrf_token_invalid',
      'refused: the form token is missing or stale; reload the inbox and try again',
    );
}
