/**
 * `/v1/organisations`, `/v1/skills`, `/v1/agents/:agentId/skills` and `/v1/announcements`: what the
 * CLI's `org upsert`, `skills` and `org announce` do, over HTTP. The stores validate (the same rules as
 * a folder) and write; their errors become 400s and 404s in api/errors.ts.
 */
import {
  ANNOUNCEMENTS_LISTED_MAX,
  findOrganisation,
  liveAnnouncements,
  upsertOrganisation,
  userFromProfile,
  UnknownOrganisationError,
  type OrganisationSummary,
} from '../../activities/store/organisations';
import { orgAllows } from '../../activities/store/tenancy';
import { listSkills, skillScope, upsertSkills, visibleSkills } from '../../activities/store/skills';
import { agentConfig } from '../../activities/store/agents';
import { isPlatform, organisationNotFound, platformOnly, requireOwnOrganisation } from '../org-walls';
import type { ApiContext } from '../route-kit';
import * as S from '../schemas';
import type { ApiPrincipal } from '../tokens';

export function registerOrganisationRoutes({ route, client, db, requireAgent }: ApiContext): void {
  /** The organisation when the principal reaches it (its own; any for the platform), else 404. */
  const requireOrganisation = async (name: string, principal: ApiPrincipal): Promise<OrganisationSummary> => {
    requireOwnOrganisation(principal, name);
    const org = await findOrganisation(db, name);
    if (!org) throw organisationNotFound(name);
    return org;
  };

  route({
    method: 'PUT',
    url: '/v1/organisations/:org',
    scope: 'operator',
    summary:
      "Create or replace an organisation: CONTEXT.md and ANNOUNCEMENTS.md text, user profiles and the organisation's skills (exactly those given: users and skills left out are removed). Same limits as an organisation folder; agents join with config.org",
    params: S.OrgParams,
    body: S.OrganisationUpsertBody,
    response: S.OrganisationSchema,
    handler: async ({ params, body, principal }) => {
      requireOwnOrganisation(principal, params.org);
      await upsertOrganisation(db, {
        name: params.org,
        context: body.context?.trim() ?? '',
        announcements: body.announcements?.trim() ?? '',
        users: (body.users ?? []).map((u) => userFromProfile(u.handle, u.profile, u.name)),
        skills: (body.skills ?? []).map((s) => ({
          name: s.name,
          description: s.description,
          category: s.category ?? '',
          body: s.body.trim(),
        })),
      });
      return organisationJson(await requireOrganisation(params.org, principal));
    },
  });
  route({
    method: 'GET',
    url: '/v1/organisations/:org',
    scope: 'read',
    summary: 'An organisation: its documents, users (handle, name) and skills (no bodies)',
    params: S.OrgParams,
    response: S.OrganisationSchema,
    handler: async ({ params, principal }) => organisationJson(await requireOrganisation(params.org, principal)),
  });

  route({
    method: 'PUT',
    url: '/v1/skills/:name',
    scope: 'operator',
    summary:
      'Create or replace a shared skill (every agent may discover it; bind it with config.skills). Same limits as a SKILL.md',
    params: S.SkillNameParams,
    body: S.SharedSkillBody,
    response: S.SkillSchema,
    handler: async ({ params, body, principal }) => {
      // Every organisation's agents may discover a shared skill: writing one is the platform's.
      if (!isPlatform(principal)) throw platformOnly('a shared skill', principal);
      const skill = {
        name: params.name,
        description: body.description,
        category: body.category ?? '',
        body: body.body.trim(),
      };
      await upsertSkills(db, [skill], 'shared');
      return {
        name: skill.name,
        description: skill.description,
        category: skill.category,
        scope: skillScope('shared'),
      };
    },
  });
  route({
    method: 'GET',
    url: '/v1/skills',
    scope: 'read',
    summary: "Shared skills, without bodies, by name; `?org=` adds that organisation's (the scope says whose)",
    query: S.SkillsQuery,
    response: S.SkillsResponse,
    handler: async ({ query, principal }) => {
      if (query.org) await requireOrganisation(query.org, principal);
      return { skills: await listSkills(db, query.org ? { org: query.org } : {}) };
    },
  });
  route({
    method: 'GET',
    url: '/v1/agents/:agentId/skills',
    scope: 'read',
    summary:
      "The skills an agent can see (its own, its organisation's, shared; the most specific of a name wins), whether each is bound, without bodies",
    params: S.AgentIdParams,
    response: S.AgentSkillsResponse,
    handler: async ({ params, principal }) => {
      const agent = await requireAgent(params.agentId, principal);
      const skills = await visibleSkills(db, agent.id, agentConfig(agent).org);
      return {
        skills: skills.map((s) => ({
          name: s.name,
          description: s.description,
          category: s.category,
          scope: s.scope,
          bound: s.bound,
        })),
      };
    },
  });

  route({
    method: 'POST',
    url: '/v1/announcements',
    scope: 'operator',
    summary:
      'Post a system announcement to the agents of an organisation (`org`) or to every agent, until `expiresAt` (absent: it never expires)',
    body: S.AnnouncementBody,
    response: S.AnnouncementIdResponse,
    status: 201,
    handler: async ({ body, principal }) => {
      // An organisation's token announces to its own organisation; to every agent is the platform's.
      if (body.org && !orgAllows(principal.org, body.org)) throw new UnknownOrganisationError(body.org);
      else if (!isPlatform(principal))
        throw platformOnly(`an announcement to every agent (name your organisation in "org")`, principal);
      return client.announce(body.text, {
        ...(body.org ? { org: body.org } : {}),
        ...(body.expiresAt ? { expiresAt: new Date(body.expiresAt) } : {}),
      });
    },
  });
  route({
    method: 'GET',
    url: '/v1/announcements',
    scope: 'read',
    summary: `Live system announcements (not expired), newest first, at most ${ANNOUNCEMENTS_LISTED_MAX}; \`?org=\` for those that organisation's agents see (its own and everyone's)`,
    query: S.AnnouncementsQuery,
    response: S.AnnouncementsResponse,
    handler: async ({ query, principal }) => {
      if (query.org && !orgAllows(principal.org, query.org)) throw new UnknownOrganisationError(query.org);
      // An organisation's token sees what its agents see: its own announcements and everyone's (its
      // organisation need not have a folder: the default one seldom has).
      const rows =
        query.org || isPlatform(principal)
          ? await liveAnnouncements(db, query.org ? { org: query.org } : {})
          : await liveAnnouncements(db, { org: principal.org!, folderless: true });
      return {
        announcements: rows.map((a) => ({
          id: a.id,
          text: a.text,
          org: a.org,
          createdAt: a.createdAt.toISOString(),
          expiresAt: a.expiresAt ? a.expiresAt.toISOString() : null,
        })),
      };
    },
  });
}

function organisationJson(org: OrganisationSummary) {
  return { ...org, updatedAt: org.updatedAt.toISOString() };
}
