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
  type OrganisationSummary,
} from '../../activities/store/organisations';
import { listSkills, skillScope, upsertSkills, visibleSkills } from '../../activities/store/skills';
import { agentConfig } from '../../activities/store/agents';
import { ApiError } from '../errors';
import type { ApiContext } from '../route-kit';
import * as S from '../schemas';

export function registerOrganisationRoutes({ route, client, db, requireAgent }: ApiContext): void {
  const requireOrganisation = async (name: string): Promise<OrganisationSummary> => {
    const org = await findOrganisation(db, name);
    if (!org) throw new ApiError(404, 'organisation_not_found', `no organisation ${JSON.stringify(name)}`);
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
    handler: async ({ params, body }) => {
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
      return organisationJson(await requireOrganisation(params.org));
    },
  });
  route({
    method: 'GET',
    url: '/v1/organisations/:org',
    scope: 'read',
    summary: 'An organisation: its documents, users (handle, name) and skills (no bodies)',
    params: S.OrgParams,
    response: S.OrganisationSchema,
    handler: async ({ params }) => organisationJson(await requireOrganisation(params.org)),
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
    handler: async ({ params, body }) => {
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
    handler: async ({ query }) => {
      if (query.org) await requireOrganisation(query.org);
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
    handler: async ({ params }) => {
      const agent = await requireAgent(params.agentId);
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
    handler: async ({ body }) =>
      client.announce(body.text, {
        ...(body.org ? { org: body.org } : {}),
        ...(body.expiresAt ? { expiresAt: new Date(body.expiresAt) } : {}),
      }),
  });
  route({
    method: 'GET',
    url: '/v1/announcements',
    scope: 'read',
    summary: `Live system announcements (not expired), newest first, at most ${ANNOUNCEMENTS_LISTED_MAX}; \`?org=\` for those that organisation's agents see (its own and everyone's)`,
    query: S.AnnouncementsQuery,
    response: S.AnnouncementsResponse,
    handler: async ({ query }) => {
      const rows = await liveAnnouncements(db, query.org ? { org: query.org } : {});
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
