/**
 * Single sign-on to the inbox through any OpenID Connect provider (authorization code flow with PKCE,
 * `openid-client`). The provider vouches for who the person is; a claim it sends (`groups` by
 * default) maps to one of the API's scopes, and only `operator` may open the inbox. The operator
 * token stays for machines and for a sign-in without a provider.
 *
 * The login's state is kept server-side (`inbox_sso_logins`, one use, minutes long) and in a cookie
 * of the browser that started it, so a callback that this browser did not ask for (login CSRF) or that
 * is replayed finds nothing to finish.
 */
import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import * as oidc from 'openid-client';
import type { Database } from '../schema/database';
import { ApiError } from './errors';
import { openSession, ownOrigin, setSessionCookie } from './inbox-sessions';
import { TOKEN_SCOPES, type TokenScope } from './tokens';
import { DEFAULT_ORG } from '../activities/store/tenancy';
import { ORG_NAME_PATTERN } from '../activities/store/organisations';
import { ConfigurationError, urlFromEnv } from '../activities/env-values';

/** A login must come back from the provider within this time. */
export const SSO_LOGIN_TTL_MS = 10 * 60_000;
/** A groups claim is cut to this many groups: a session row is not a directory. */
export const SSO_GROUPS_MAX = 200;
/** Longer group values are dropped: no approval group name comes near it. */
const SSO_GROUP_MAX_CHARS = 200;

/** The cookie binding a callback to the browser that started the login. Lax: the callback is a top-level navigation from the provider's site. */
const SSO_STATE_COOKIE = 'da_sso_state';

export interface SsoOptions {
  /** The provider's issuer URL (its discovery document is at `/.well-known/openid-configuration`). */
  issuer: string;
  clientId: string;
  /** Absent: a public client (PKCE alone). */
  clientSecret?: string;
  /** The claim that carries the person's roles or groups (a string or an array of strings). */
  roleClaim: string;
  /** Role values per scope: a person with one of `operator`'s roles gets the operator scope, and so on. */
  roles: Partial<Record<TokenScope, string[]>>;
  /** The claim whose values are the person's groups, matched against approval policies' `@group`s (default `groups`). */
  groupsClaim?: string;
  /**
   * The claim that names the person's organisation (`OIDC_ORG_CLAIM`). Unset: every person acts for
   * `DEFAULT_ORG`. Set: a person without a valid organisation in it is refused at sign-in.
   */
  orgClaim?: string;
  /** Where the provider sends the browser back; default `<this API's origin>/inbox/sso/callback`. */
  redirectUrl?: string;
  scopes?: string;
}

/** SSO settings from the environment (`OIDC_*`); undefined when no issuer is set. */
export function ssoFromEnv(env: NodeJS.ProcessEnv = process.env): SsoOptions | undefined {
  const issuer = urlFromEnv('OIDC_ISSUER', env);
  const redirectUrl = urlFromEnv('OIDC_REDIRECT_URL', env);
  if (!issuer) return undefined;
  if (!env.OIDC_CLIENT_ID)
    throw new ConfigurationError(
      'OIDC_ISSUER',
      issuer,
      'only with OIDC_CLIENT_ID: register the inbox with the provider and set its client id',
    );
  const roles: Partial<Record<TokenScope, string[]>> = {};
  for (const scope of TOKEN_SCOPES) {
    const value = env[`OIDC_${scope.toUpperCase()}_ROLES`];
    if (value)
      roles[scope] = value
        .split(',')
        .map((r) => r.trim())
        .filter(Boolean);
  }
  if (!roles.operator?.length)
    throw new ConfigurationError(
      'OIDC_OPERATOR_ROLES',
      env.OIDC_OPERATOR_ROLES ?? '',
      'with OIDC_ISSUER, the provider roles or groups whose members may decide in the inbox, comma-separated',
    );
  return {
    issuer,
    clientId: env.OIDC_CLIENT_ID,
    ...(env.OIDC_CLIENT_SECRET ? { clientSecret: env.OIDC_CLIENT_SECRET } : {}),
    roleClaim: env.OIDC_ROLE_CLAIM || 'groups',
    groupsClaim: env.OIDC_GROUPS_CLAIM || 'groups',
    ...(env.OIDC_ORG_CLAIM ? { orgClaim: env.OIDC_ORG_CLAIM } : {}),
    roles,
    ...(redirectUrl ? { redirectUrl } : {}),
    ...(env.OIDC_SCOPES ? { scopes: env.OIDC_SCOPES } : {}),
  };
}

const hash = (value: string): string => createHash('sha256').update(value).digest('hex');

/** A claim's values: an array of strings, or one string of values separated by spaces or commas. */
function claimValues(claimValue: unknown): string[] {
  return Array.isArray(claimValue)
    ? claimValue.filter((v): v is string => typeof v === 'string')
    : typeof claimValue === 'string'
      ? claimValue.split(/[\s,]+/).filter(Boolean)
      : [];
}

/** The person's groups from the groups claim, for approval policies' `@group`s; bounded in number and length. */
export function groupsFromClaims(options: SsoOptions, claims: Record<string, unknown>): string[] {
  const values = claimValues(claims[options.groupsClaim ?? 'groups']).filter(
    (g) => g !== '' && g.length <= SSO_GROUP_MAX_CHARS,
  );
  return [...new Set(values)].slice(0, SSO_GROUPS_MAX);
}

/**
 * The organisation a person acts for: `DEFAULT_ORG` without an organisation claim configured, else the
 * claim's single valid organisation name; undefined (refused) when the claim is missing, ambiguous or
 * not an organisation name. A person never spans organisations: that takes a platform token.
 */
