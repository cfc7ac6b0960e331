/** `/v1/agents`: create or replace an agent, read it, list them, its usage. */
import path from 'node:path';
import { z } from 'zod';
import { findAgent } from '../../activities/store/agents';
import { InvalidWorkspaceDirError } from '../../activities/store/workspace-dir';
import { orgAllows, orgOfConfig, PLATFORM } from '../../activities/store/tenancy';
import type { AgentRow } from '../../schema/database';
import { ApiError } from '../errors';
import { agentNotFound, upsertOrg } from '../org-walls';
import type { ApiContext } from '../route-kit';
import * as S from '../schemas';

export function registerAgentRoutes({ route, client, db, workspaceRoot, requireAgent }: ApiContext): void {
  route({
    method: 'PUT',
    url: '/v1/agents/:agentId',
    scope: 'operator',
    summary: 'Create or replace an agent (identity files, config, workspace)',
    params: S.AgentIdParams,
    body: S.AgentUpsertBody,
    response: S.AgentSchema,
    handler: async ({ params, body, principal }) => {
      // Organisations: another's agent is unknown here, a body may not name another, and a body without
      // an organisation gets the caller's (only the platform moves an agent between organisations).
      const existing = await findAgent(db, params.agentId);
      if (existing && !orgAllows(principal.org, existing.org)) throw agentNotFound(params.agentId);
      const org = upsertOrg(principal, params.agentId, body.config?.org);
      const config = org !== orgOfConfig(body.config) ? { ...body.config, org } : body.config;
      // The API's working directory means nothing to a caller elsewhere: a relative path is refused.
      if (body.workspaceDir !== undefined && !path.isAbsolute(body.workspaceDir)) {
        throw new ApiError(
          400,
          'invalid_request',
          `invalid agent ${JSON.stringify(params.agentId)}: workspaceDir: ${new InvalidWorkspaceDirError(body.workspaceDir, 'it is not an absolute path').message}`,
        );
      }
      // Without a folder the agent gets `<workspaceRoot>/<org>/<id>` (or keeps the pre-organisation
      // `<workspaceRoot>/<id>` it has); either way the store checks where it lies, refused with 400.
      await client.upsertAgent(
        {
          id: params.agentId,
          name: body.name,
          description: body.description,
          files: body.files,
          config,
          ...(body.workspaceDir !== undefined ? { workspaceDir: body.workspaceDir } : {}),
        },
        { workspaceRoot },
      );
      return agentJson((await findAgent(db, params.agentId))!);
    },
  });
  route({
    method: 'GET',
    url: '/v1/agents/:agentId',
    scope: 'read',
    summary: 'An agent with its identity files',
    params: S.AgentIdParams,
    response: S.AgentWithFilesSchema,
    handler: async ({ params, principal }) => {
      const agent = await requireAgent(params.agentId, principal);
      return {
        ...agentJson(agent),
        files: { soul: agent.soul_md, agents: agent.agents_md, heartbeat: agent.heartbeat_md, tools: agent.tools_md },
      };
    },
  });
  route({
    method: 'GET',
    url: '/v1/agents',
    scope: 'read',
    summary: 'Every agent',
    response: z.object({ agents: z.array(S.AgentSchema) }),
    handler: async ({ principal }) => {
      let query = db.selectFrom('agents').selectAll().orderBy('id');
      if (principal.org !== PLATFORM) query = query.where('org', '=', principal.org);
      return { agents: (await query.execute()).map(agentJson) };
    },
  });
  route({
    method: 'GET',
    url: '/v1/agents/:agentId/usage',
    scope: 'read',
    summary: "An agent's LLM tokens, cost and call count (optionally since an instant)",
    params: S.AgentIdParams,
    query: S.UsageQuery,
    response: S.UsageResponse,
    handler: async ({ params, query, principal }) => {
      await requireAgent(params.agentId, principal);
      return client.agentUsage(params.agentId, { since: query.since ? new Date(query.since) : undefined });
    },
  });
}

function agentJson(agent: AgentRow) {
  return {
    id: agent.id,
    name: agent.name,
    description: agent.description,
    contentHash: agent.content_hash,
    config: agent.config as z.infer<typeof S.AgentConfigSchema>,
    workspaceDir: agent.workspace_dir,
    createdAt: agent.created_at.toISOString(),
    updatedAt: agent.updated_at.toISOString(),
  };
}