export function orgFromClaims(options: SsoOptions, claims: Record<string, unknown>): string | undefined {
  if (!options.orgClaim) return DEFAULT_ORG;
  const values = claimValues(claims[options.orgClaim]);
  return values.length === 1 && ORG_NAME_PATTERN.test(values[0]!) ? values[0] : undefined;
}

/** The highest scope any of the person's roles maps to, or undefined. */
export function scopeForRoles(options: SsoOptions, claimValue: unknown): TokenScope | undefined {
  const held = new Set(claimValues(claimValue));
  for (const scope of [...TOKEN_SCOPES].reverse())
    if ((options.roles[scope] ?? []).some((r) => held.has(r))) return scope;
  return undefined;
}

export function registerSso(
  app: FastifyInstance,
  db: Kysely<Database>,
  options: SsoOptions,
  page: (reply: FastifyReply, status: number, problem: string) => FastifyReply,
): void {
  let configuration: Promise<oidc.Configuration> | undefined;
  const provider = (): Promise<oidc.Configuration> => {
    // Discovered once, on first use (the provider may start after the API); a failure is retried next time.
    configuration ??= discover(options).catch((error: unknown) => {
      configuration = undefined;
      throw error;
    });
    return configuration;
  };
  const redirectUrl = (request: FastifyRequest) => options.redirectUrl ?? `${ownOrigin(request)}/inbox/sso/callback`;

  app.get('/inbox/sso', async (request, reply) => {
    const config = await provider().catch((error: unknown) => {
      request.log.error({ err: error }, 'OpenID provider discovery failed');
      throw new ApiError(
        502,
        'sso_unavailable',
        `the sign-in provider ${options.issuer} does not answer; sign in with an operator token meanwhile`,
      );
    });
    const codeVerifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const nonce = oidc.randomNonce();
    await db.deleteFrom('inbox_sso_logins').where('expires_at', '<', new Date()).execute();
    await db
      .insertInto('inbox_sso_logins')
      .values({
        state_hash: hash(state),
        code_verifier: codeVerifier,
        nonce,
        expires_at: new Date(Date.now() + SSO_LOGIN_TTL_MS),
      })
      .execute();
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: redirectUrl(request),
      scope: options.scopes ?? 'openid profile email',
      code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: 'S256',
      state,
      nonce,
    });
    const secure = request.protocol === 'https' ? '; Secure' : '';
    void reply.header(
      'set-cookie',
      `${SSO_STATE_COOKIE}=${state}; HttpOnly; SameSite=Lax; Path=/inbox/sso; Max-Age=${SSO_LOGIN_TTL_MS / 1000}${secure}`,
    );
    return reply.redirect(url.href, 303);
  });

  app.get('/inbox/sso/callback', async (request, reply) => {
    const query = request.query as Record<string, string | undefined>;
    const state = query.state ?? '';
    const cookieState = /(?:^|;\s*)da_sso_state=([^;]+)/.exec(request.headers.cookie ?? '')?.[1];
    // One use: whatever happens next, this login cannot be finished twice.
    const login = state
      ? await db.deleteFrom('inbox_sso_logins').where('state_hash', '=', hash(state)).returningAll().executeTakeFirst()
      : undefined;
    if (!login || login.expires_at.getTime() < Date.now() || cookieState !== state) {
      return page(
        reply,
        400,
        'That sign-in link is unknown, used or expired, or it was started in another browser. Start again.',
      );
    }
    if (query.error)
      return page(reply, 401, `The provider refused the sign-in: ${query.error_description ?? query.error}`);
    const config = await provider();
    const currentUrl = new URL(
      `${redirectUrl(request)}?${new URLSearchParams(query as Record<string, string>).toString()}`,
    );
    let claims: Record<string, unknown>;
    try {
      const tokens = await oidc.authorizationCodeGrant(config, currentUrl, {
        pkceCodeVerifier: login.code_verifier,
        expectedState: state,
        expectedNonce: login.nonce,
      });
      const idClaims = tokens.claims();
      if (!idClaims) throw new Error('the provider sent no ID token');
      const info = await oidc.fetchUserInfo(config, tokens.access_token, idClaims.sub);
      claims = { ...info, ...idClaims };
    } catch (error) {
      request.log.warn({ err: error }, 'single sign-on failed');
      return page(reply, 401, 'The sign-in could not be completed with the provider. Start again.');
    }
    const scope = scopeForRoles(options, claims[options.roleClaim]);
    const who = String(claims.email ?? claims.preferred_username ?? claims.sub);
    if (scope !== 'operator') {
      return page(
        reply,
        403,
        `${who} is signed in with the provider but holds no role that may decide here (${options.roleClaim}: ${JSON.stringify(claims[options.roleClaim] ?? null)}).`,
      );
    }
    const org = orgFromClaims(options, claims);
    if (org === undefined) {
      return page(
        reply,
        403,
        `${who} is signed in with the provider but names no single organisation (${options.orgClaim}: ${JSON.stringify(claims[options.orgClaim!] ?? null)}).`,
      );
    }
    const session = await openSession(db, {
      name: `sso:${who}`.slice(0, 200),
      scope,
      org,
      groups: groupsFromClaims(options, claims),
    });
    setSessionCookie(request, reply, session.id);
    return reply.redirect('/inbox', 303);
  });
}

async function discover(options: SsoOptions): Promise<oidc.Configuration> {
  const issuer = new URL(options.issuer);
  // Plain HTTP only to a provider on this machine (a development or test provider); never across a network.
  const loopback = ['127.0.0.1', 'localhost', '[::1]'].includes(issuer.hostname);
  return oidc.discovery(
    issuer,
    options.clientId,
    undefined,
    options.clientSecret ? oidc.ClientSecretPost(options.clientSecret) : oidc.None(),
    loopback && issuer.protocol === 'http:' ? { execute: [oidc.allowInsecureRequests] } : undefined,
  );
}
